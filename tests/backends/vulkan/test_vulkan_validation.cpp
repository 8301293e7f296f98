// The validation layer's counter really counts (label vulkan): a deliberate misuse of the
// Vulkan API must be reported. A program of its own, so that the message it provokes
// does not fail the other Vulkan tests, which demand none at all.

#include <backplane/backends/vulkan.hpp>

#include "../../support/vulkan_test_support.hpp" // the validation layer is on (before main)

#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>

using namespace backplane;

TEST_CASE("vulkan validation: a deliberate misuse is counted", "[vulkan][validation]") {
    auto dev = vulkan_device::open({.index = 0});
    if (!dev) {
        WARN("no Vulkan device, skipping: " << dev.error().describe());
        return;
    }
    if (!vulkan::validation_active()) {
        WARN("the Khronos validation layer is not installed, skipping");
        return;
    }
    REQUIRE(vulkan::validation_message_count() == 0); // opening a device is clean
    const vk::Device d = dev->state()->device;
    // a buffer of size 0 breaks VUID-VkBufferCreateInfo-size-00912
    try {
        const vk::Buffer b = d.createBuffer(vk::BufferCreateInfo({}, 0, vk::BufferUsageFlagBits::eStorageBuffer));
        d.destroyBuffer(b);
    } catch (const vk::SystemError&) {
        // the driver may refuse it too; the layer has spoken before that
    }
    CHECK(vulkan::validation_message_count() >= 1);
    const auto messages = vulkan::validation_messages();
    REQUIRE_FALSE(messages.empty());
    CHECK(messages.back().find("size") != std::string::npos);
}
