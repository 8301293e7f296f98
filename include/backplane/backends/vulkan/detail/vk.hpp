#pragma once
// Vulkan-Hpp for the Vulkan backend, and what turns its errors into statuses. Only the
// headers under backends/vulkan/ include this: Vulkan stays out of every other header.
//
// Vulkan-Hpp is used with exceptions (its default): every entry point of the backend
// catches vk::SystemError and std::bad_alloc at its boundary and returns a status, so
// nothing escapes to the caller and nothing aborts.

#include <backplane/core/error.hpp>

#include <vulkan/vulkan.hpp>

#include <new>
#include <string>
#include <string_view>

namespace backplane::vulkan::detail {

/// The library code for a Vulkan result.
inline errc code_of(vk::Result r) noexcept {
    switch (r) {
    case vk::Result::eErrorOutOfDeviceMemory:
    case vk::Result::eErrorOutOfHostMemory:
    case vk::Result::eErrorOutOfPoolMemory:
    case vk::Result::eErrorFragmentedPool:
    case vk::Result::eErrorFragmentation:
        return errc::alloc_failed;
    case vk::Result::eErrorFeatureNotPresent:
    case vk::Result::eErrorExtensionNotPresent:
    case vk::Result::eErrorLayerNotPresent:
    case vk::Result::eErrorIncompatibleDriver:
    case vk::Result::eErrorFormatNotSupported:
        return errc::not_supported;
    default:
        return errc::device_error;
    }
}

/// "<prefix><what>: <VkResult name>", with the VkResult as the native code.
inline status fail(std::string_view prefix, std::string_view what, vk::Result r) {
    std::string msg(prefix);
    msg.append(what).append(": ").append(vk::to_string(r));
    return {code_of(r), std::move(msg), static_cast<std::int32_t>(r)};
}

/// Runs f (returning status), turning Vulkan and allocation exceptions into statuses.
template <class F>
status guarded(std::string_view prefix, std::string_view what, F&& f) noexcept {
    try {
        return f();
    } catch (const vk::SystemError& e) {
        return fail(prefix, what, static_cast<vk::Result>(e.code().value()));
    } catch (const std::bad_alloc&) {
        return {errc::alloc_failed, std::string(prefix) + std::string(what) + ": out of host memory"};
    } catch (const std::exception& e) {
        return {errc::device_error, std::string(prefix) + std::string(what) + ": " + e.what()};
    }
}

} // namespace backplane::vulkan::detail
