#pragma once
// The CPU device: the host processor and its memory.

#include <backplane/backends/cpu/supports.hpp>
#include <backplane/core/concepts.hpp>
#include <backplane/memory/buffer.hpp>
#include <backplane/memory/host_buffer.hpp>

#include <cstddef>
#include <string>
#include <string_view>
#include <thread>

#include <unistd.h>

namespace backplane {

template <class Tag = void>
class basic_cpu_backend;
using cpu_backend = basic_cpu_backend<>;

/// How a cpu_backend starts (both settings can be changed later on the backend).
struct cpu_backend_params {
    /// Threads computing a graph, the calling thread included; 0 (or less): one per
    /// hardware thread.
    int n_threads = 0;
    /// Reference kernels only, no fast paths: the oracle other backends are tested
    /// against (still multi-threaded).
    bool reference = false;
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
