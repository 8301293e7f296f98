// The meta backend over two Vulkan devices (two logical devices of one driver: lavapipe
// in CI) and over a mixed {Vulkan, CPU} pair: the reference llama graph equals one CPU.
// Skips with a message where there is no Vulkan device.

#include "meta_fixtures.hpp"

#include <backplane/backends/vulkan.hpp>

#include <catch2/catch.hpp>

using namespace backplane;

namespace {

std::optional<any_device> vulkan_part(const char* name) {
    auto dev = vulkan_device::open({.index = 0, .name = name});
    if (!dev) {
        WARN("no Vulkan device, skipping: " << dev.error().describe());
        return std::nullopt;
    }
    return any_device::make(std::move(*dev));
}

void check_llama(std::vector<any_device> parts) {
    test::llama_params p{.n_layer = 1, .n_embd = 128, .n_head = 4, .n_ff = 256, .n_tokens = 5, .n_vocab = 512, .token_input = true};
    const std::uint32_t seed = 77;
    const std::vector<float> ref = test::llama_on_cpu(p, seed);

    const int n = static_cast<int>(parts.size());
    auto dev = meta_device::make(std::move(parts),
                                 {.split = [&](const tensor& t, int nd) { return test::split_llama(t, nd, p.head_dim()); }})
                   .value();
    auto be = dev.make_backend().value();
    test::meta_llama ml(p, dev, be);
    REQUIRE(test::fill_llama(ml.model, ml.inputs, seed).ok());
    const status st = be.compute(ml.g);
    INFO(st.describe());
    REQUIRE(st.ok());
    REQUIRE(be.synchronize().ok());
    CHECK(test::nmse(tensor_get_all<float>(*ml.g.back()).value(), ref) < 1e-6);
    CHECK(be.stats().reductions == 2 * static_cast<std::uint64_t>(p.n_layer));
    CHECK(be.stats().bytes_moved > 0);
    // each device holds its share of the weights, in its own memory
    auto* mb = ml.weights[0].get_if<meta_buffer>();
    REQUIRE(mb != nullptr);
    for (int d = 0; d < n; ++d) CHECK(mb->device_bytes(d) > 0);
}

} // namespace

TEST_CASE("meta on two Vulkan devices: the llama graph equals one CPU", "[meta][vulkan]") {
    auto a = vulkan_part("Vulkan0a");
    auto b = vulkan_part("Vulkan0b");
    if (!a || !b) return;
    check_llama({*a, *b});
}

TEST_CASE("meta on a mixed pair {Vulkan, CPU}: the llama graph equals one CPU", "[meta][vulkan]") {
    auto a = vulkan_part("Vulkan0");
    if (!a) return;
    check_llama({*a, any_device::borrow(cpu_device::instance())});
}
