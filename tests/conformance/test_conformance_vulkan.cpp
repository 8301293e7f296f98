// The copy utilities and the conformance runner on a Vulkan device (lavapipe where there is no
// GPU): tensor_copy in every direction among host data, a CPU buffer, Vulkan and the non-host test
// device, strided views into device memory, tensor_copy_async on the Vulkan stream, graph_copy of
// the llama reference graph onto Vulkan, compare_backends CPU vs Vulkan, and a slice of the
// catalogue (tests/support/device_copy_cases.hpp). Skips with a message where no device exists.

#include "../support/device_copy_cases.hpp"

#include <backplane/backends/vulkan.hpp>
#include <backplane/enabled.hpp>

#include <catch2/catch.hpp>

#include <optional>

using namespace backplane;

static_assert(is_enabled_backend<vulkan_backend>);

namespace {

std::optional<vulkan_device> open_device() {
    auto dev = vulkan_device::open({.index = 0});
    if (!dev) {
        WARN("no Vulkan device, skipping: " << dev.error().describe());
        return std::nullopt;
    }
    return std::move(*dev);
}

} // namespace

TEST_CASE(
    "vulkan: tensor_copy in every direction among host data, CPU, Vulkan and the test device") {
    if (auto dev = open_device())
        test::copies_every_direction(*dev, "Vulkan");
}

TEST_CASE("vulkan: tensor_copy_async on the Vulkan stream") {
    if (auto dev = open_device())
        test::copy_async_on_stream(*dev, "Vulkan");
}

TEST_CASE(
    "vulkan: graph_copy of the llama reference graph computes the same logits, node by node too") {
    if (auto dev = open_device())
        test::llama_graph_copy(*dev, "Vulkan");
}

TEST_CASE("vulkan: a slice of the catalogue passes against the reference") {
    if (auto dev = open_device())
        test::catalogue_slice(*dev, "Vulkan");
}
