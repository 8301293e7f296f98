#pragma once
// The CUDA runtime as the CUDA backend sees it: errors as statuses, and the devices the
// driver reports. Host code only (the CUDA runtime API is a C API): any translation unit
// may include this, compiled by nvcc or not; link CUDA::cudart (backplane::cuda does).
//
// A machine without an NVIDIA driver, or whose driver is older than the runtime, is not
// an error of the program: physical_devices() says so in a status (errc::not_supported,
// naming the cause), and callers (the registry, the tests) show no CUDA device.

#include <backplane/core/concepts.hpp>
#include <backplane/core/error.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace backplane::cuda {

/// What the driver reports of one device.
struct physical_device_info {
    int index = 0;
    std::string name;              ///< e.g. "NVIDIA H100 80GB HBM3"
    int cc_major = 0, cc_minor = 0; ///< compute capability (9.0 for an H100)
    std::size_t total_memory = 0;  ///< bytes of global memory
    int multiprocessors = 0;
    bool integrated = false; ///< shares memory with the host (device_kind::igpu)
    int pci_bus = 0;
};

namespace detail {

/// A status for a CUDA runtime error: device_error (alloc_failed for out of memory,
/// not_supported for a missing or too old driver), with the runtime's own name and text
/// of the error and its code as the native code.
inline status fail(std::string_view what, cudaError_t e) {
    errc code = errc::device_error;
    if (e == cudaErrorMemoryAllocation) code = errc::alloc_failed;
    if (e == cudaErrorInsufficientDriver || e == cudaErrorNoDevice || e == cudaErrorStubLibrary)
        code = errc::not_supported;
    return {code,
            "cuda: " + std::string(what) + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")",
            static_cast<std::int32_t>(e)};
}

/// success, or fail(what, e).
inline status check(std::string_view what, cudaError_t e) { return e == cudaSuccess ? status{} : fail(what, e); }

/// Waits for the work queued on every device (each device synchronized in turn; the
/// calling thread's current device is kept). What frees memory calls it first: a stream
/// of any device may still read or write that memory (a peer copy reads another device's
/// memory; every device transfers from pinned host memory), and the runtime's own
/// implicit synchronisation in cudaFree is not documented to cover other devices' streams.
/// Errors (a lost device) cannot be reported by a destructor: they are cleared.
inline void wait_for_devices() noexcept {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError(); // no driver: nothing can be using the memory
        return;
    }
    int current = -1;
    const bool known = cudaGetDevice(&current) == cudaSuccess;
    for (int i = 0; i < n; ++i)
        if (cudaSetDevice(i) == cudaSuccess) (void)cudaDeviceSynchronize();
    if (known) (void)cudaSetDevice(current);
    (void)cudaGetLastError();
}

} // namespace detail

/// Every device the driver reports, in its order; errc::not_supported when there is no
/// driver, a driver older than the runtime, or no device.
[[nodiscard]] inline result<std::vector<physical_device_info>> physical_devices() {
    int n = 0;
    if (const cudaError_t e = cudaGetDeviceCount(&n); e != cudaSuccess) {
        (void)cudaGetLastError(); // not sticky: clear it
        return detail::fail("counting devices", e);
    }
    if (n == 0) return status(errc::not_supported, "cuda: the driver reports no device");
    std::vector<physical_device_info> out;
    out.reserve(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) {
        cudaDeviceProp p{};
        if (auto s = detail::check("reading the properties of device " + std::to_string(i), cudaGetDeviceProperties(&p, i)); !s)
            return s;
        physical_device_info d;
        d.index = i;
        d.name = p.name;
        d.cc_major = p.major;
        d.cc_minor = p.minor;
        d.total_memory = p.totalGlobalMem;
        d.multiprocessors = p.multiProcessorCount;
        d.integrated = p.integrated != 0;
        d.pci_bus = p.pciBusID;
        out.push_back(std::move(d));
    }
    return out;
}

/// The version of the CUDA runtime this program links, as "13.0".
[[nodiscard]] inline std::string runtime_version() {
    int v = 0;
    if (cudaRuntimeGetVersion(&v) != cudaSuccess) return "unknown";
    return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
}

/// The version of the CUDA driver installed, as "13.0"; "none" without a driver.
[[nodiscard]] inline std::string driver_version() {
    int v = 0;
    if (cudaDriverGetVersion(&v) != cudaSuccess || v == 0) return "none";
    return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
}

} // namespace backplane::cuda
