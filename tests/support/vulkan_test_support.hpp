#pragma once
// What the Vulkan test programs share: the validation layer asked for before the instance
// is made (its messages are counted and fail the tests), device 0 opened or the test
// skipped with the reason, and the check that no validation message arrived.

#include <backplane/backends/vulkan.hpp>

#include <catch2/catch.hpp>

#include <cstdlib>
#include <optional>
#include <string>
#include <utility>

namespace backplane::test {

/// Set during static initialisation, before any test opens the instance (the functions
/// below use it, so every program that includes this header initialises it).
inline const bool vulkan_validation_asked = [] { return ::setenv("BACKPLANE_VULKAN_VALIDATION", "1", 0) == 0; }();

/// Physical device 0 with staging forced or not (and a device name, if given); null, and
/// a warning naming why, where this machine has no Vulkan.
inline std::optional<vulkan_device> open_or_skip(bool force_staging, std::string name = {}) {
    static_cast<void>(vulkan_validation_asked);
    auto dev = vulkan_device::open({.index = 0, .force_staging = force_staging, .name = std::move(name)});
    if (!dev) {
        WARN("no Vulkan device, skipping: " << dev.error().describe());
        return std::nullopt;
    }
    return std::move(*dev);
}

/// No validation-layer message so far; the messages are printed when there are some.
inline void check_validation() {
    static_cast<void>(vulkan_validation_asked);
    INFO([] {
        std::string all;
        for (const auto& m : vulkan::validation_messages()) all += m + "\n";
        return all;
    }());
    CHECK(vulkan::validation_message_count() == 0);
}

} // namespace backplane::test
