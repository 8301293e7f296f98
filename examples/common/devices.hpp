#pragma once
// The device an example program offloads to: --device NAME from the registry, else the
// best GPU-like device.

#include <backplane/runtime.hpp>

#include <optional>
#include <string>

namespace examples {

/// The device to offload to: `name` from the registry (none for "CPU"), else a GPU, else
/// the first CUDA or Vulkan device; none for the CPU alone.
inline backplane::result<std::optional<backplane::any_device>> choose_device(const backplane::registry& reg,
                                                                             const std::string& name) {
    using backplane::any_device;
    auto cpu = reg.device("CPU");
    if (!cpu)
        return cpu.error();
    if (!name.empty()) {
        auto d = reg.device(name);
        if (!d)
            return d.error();
        if (*d == *cpu)
            return std::optional<any_device>();
        return std::optional<any_device>(*d);
    }
    if (auto best = reg.best_device(); best && (best->kind() == backplane::device_kind::gpu ||
                                                best->kind() == backplane::device_kind::igpu))
        return std::optional<any_device>(*best);
    for (const char* api : {"CUDA", "Vulkan"})
        if (auto r = reg.reg(api); r)
            for (const any_device& d : r->devices())
                return std::optional<any_device>(d);
    return std::optional<any_device>();
}

} // namespace examples
