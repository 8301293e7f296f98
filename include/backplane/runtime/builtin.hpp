#pragma once
// The registry entries of the backends compiled into a program: the CPU always, BLAS
// when BACKPLANE_WITH_BLAS, Vulkan when BACKPLANE_WITH_VULKAN, CUDA when
// BACKPLANE_WITH_CUDA (the CMake targets backplane::blas, backplane::vulkan and
// backplane::cuda define these for whatever links them). Every translation unit of a
// program must see the same definitions.
//
// cpu_reg(), blas_reg(), vulkan_reg() and cuda_reg() are also what a plugin of that
// backend returns.

#include <backplane/enabled.hpp> // the headers of the backends compiled in
#include <backplane/runtime/reg.hpp>

#include <string>
#include <vector>

namespace backplane {

/// The CPU: one device, features = the CPU's instruction-set extensions.
inline backend_reg cpu_reg() {
    return {"CPU",
            [] { return result<std::vector<any_device>>(std::vector{any_device::borrow(cpu_device::instance())}); },
            [](const std::vector<any_device>&) { return cpu_device::instance().features(); }};
}

#if defined(BACKPLANE_WITH_BLAS) && BACKPLANE_WITH_BLAS
/// BLAS: one accel device sharing the CPU's memory.
inline backend_reg blas_reg() {
    return {"BLAS",
            [] { return result<std::vector<any_device>>(std::vector{any_device::borrow(blas_device::instance())}); },
            [](const std::vector<any_device>&) { return blas_device::instance().features(); }};
}
#endif

#if defined(BACKPLANE_WITH_VULKAN) && BACKPLANE_WITH_VULKAN
/// Vulkan: one device per physical device of the instance ("Vulkan0", ...); features are
/// each device's, named "<device>.<feature>" ("Vulkan0.fp16"), plus "validation".
/// No Vulkan driver: no devices, and enumeration_status() says why.
inline backend_reg vulkan_reg() {
    return {"Vulkan",
            []() -> result<std::vector<any_device>> {
                auto phys = vulkan::physical_devices();
                if (!phys) return phys.error();
                std::vector<any_device> out;
                status first_error;
                for (const auto& p : *phys) {
                    auto d = vulkan_device::open({.index = p.index});
                    if (!d) {
                        if (first_error) first_error = d.error();
                        continue;
                    }
                    out.push_back(any_device::make(std::move(*d)));
                }
                if (out.empty() && !first_error) return first_error;
                return out;
            },
            [](const std::vector<any_device>& devices) {
                std::vector<feature> out;
                for (const auto& d : devices)
                    for (auto& f : d.features()) out.push_back({std::string(d.name()) + "." + f.name, std::move(f.value)});
                out.push_back({"validation", vulkan::validation_active() ? "1" : "0"});
                return out;
            }};
}
#endif

#if defined(BACKPLANE_WITH_CUDA) && BACKPLANE_WITH_CUDA
/// CUDA: one device per GPU the driver reports ("CUDA0", ...); features are each
/// device's, named "<device>.<feature>" ("CUDA0.compute_capability"), plus the runtime and
/// driver versions. No driver or no GPU: no devices, and enumeration_status() says why.
inline backend_reg cuda_reg() {
    return {"CUDA",
            []() -> result<std::vector<any_device>> {
                auto devs = cuda_device::all();
                if (!devs) return devs.error();
                std::vector<any_device> out;
                for (auto& d : *devs) out.push_back(any_device::make(std::move(d)));
                return out;
            },
            [](const std::vector<any_device>& devices) {
                std::vector<feature> out;
                for (const auto& d : devices)
                    for (auto& f : d.features()) out.push_back({std::string(d.name()) + "." + f.name, std::move(f.value)});
                out.push_back({"runtime", cuda::runtime_version()});
                out.push_back({"driver", cuda::driver_version()});
                return out;
            }};
}
#endif

namespace detail {
/// The compiled-in entries, in the order the registry lists them (GPUs first).
inline std::vector<backend_reg> builtin_regs() {
    std::vector<backend_reg> out;
#if defined(BACKPLANE_WITH_CUDA) && BACKPLANE_WITH_CUDA
    out.push_back(cuda_reg());
#endif
#if defined(BACKPLANE_WITH_VULKAN) && BACKPLANE_WITH_VULKAN
    out.push_back(vulkan_reg());
#endif
#if defined(BACKPLANE_WITH_BLAS) && BACKPLANE_WITH_BLAS
    out.push_back(blas_reg());
#endif
    out.push_back(cpu_reg());
    return out;
}
} // namespace detail

} // namespace backplane
