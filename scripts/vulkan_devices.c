/* Lists this machine's Vulkan devices, one line each: "<kind> <name>", kind one of
 * discrete, integrated, virtual, cpu, other. Nothing (exit status 0) when the loader
 * finds no driver or no device; exit status 1 when the Vulkan loader is missing.
 *
 * scripts/demo compiles and runs it (a C compiler and the loader's headers, no
 * backplane build) to decide whether examples/llama needs the Vulkan backend here: a
 * machine whose only Vulkan device is a CPU driver (Mesa's lavapipe) computes faster on
 * the CPU backend.
 */
#include <vulkan/vulkan.h>

#include <stdio.h>
#include <stdlib.h>

static const char* kind_of(VkPhysicalDeviceType t) {
    switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual";
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return "cpu";
    default: return "other";
    }
}

int main(void) {
    VkApplicationInfo app = {VK_STRUCTURE_TYPE_APPLICATION_INFO};
    app.pApplicationName = "backplane-vulkan-devices";
    app.apiVersion = VK_API_VERSION_1_1;
    VkInstanceCreateInfo info = {VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
    info.pApplicationInfo = &app;
    VkInstance instance;
    if (vkCreateInstance(&info, NULL, &instance) != VK_SUCCESS)
        return 0; /* no driver: no device */
    uint32_t n = 0;
    vkEnumeratePhysicalDevices(instance, &n, NULL);
    VkPhysicalDevice* devices = n > 0 ? calloc(n, sizeof *devices) : NULL;
    if (n > 0 && devices != NULL && vkEnumeratePhysicalDevices(instance, &n, devices) >= 0) {
        for (uint32_t i = 0; i < n; ++i) {
            VkPhysicalDeviceProperties p;
            vkGetPhysicalDeviceProperties(devices[i], &p);
            printf("%s %s\n", kind_of(p.deviceType), p.deviceName);
        }
    }
    free(devices);
    vkDestroyInstance(instance, NULL);
    return 0;
}
