#pragma once
// The BLAS device: the host processor seen through the BLAS library, an "accel" device
// that runs big matrix products. It has no memory of its own: its buffer type is the
// CPU's (cpu_buffer_type), so tensors in CPU buffers are its tensors too, and the
// scheduler's upgrade pass can move a mul_mat from the CPU backend to it without a copy.

#include <backplane/backends/blas/cblas.hpp>
#include <backplane/backends/blas/supports.hpp>
#include <backplane/backends/cpu/device.hpp>
#include <backplane/core/concepts.hpp>
#include <backplane/memory/buffer.hpp>
#include <backplane/memory/host_buffer.hpp>

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace backplane {

template <class Tag = void>
class basic_blas_backend;
/// The BLAS backend (backends/blas/backend.hpp).
using blas_backend = basic_blas_backend<>;

/// How a blas_backend starts (both settings can be changed later on the backend).
struct blas_backend_params {
    /// Threads of the BLAS library and of the f16 / bf16 weight conversion, the calling
    /// thread included; 0 (or less): one per hardware thread.
    int n_threads = 0;
    /// Smallest M, N and K of a mul_mat the backend takes (supports_op refuses smaller
    /// ones, which then stay on the CPU backend); 0 (or less) takes every size.
    int min_batch = blas::default_min_batch;
};

class blas_device {
public:
    /// The process-wide BLAS device.
    static const blas_device& instance() noexcept {
        static const blas_device d;
        return d;
    }

    [[nodiscard]] std::string_view name() const noexcept { return "BLAS"; }
    /// The library and, for OpenBLAS, the kernel family it runs ("OpenBLAS 0.3.21, core
    /// SkylakeX"): "core Prescott" on a recent x86 CPU means OPENBLAS_CORETYPE should be
    /// set (docs/backends/blas.md).
    [[nodiscard]] std::string_view description() const noexcept { return description_; }
    [[nodiscard]] device_kind kind() const noexcept { return device_kind::accel; }
    /// The host's memory (the device has none of its own).
    [[nodiscard]] memory_info memory() const noexcept { return cpu_device::instance().memory(); }
    [[nodiscard]] device_caps caps() const noexcept {
        return {.async = false, .host_buffer = false, .buffer_from_host_ptr = true, .events = false};
    }
    /// The CPU buffer type: the BLAS library reads and writes host memory in place.
    [[nodiscard]] const cpu_buffer_type& buffer_type() const noexcept { return cpu_buffer_type::instance(); }
    /// What a backend with the default parameters computes (blas::supports_op).
    [[nodiscard]] bool supports_op(const tensor& t) const noexcept { return blas::supports_op(t); }
    [[nodiscard]] bool supports_buffer_type(const buffer_type_ref& bt) const { return bt.is_host(); }

    /// Wraps user memory [ptr, ptr + size) as a CPU buffer; the user keeps it alive.
    [[nodiscard]] result<buffer_ptr> buffer_from_host_ptr(void* ptr, std::size_t size) const {
        return cpu_device::instance().buffer_from_host_ptr(ptr, size);
    }

    /// The library ("library" = its description) and the smallest product a backend
    /// takes by default.
    [[nodiscard]] std::vector<feature> features() const {
        return {{"library", description_}, {"min_batch", std::to_string(blas::default_min_batch)}};
    }

    /// A new BLAS backend (defined in backends/blas/backend.hpp).
    [[nodiscard]] blas_backend make_backend(const blas_backend_params& params = {}) const;

private:
    blas_device() noexcept {
        try {
            description_ = blas::detail::library_description();
        } catch (...) { // no memory for a string: an empty description, never an abort
        }
    }
    std::string description_;
};

} // namespace backplane
