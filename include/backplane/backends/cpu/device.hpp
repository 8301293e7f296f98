#pragma once
// The CPU device: the host processor and its memory.

#include <backplane/backends/cpu/isa.hpp>
#include <backplane/backends/cpu/supports.hpp>
#include <backplane/core/concepts.hpp>
#include <backplane/core/fusion_set.hpp>
#include <backplane/memory/buffer.hpp>
#include <backplane/memory/host_buffer.hpp>

#include <algorithm>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <unistd.h>

namespace backplane {

template <class Tag = void>
class basic_cpu_backend;
namespace cpu {
class thread_pool;
}
using cpu_backend = basic_cpu_backend<>;

/// How a cpu_backend starts (both settings can be changed later on the backend).
struct cpu_backend_params {
    /// Threads computing a graph, the calling thread included; 0 (or less): one per
    /// hardware thread.
    int n_threads = 0;
    /// Reference kernels only, no fast paths: the oracle other backends are tested
    /// against (still multi-threaded).
    bool reference = false;
    /// A thread pool shared with other backends (basic_cpu_backend::set_thread_pool);
    /// null: a private pool of n_threads threads.
    std::shared_ptr<cpu::thread_pool> pool = nullptr;
    /// The groups of nodes it may compute as one (core/fusion.hpp; reference mode fuses
    /// none): all by default, fusion_set::none() for every node on its own.
    fusion_set fusions = {};
};

class cpu_device {
public:
    /// The process-wide CPU device.
    static const cpu_device& instance() noexcept {
        static const cpu_device d;
        return d;
    }

    [[nodiscard]] std::string_view name() const noexcept { return "CPU"; }
    [[nodiscard]] std::string_view description() const noexcept { return description_; }
    [[nodiscard]] device_kind kind() const noexcept { return device_kind::cpu; }
    [[nodiscard]] memory_info memory() const noexcept {
        const long page = ::sysconf(_SC_PAGESIZE);
        const long total = ::sysconf(_SC_PHYS_PAGES);
        const long avail = ::sysconf(_SC_AVPHYS_PAGES);
        if (page <= 0 || total <= 0) return {};
        return {static_cast<std::size_t>(avail > 0 ? avail : 0) * static_cast<std::size_t>(page),
                static_cast<std::size_t>(total) * static_cast<std::size_t>(page)};
    }
    [[nodiscard]] device_caps caps() const noexcept {
        return {.async = false, .host_buffer = true, .buffer_from_host_ptr = true, .events = false};
    }
    [[nodiscard]] const cpu_buffer_type& buffer_type() const noexcept { return cpu_buffer_type::instance(); }
    [[nodiscard]] const cpu_buffer_type& host_buffer_type() const noexcept { return cpu_buffer_type::instance(); }
    [[nodiscard]] bool supports_op(const tensor& t) const noexcept { return cpu::supports_op(t); }
    [[nodiscard]] bool supports_buffer_type(const buffer_type_ref& bt) const { return bt.is_host(); }

    /// Wraps user memory [ptr, ptr + size) as a CPU buffer; the user keeps it alive.
    [[nodiscard]] result<buffer_ptr> buffer_from_host_ptr(void* ptr, std::size_t size) const {
        if (ptr == nullptr && size != 0) return status(errc::invalid_argument, "buffer_from_host_ptr: null pointer");
        return make_buffer(host_buffer::from_ptr(ptr, size), buffer_type_ref(cpu_buffer_type::instance()));
    }

    /// The instruction-set extensions the kernels can use on this CPU ("AVX2" = "1", ...;
    /// only those present), the level the kernels run at ("kernels" = "avx2") and the
    /// hardware threads.
    [[nodiscard]] std::vector<feature> features() const {
        std::vector<feature> out;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
        __builtin_cpu_init();
        auto has = [&](const char* name, bool present) {
            if (present) out.push_back({name, "1"});
        };
        has("SSE3", __builtin_cpu_supports("sse3"));
        has("SSSE3", __builtin_cpu_supports("ssse3"));
        has("SSE4.2", __builtin_cpu_supports("sse4.2"));
        has("AVX", __builtin_cpu_supports("avx"));
        has("AVX2", __builtin_cpu_supports("avx2"));
        has("FMA", __builtin_cpu_supports("fma"));
#if !defined(__clang__)
        has("F16C", __builtin_cpu_supports("f16c"));
#endif
        has("AVX512F", __builtin_cpu_supports("avx512f"));
        has("AVX512BW", __builtin_cpu_supports("avx512bw"));
        has("AVX512VL", __builtin_cpu_supports("avx512vl"));
        has("AVX512DQ", __builtin_cpu_supports("avx512dq"));
        has("AVX512_VNNI", __builtin_cpu_supports("avx512vnni"));
#endif
        out.push_back({"kernels", std::string(to_string(cpu::active_isa()))});
        out.push_back({"threads", std::to_string(std::max(1u, std::thread::hardware_concurrency()))});
        return out;
    }

    /// A new CPU backend (defined in backends/cpu/backend.hpp).
    [[nodiscard]] cpu_backend make_backend(const cpu_backend_params& params = {}) const;

private:
    cpu_device() {
        const unsigned n = std::thread::hardware_concurrency();
        description_ = "host CPU (" + std::to_string(n ? n : 1) + " hardware threads)";
    }
    std::string description_;
};

} // namespace backplane
