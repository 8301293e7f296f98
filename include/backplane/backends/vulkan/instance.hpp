#pragma once
// The process-wide Vulkan instance, the physical devices it sees, and the validation
// messages counted while it lives.
//
// The instance is made on first use and kept until exit. With the Khronos validation
// layer enabled (VK_INSTANCE_LAYERS=VK_LAYER_KHRONOS_validation, or
// BACKPLANE_VULKAN_VALIDATION=1 to ask for it here), every warning and error it reports
// is counted and kept: tests fail on any (validation_message_count()).

#include <backplane/backends/vulkan/detail/vk.hpp>
#include <backplane/core/concepts.hpp>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace backplane::vulkan {

/// What the instance reports of one physical device.
struct physical_device_info {
    std::size_t index = 0;
    std::string name;        ///< the driver's name, e.g. "llvmpipe (LLVM 15.0.6, 256 bits)"
    device_kind kind = device_kind::gpu;
    std::uint32_t api_version = 0;
    std::size_t device_local_bytes = 0; ///< sum of its device-local heaps
};

namespace detail {

struct instance_state {
    vk::Instance instance;
    vk::DebugUtilsMessengerEXT messenger;
    vk::DispatchLoaderDynamic dld;
    std::vector<vk::PhysicalDevice> physical;
    status error; // why there is no instance
    bool validating = false; // the validation layer is on and its messages are counted
    std::atomic<std::uint64_t> n_messages{0};
    std::mutex m;
    std::deque<std::string> messages; // the last few

    ~instance_state() {
        if (!instance) return;
        if (messenger) instance.destroyDebugUtilsMessengerEXT(messenger, nullptr, dld);
        instance.destroy();
    }
};

inline VKAPI_ATTR VkBool32 VKAPI_CALL on_validation_message(VkDebugUtilsMessageSeverityFlagBitsEXT,
                                                             VkDebugUtilsMessageTypeFlagsEXT,
                                                             const VkDebugUtilsMessengerCallbackDataEXT* data,
                                                             void* user) {
    auto* s = static_cast<instance_state*>(user);
    s->n_messages.fetch_add(1, std::memory_order_relaxed);
    std::lock_guard lk(s->m);
    s->messages.emplace_back(data != nullptr && data->pMessage != nullptr ? data->pMessage : "(no message)");
    if (s->messages.size() > 16) s->messages.pop_front();
    return VK_FALSE;
}

inline bool env_on(const char* name) {
    const char* v = std::getenv(name);
    return v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
}

inline bool validation_requested() {
    if (env_on("BACKPLANE_VULKAN_VALIDATION")) return true;
    const char* layers = std::getenv("VK_INSTANCE_LAYERS");
    return layers != nullptr && std::strstr(layers, "VK_LAYER_KHRONOS_validation") != nullptr;
}

inline void make_instance(instance_state& s) {
    s.error = guarded("vulkan: ", "creating the instance", [&]() -> status {
        vk::ApplicationInfo app("backplane", 1, "backplane", 1, VK_API_VERSION_1_2);
        std::vector<const char*> layers, extensions;
        const bool validation = validation_requested();
        bool debug_utils = false;
        if (validation) {
            for (const auto& e : vk::enumerateInstanceExtensionProperties())
                if (std::strcmp(e.extensionName, VK_EXT_DEBUG_UTILS_EXTENSION_NAME) == 0) debug_utils = true;
            if (debug_utils) extensions.push_back(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
            if (env_on("BACKPLANE_VULKAN_VALIDATION")) {
                bool found = false;
                for (const auto& l : vk::enumerateInstanceLayerProperties())
                    found = found || std::strcmp(l.layerName, "VK_LAYER_KHRONOS_validation") == 0;
                if (found) layers.push_back("VK_LAYER_KHRONOS_validation");
            }
        }
        vk::InstanceCreateInfo info({}, &app, layers, extensions);
        s.instance = vk::createInstance(info);
        s.dld.init(s.instance, ::vkGetInstanceProcAddr);
        if (debug_utils) {
            using sev = vk::DebugUtilsMessageSeverityFlagBitsEXT;
            using kind = vk::DebugUtilsMessageTypeFlagBitsEXT;
            vk::DebugUtilsMessengerCreateInfoEXT mi({}, sev::eWarning | sev::eError,
                                                    kind::eGeneral | kind::eValidation | kind::ePerformance,
                                                    &on_validation_message, &s);
            s.messenger = s.instance.createDebugUtilsMessengerEXT(mi, nullptr, s.dld);
            for (const char* l : layers) s.validating = s.validating || std::strcmp(l, "VK_LAYER_KHRONOS_validation") == 0;
            if (!env_on("BACKPLANE_VULKAN_VALIDATION")) s.validating = true; // asked for with VK_INSTANCE_LAYERS
        }
        s.physical = s.instance.enumeratePhysicalDevices();
        return {};
    });
}

/// The process-wide instance, shared: every open device holds it too, so it outlives
/// the last device however static destruction is ordered at exit (a device kept in a
/// static registry, say).
inline const std::shared_ptr<instance_state>& instance_ptr() {
    static const std::shared_ptr<instance_state> s = [] {
        auto p = std::make_shared<instance_state>();
        make_instance(*p);
        return p;
    }();
    return s;
}

inline instance_state& instance() { return *instance_ptr(); }

inline device_kind kind_of(vk::PhysicalDeviceType t) noexcept {
    switch (t) {
    case vk::PhysicalDeviceType::eIntegratedGpu: return device_kind::igpu;
    case vk::PhysicalDeviceType::eCpu: return device_kind::cpu;
    case vk::PhysicalDeviceType::eDiscreteGpu:
    case vk::PhysicalDeviceType::eVirtualGpu: return device_kind::gpu;
    default: return device_kind::accel;
    }
}

} // namespace detail

/// Every physical device of the instance, in the driver's order; an error status when
/// there is no Vulkan driver or instance (a machine without Vulkan: skip, do not abort).
[[nodiscard]] inline result<std::vector<physical_device_info>> physical_devices() {
    detail::instance_state& s = detail::instance();
    if (!s.error) return s.error;
    std::vector<physical_device_info> out;
    const status st = detail::guarded("vulkan: ", "reading the physical devices", [&]() -> status {
        for (std::size_t i = 0; i < s.physical.size(); ++i) {
            const auto props = s.physical[i].getProperties();
            const auto mem = s.physical[i].getMemoryProperties();
            physical_device_info d;
            d.index = i;
            d.name = props.deviceName.data();
            d.kind = detail::kind_of(props.deviceType);
            d.api_version = props.apiVersion;
            for (std::uint32_t h = 0; h < mem.memoryHeapCount; ++h)
                if (mem.memoryHeaps[h].flags & vk::MemoryHeapFlagBits::eDeviceLocal) d.device_local_bytes += mem.memoryHeaps[h].size;
            out.push_back(std::move(d));
        }
        return {};
    });
    if (!st) return st;
    return out;
}

/// Whether the Khronos validation layer is on (BACKPLANE_VULKAN_VALIDATION=1 and the
/// layer installed, or VK_INSTANCE_LAYERS naming it) and its messages are counted.
[[nodiscard]] inline bool validation_active() { return detail::instance().validating; }

/// Validation messages (warnings and errors) reported since the instance was made.
[[nodiscard]] inline std::uint64_t validation_message_count() {
    return detail::instance().n_messages.load(std::memory_order_relaxed);
}
/// The last few of them, oldest first.
[[nodiscard]] inline std::vector<std::string> validation_messages() {
    detail::instance_state& s = detail::instance();
    std::lock_guard lk(s.m);
    return {s.messages.begin(), s.messages.end()};
}

} // namespace backplane::vulkan
