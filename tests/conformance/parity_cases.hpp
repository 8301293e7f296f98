#pragma once
// The parity tests of every backend, written once: each family of conformance/parity.hpp
// as a test case over the targets of this program. A backend's test program defines
// BACKPLANE_PARITY_PROVIDERS, its provider types (tests/support/parity_targets.hpp),
// then includes this file once; the test names end in the provider's name
// ("parity: concat along every dimension - vulkan_targets").
//
// Each case counts the type combinations its family finds claimed by every target and
// checks the count the provider pins (what a backend claims must not silently shrink),
// runs the batch (the CPU reference, then every target) and fails on every case that
// differs. Where the targets are absent (no device), it says so with a WARN, after
// checking the count with the provider's host-only claims where it has them.

#include "../support/parity_targets.hpp"

#include <backplane/conformance/parity.hpp>

#include <catch2/catch.hpp>

#include <iterator>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#ifndef BACKPLANE_PARITY_PROVIDERS
#error "define BACKPLANE_PARITY_PROVIDERS (this program's target providers) before including parity_cases.hpp"
#endif

namespace parity {

/// The families a provider samples (none unless it says).
template <class Provider> std::span<const sampled_family> sampled_families() {
    if constexpr (requires { Provider::sampled; })
        return Provider::sampled;
    else
        return {};
}

/// One in how many of its sample's combinations a provider keeps (batch::sample's `thin`).
template <class Provider> int thinning() {
    if constexpr (requires { Provider::thin; })
        return Provider::thin;
    else
        return 1;
}

template <class Provider> void check_family(std::string_view name, sweep part = sweep::sample) {
    const cf::parity_family* family = cf::find_parity_family(name);
    REQUIRE(family != nullptr);
    const int expected = expected_combinations(Provider::expected, name);
    if (expected < 0)
        FAIL(Provider::backend << " pins no combination count for the family " << name);

    target_list list = Provider::targets();
    if (list.targets.empty()) {
        if constexpr (requires(const backplane::tensor& t) { Provider::claims(t); }) {
            cf::batch claims(family->seed, {{std::string(Provider::backend) + " claims",
                                             [](const backplane::tensor& t) { return Provider::claims(t); },
                                             nullptr}});
            CHECK(family->cases(claims) == expected);
        }
        WARN(Provider::backend << " parity (" << name << ") skipped: " << list.absent);
        return;
    }
    cf::batch cases(family->seed, std::move(list.targets));
    std::string sampling = "every combination";
    if (const int every = sample_every(sampled_families<Provider>(), name); part == sweep::sample && every > 1) {
        const int rotation = test_rotation();
        const int thin = thinning<Provider>();
        cases.sample(every, rotation, thin);
        sampling = "one combination in " + std::to_string(every) +
                   (thin > 1 ? ", then one in " + std::to_string(thin) + " of those" : std::string()) +
                   ", rotation " + std::to_string(rotation) +
                   " (BACKPLANE_TEST_ROTATION=" + std::to_string(rotation) +
                   " repeats it; the \"(every combination)\" case runs all)";
    }
    INFO(sampling);
    CHECK(family->cases(cases) == expected);
    check_report(cases.run(), cf::shapes_per_combination);
    if constexpr (requires { Provider::after_run(); })
        Provider::after_run();
}

} // namespace parity

#define BACKPLANE_PARITY_CASE(family, title, tags)                                                  \
    TEMPLATE_TEST_CASE("parity: " title, "[parity]" tags, BACKPLANE_PARITY_PROVIDERS) {             \
        parity::check_family<TestType>(family);                                                     \
    }

BACKPLANE_PARITY_CASE("copy", "dup, cont and cpy for every type pair", "")
BACKPLANE_PARITY_CASE("binary", "add, sub, mul, div with broadcasting for every type pair", "")
BACKPLANE_PARITY_CASE("unary", "every unary op of every type", "")
BACKPLANE_PARITY_CASE("rows", "sum_rows, argmax, norm, rms_norm, l2_norm, group_norm", "")
BACKPLANE_PARITY_CASE("soft_max", "soft_max without a mask and with masks, with ALiBi and sinks", "")
BACKPLANE_PARITY_CASE("mul_mat", "mul_mat for every weight and activation type", "[mul_mat]")
BACKPLANE_PARITY_CASE("get_rows", "get_rows from every type", "")
BACKPLANE_PARITY_CASE("rope", "rope normal and neox with frequency factors and YaRN, mrope, imrope, vision", "")
BACKPLANE_PARITY_CASE("concat", "concat along every dimension", "")
BACKPLANE_PARITY_CASE("glu", "glu of every function, fused, swapped and split", "")
BACKPLANE_PARITY_CASE("reduce", "sum and mean of every type", "")
BACKPLANE_PARITY_CASE("sort", "argsort in both orders and top_k, ties in index order", "")
BACKPLANE_PARITY_CASE("set_rows", "set_rows into every type by i32 and i64 indices", "")
BACKPLANE_PARITY_CASE("pad", "pad with zeros and wrapped around", "")
BACKPLANE_PARITY_CASE("arange", "arange", "")
BACKPLANE_PARITY_CASE("mul_mat_id", "mul_mat_id for every weight and activation type", "[mul_mat]")
BACKPLANE_PARITY_CASE("add_id", "add_id of a row per expert", "")
BACKPLANE_PARITY_CASE("pool", "pool_1d and pool_2d, max and avg, with padding", "")
BACKPLANE_PARITY_CASE("upscale", "upscale in every mode, corners aligned or not, up and down", "")
BACKPLANE_PARITY_CASE("remap", "pad_reflect_1d and roll", "")
BACKPLANE_PARITY_CASE("flash_attn_ext", "flash_attn_ext for every k and v type with masks, sinks, softcap, ALiBi and views", "")
BACKPLANE_PARITY_CASE("repeat", "repeat of every type it takes", "")
BACKPLANE_PARITY_CASE("misc", "repeat_back, cumsum, tri and diag", "")
BACKPLANE_PARITY_CASE("timestep_embedding", "timestep_embedding of even and odd dims", "")
BACKPLANE_PARITY_CASE("out_prod", "out_prod of f32 and quantized a, broadcast", "[mul_mat]")
BACKPLANE_PARITY_CASE("im2col", "im2col 1-D and 2-D with strides, pads and dilations", "")
BACKPLANE_PARITY_CASE("conv_2d", "conv_2d_direct of f32 and f16 kernels with strides, pads and dilations", "")
BACKPLANE_PARITY_CASE("count_acc", "count_equal of i32 tensors and acc into views", "")
BACKPLANE_PARITY_CASE("conv_2d_dw", "conv_2d_dw_direct of f32 kernels, channel-last and other layouts, strides, pads and dilations", "")
BACKPLANE_PARITY_CASE("window", "win_part into padded and whole windows, win_unpart back, get_rel_pos", "")
BACKPLANE_PARITY_CASE("conv_transpose", "conv_transpose_1d and conv_transpose_2d of f32 and f16 kernels with strides below and above the kernel's width", "")
BACKPLANE_PARITY_CASE("recurrent", "ssm_conv, ssm_scan in the Mamba-1 and Mamba-2 layouts, gated_linear_attn, rwkv_wkv6 and rwkv_wkv7", "")

#undef BACKPLANE_PARITY_CASE

// The families a provider samples (Provider::sampled), whole: the "(every combination)"
// cases, tagged [full] and labelled full by the build, which the test command leaves out
// (docs/testing.md). A program whose providers sample defines
// BACKPLANE_PARITY_SAMPLING_PROVIDERS, those providers.
#define BACKPLANE_PARITY_FULL_FAMILIES "copy", "set_rows", "mul_mat", "mul_mat_id"
#ifdef BACKPLANE_PARITY_SAMPLING_PROVIDERS
#define BACKPLANE_PARITY_FULL_CASE(family, title)                                                  \
    TEMPLATE_TEST_CASE("parity: " title " (every combination)", "[parity][full]",                  \
                       BACKPLANE_PARITY_SAMPLING_PROVIDERS) {                                      \
        parity::check_family<TestType>(family, parity::sweep::full);                              \
    }
BACKPLANE_PARITY_FULL_CASE("copy", "dup, cont and cpy for every type pair")
BACKPLANE_PARITY_FULL_CASE("set_rows", "set_rows into every type by i32 and i64 indices")
BACKPLANE_PARITY_FULL_CASE("mul_mat", "mul_mat for every weight and activation type")
BACKPLANE_PARITY_FULL_CASE("mul_mat_id", "mul_mat_id for every weight and activation type")
#undef BACKPLANE_PARITY_FULL_CASE
#endif

TEMPLATE_TEST_CASE("parity: the pinned combination counts name every family once", "[parity]",
                   BACKPLANE_PARITY_PROVIDERS) {
    // host code only: a count left behind by a renamed or removed family fails here
    for (const backplane::conformance::parity_family& f : backplane::conformance::parity_families()) {
        INFO(TestType::backend << ", family " << f.name);
        CHECK(parity::expected_combinations(TestType::expected, f.name) >= 0);
    }
    CHECK(std::size(TestType::expected) == backplane::conformance::parity_families().size());
    // a sampled family has its "(every combination)" case
    const std::string_view full[] = {BACKPLANE_PARITY_FULL_FAMILIES};
    for (const parity::sampled_family& f : parity::sampled_families<TestType>()) {
        INFO(TestType::backend << " samples " << f.family);
        CHECK(parity::samples(full, f.family));
        CHECK(f.every > 1);
#ifndef BACKPLANE_PARITY_SAMPLING_PROVIDERS
        FAIL_CHECK("define BACKPLANE_PARITY_SAMPLING_PROVIDERS: the program has no \"(every combination)\" cases");
#endif
    }
}
