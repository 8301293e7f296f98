// Fused groups on the Vulkan backend (backends/vulkan/ops/fused.hpp): every case of
// tests/support/fusion_cases.hpp computed on device 0 with fusions on and off, the fused
// graph recorded with fewer dispatches (one per group, two for glu_pair), both results
// against the CPU's reference kernels and against each other; and a set_rows index out
// of range inside a fused group, which synchronize reports as errc::out_of_range.

#include "vulkan_targets.hpp"

#include "../../support/fusion_cases.hpp"

#include <backplane/backends/cpu.hpp>

#include <catch2/catch.hpp>

#include <array>
#include <cstdint>
#include <cstring>
#include <optional>
#include <utility>
#include <vector>

namespace vulkan_fusion_test { // a unity build shares the translation unit: names of its own

using namespace backplane;

using test::nmse;
std::vector<float> values(const tensor& t) { return test::values_of(t); }

/// A case's result on `be` with fusions f, and the dispatches its compute recorded.
struct outcome {
    std::vector<float> values;
    std::uint64_t dispatches = 0;
};
outcome run_on(vulkan_backend& be, const test::fusion_case& c, fusion_set f) {
    context ctx;
    std::mt19937 rng(7);
    tensor* out = c.build(ctx, rng);
    graph g(out);
    be.set_fusions(f);
    const vulkan_stream_stats before = be.stats();
    const status st = test::compute_on_device(be, g);
    INFO(st.describe());
    REQUIRE(st.ok());
    const vulkan_stream_stats after = be.stats();
    REQUIRE(after.recorded == before.recorded + 1);
    return {values(*out), after.dispatches - before.dispatches};
}

std::vector<float> reference(const test::fusion_case& c) {
    context ctx;
    std::mt19937 rng(7);
    tensor* out = c.build(ctx, rng);
    cpu_backend cpu({.n_threads = 1, .reference = true});
    REQUIRE(cpu.compute(graph(out)).ok());
    return values(*out);
}

/// Dispatches the case's group saves on a device with features f: its nodes but one
/// (glu_pair: but two), none when the device does not take it.
std::uint64_t saved_by(const test::fusion_case& c, const vulkan::detail::features& f) {
    context ctx;
    std::mt19937 rng(7);
    const graph g(c.build(ctx, rng));
    const std::vector<fused_group> groups = find_fusions(g);
    REQUIRE(groups.size() == 1);
    if (!vulkan::detail::accepts(groups[0], f)) return 0;
    std::uint64_t parts = 0;
    for (const tensor* t : groups[0].parts) parts += t != nullptr ? 1 : 0;
    return parts - (c.kind == fusion::glu_pair ? 2 : 1);
}

/// Device 0 and a backend on it; none (and a warning saying why) without Vulkan.
std::optional<std::pair<vulkan_device, vulkan_backend>> open_device() {
    static_cast<void>(test::vulkan_validation_asked);
    auto dev = vulkan_device::open({.index = 0});
    if (!dev) {
        WARN("Vulkan fusion skipped: no Vulkan device: " << dev.error().describe());
        return std::nullopt;
    }
    auto be = dev->make_backend();
    REQUIRE(be.ok());
    return std::pair(std::move(*dev), std::move(*be));
}

TEST_CASE("vulkan fusion: each group in fewer dispatches, as the nodes one by one compute it", "[vulkan][fusion]") {
    auto opened = open_device();
    if (!opened) return;
    auto& [dev, be] = *opened;
    std::array<int, fusion_count> fused_cases{}; // by kind
    for (const test::fusion_case& c : test::fusion_cases(201, 8)) {
        INFO(c.name);
        const bool quantized = c.kind == fusion::mul_mat_add || c.kind == fusion::glu_pair;
        const std::vector<float> want = reference(c);
        const outcome fused = run_on(be, c, fusion_set{});
        const outcome plain = run_on(be, c, fusion_set::none());
        const std::uint64_t saved = saved_by(c, dev.state()->feats);
        CHECK(plain.dispatches - fused.dispatches == saved);
        fused_cases[static_cast<std::size_t>(c.kind)] += saved > 0 ? 1 : 0;
        CHECK(nmse(plain.values, fused.values) <= 1e-10);
        CHECK(nmse(want, fused.values) <= (quantized ? 1e-5 : 1e-8));
    }
    for (std::size_t k = 0; k < fusion_count; ++k) { // every kind fused somewhere
        INFO(to_string(static_cast<fusion>(k)));
        CHECK(fused_cases[k] > 0);
    }
    test::check_validation();
}

TEST_CASE("vulkan fusion: a set_rows index out of range inside a fused group is a status", "[vulkan][fusion]") {
    auto opened = open_device();
    if (!opened) return;
    auto& be = opened->second;
    context ctx;
    graph g(test::rope_set_rows_out_of_range(ctx));
    REQUIRE(find_fusions(g).size() == 1);
    const status st = test::compute_on_device(be, g);
    CHECK(st.code() == errc::out_of_range);
    CHECK_THAT(st.describe(), Catch::Contains("set_rows"));
    test::check_validation();
}

} // namespace vulkan_fusion_test
