// The Vulkan backend as a plugin: libbackplane-vulkan.so. Its registry entry is the one a
// program with Vulkan compiled in gets (vulkan_reg: one device per physical device); its
// score is 0 (not loaded) on a machine without a Vulkan driver or device.

#include <backplane/runtime/builtin.hpp>
#include <backplane/runtime/plugin.hpp>

namespace {

int score() {
    auto devices = backplane::vulkan::physical_devices();
    return devices && !devices->empty() ? 100 : 0;
}

} // namespace

BACKPLANE_PLUGIN("Vulkan", backplane::vulkan_reg, score)
