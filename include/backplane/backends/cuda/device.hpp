#pragma once
// A CUDA device (host code only; any translation unit may include it).
//
//   auto dev = cuda_device::open({.index = 0});      // result<cuda_device>
//   auto be = dev->make_backend();                   // result<cuda_backend>: a stream
//
// Models backplane::device, host_buffer_device (pinned host memory, cudaMallocHost),
// host_ptr_device (user memory pinned in place, cudaHostRegister), offload_device and
// featured_device. A machine without a driver or device gets a status from open(), never
// an abort. Copies of a cuda_device share one description of the device.

#include <backplane/backends/cuda/memory.hpp>
#include <backplane/backends/cuda/runtime.hpp>
#include <backplane/backends/cuda/supports.hpp>
#include <backplane/core/concepts.hpp>
#include <backplane/core/error.hpp>
#include <backplane/memory/buffer.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace backplane {

class cuda_backend;

/// How a cuda_device is opened.
struct cuda_device_params {
    int index = 0; ///< the device ordinal (cuda::physical_devices())
    /// Batches (a node's ne[1]) from which the scheduler may run an op whose weights sit in
    /// host memory on this device, copying the weights over (offload_op).
    std::int64_t offload_min_batch = 32;
};

/// How a cuda_backend runs its graphs.
struct cuda_backend_params {
    /// mul_mat of f32 / f16 / bf16 (and of quantized weights at batch > 8) through
    /// cuBLAS when the kernels were built with it; the own kernels otherwise.
    bool cublas = true;
    /// Capture a graph's launches into a CUDA graph the second time the same graph (same
    /// nodes, shapes, addresses) comes, and replay that graph afterwards.
    bool cuda_graphs = true;
};

namespace cuda::detail {

/// What every copy of a cuda_device shares.
struct device_info {
    physical_device_info phys;
    const cuda_buffer_type* bt = nullptr;
    cuda_device_params params;
    std::string description;
};

} // namespace cuda::detail

class cuda_device {
public:
    /// Device params.index; errc::not_supported without a driver or device,
    /// errc::invalid_argument for an index the driver does not report.
    [[nodiscard]] static result<cuda_device> open(const cuda_device_params& params = {}) {
        auto devs = cuda::physical_devices();
        if (!devs) return devs.error();
        if (params.index < 0 || static_cast<std::size_t>(params.index) >= devs->size())
            return status(errc::invalid_argument, "cuda: no device " + std::to_string(params.index) +
                                                      " (the driver reports " + std::to_string(devs->size()) + ")");
        return from((*devs)[static_cast<std::size_t>(params.index)], params);
    }

    /// Every device of this machine, opened with default parameters; not_supported
    /// without a driver or device.
    [[nodiscard]] static result<std::vector<cuda_device>> all() {
        auto devs = cuda::physical_devices(); // asked once for all of them
        if (!devs) return devs.error();
        std::vector<cuda_device> out;
        for (const auto& p : *devs) {
            out.push_back(from(p, {.index = p.index}));
        }
        return out;
    }

    /// "CUDA0", "CUDA1", ...: the name of its buffer type too.
    [[nodiscard]] std::string_view name() const noexcept { return info_->bt->name(); }
    [[nodiscard]] std::string_view description() const noexcept { return info_->description; }
    [[nodiscard]] device_kind kind() const noexcept {
        return info_->phys.integrated ? device_kind::igpu : device_kind::gpu;
    }
    /// Free and total bytes as the driver reports them now (cudaMemGetInfo); zeros when
    /// it cannot say.
    [[nodiscard]] memory_info memory() const noexcept {
        int current = -1;
        const bool restore = cudaGetDevice(&current) == cudaSuccess && current != index();
        std::size_t free = 0, total = 0;
        if (cudaSetDevice(index()) != cudaSuccess || cudaMemGetInfo(&free, &total) != cudaSuccess) {
            (void)cudaGetLastError();
            free = total = 0;
        }
        if (restore) (void)cudaSetDevice(current);
        return {free, total};
    }
    [[nodiscard]] device_caps caps() const noexcept {
        return {.async = true, .host_buffer = true, .buffer_from_host_ptr = true, .events = true};
    }
    [[nodiscard]] const cuda_buffer_type& buffer_type() const noexcept { return *info_->bt; }
    /// Pinned host memory: the CPU uses it in place and every device transfers from it
    /// at full speed.
    [[nodiscard]] const cuda_host_buffer_type& host_buffer_type() const noexcept {
        return cuda_host_buffer_type::instance();
    }
    [[nodiscard]] bool supports_op(const tensor& t) const noexcept { return cuda::supports_op(t); }
    /// Its own device memory.
    [[nodiscard]] bool supports_buffer_type(const buffer_type_ref& bt) const noexcept {
        return bt == buffer_type_ref(*info_->bt);
    }
    /// Whether an op over weights in host memory is worth running here, weights copied
    /// over: batches of offload_min_batch and more (get_rows reads a few rows only: never).
    [[nodiscard]] bool offload_op(const tensor& t) const noexcept {
        return t.op != op_kind::get_rows && t.op != op_kind::none && !is_view_op(t.op) &&
               t.ne[1] >= info_->params.offload_min_batch;
    }
    /// User memory [ptr, ptr + size) pinned in place (cudaHostRegister) as a host buffer
    /// of the pinned type; the user keeps it alive, it is unpinned with the buffer.
    [[nodiscard]] result<buffer_ptr> buffer_from_host_ptr(void* ptr, std::size_t size) const {
        auto b = cuda_host_buffer::register_memory(ptr, size);
        if (!b) return b.error();
        return make_buffer(std::move(*b), buffer_type_ref(cuda_host_buffer_type::instance()));
    }

    [[nodiscard]] int index() const noexcept { return info_->phys.index; }
    [[nodiscard]] const cuda::physical_device_info& properties() const noexcept { return info_->phys; }
    [[nodiscard]] const cuda_device_params& params() const noexcept { return info_->params; }

    /// Compute capability, multiprocessors, memory, PCI bus, the runtime and driver
    /// versions, and whether the kernels were built with cuBLAS.
    [[nodiscard]] inline std::vector<feature> features() const;

    /// A new stream on this device (defined in backends/cuda/backend.hpp).
    [[nodiscard]] inline result<cuda_backend> make_backend(const cuda_backend_params& params = {}) const;

private:
    explicit cuda_device(std::shared_ptr<const cuda::detail::device_info> info) : info_(std::move(info)) {}

    /// The device the driver described as p.
    static cuda_device from(const cuda::physical_device_info& p, const cuda_device_params& params) {
        auto info = std::make_shared<cuda::detail::device_info>();
        info->phys = p;
        info->bt = cuda_buffer_type::of(p);
        info->params = params;
        info->description = p.name + " (compute capability " + std::to_string(p.cc_major) + "." +
                            std::to_string(p.cc_minor) + ", " + std::to_string(p.multiprocessors) + " SMs, " +
                            std::to_string(p.total_memory >> 20) + " MiB)";
        return cuda_device(std::move(info));
    }
    std::shared_ptr<const cuda::detail::device_info> info_;
};

} // namespace backplane
