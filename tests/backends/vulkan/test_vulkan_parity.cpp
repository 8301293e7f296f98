// The Vulkan backend against the CPU backend's reference kernels, through the shared
// parity suite (tests/support/parity_suite.hpp): every op, every type combination the
// device claims, 20 seeded random shapes each (odd sizes, views at odd offsets,
// non-contiguous and broadcast operands), computed on physical device 0 with its memory
// mapped and with every transfer forced through the staging buffer. The graph is built
// in host memory and relocated into one device buffer for each compute
// (tests/support/device_mirror.hpp). Skips with a message where there is no Vulkan;
// every validation-layer message fails the test.

#include <backplane/backends/vulkan.hpp>

#include "../../support/device_mirror.hpp"
#include "../../support/parity_suite.hpp"
#include "vulkan_targets.hpp"
#include "../../support/vulkan_test_support.hpp" // the validation layer is on (before main)

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

using namespace parity;

namespace {

// The type combinations the Vulkan backend computes, per generator: update an entry
// when a kernel lands (a test fails until the count here and the claimed one agree).
namespace expected {
constexpr int copy = 32; // cpy: every pair of f32 f16 bf16 q8_0 q4_0, i32 -> i32; dup / cont of each (16-bit storage)
constexpr int binary = 4; // add, sub, mul, div f32
constexpr int unary = 6;  // scale, sqr, sqrt, silu, gelu, relu f32
constexpr int rows = 8;     // sum_rows, argmax of f32 f16 bf16; norm, rms_norm f32 (16-bit storage)
constexpr int soft_max = 3; // no mask, f32 mask, f16 mask (16-bit storage)
constexpr int mul_mat = 15; // f32 f16 bf16 q8_0 q4_0 weights x f32 f16 bf16 activations (16-bit storage)
constexpr int get_rows = 6; // f32 f16 bf16 q8_0 q4_0 i32 rows (16-bit storage)
constexpr int rope = 4;     // normal, neox of f32, f16 (16-bit storage)
constexpr int concat = 4;   // f32 f16 bf16 i32 (16-bit storage)
} // namespace expected

/// Runs the suite's cases and checks the validation layer stayed silent.
void run_checked(parity_suite& ps) {
    ps.run();
    std::string messages;
    for (const std::string& m : vulkan::validation_messages()) messages += m + '\n';
    INFO("validation messages (the last few):\n" << messages);
    CHECK(vulkan::validation_message_count() == 0);
}

} // namespace

// ---------------------------------------------------------------------------------------

TEST_CASE("vulkan parity: dup, cont and cpy for every type pair", "[vulkan][parity]") {
    auto targets = vulkan_targets();
    if (targets.empty()) return;
    parity_suite ps(31001, std::move(targets));
    CHECK(copy_cases(ps) == expected::copy);
    run_checked(ps);
}

TEST_CASE("vulkan parity: add, sub, mul, div with broadcasting for every type pair", "[vulkan][parity]") {
    auto targets = vulkan_targets();
    if (targets.empty()) return;
    parity_suite ps(31002, std::move(targets));
    CHECK(binary_cases(ps) == expected::binary);
    run_checked(ps);
}

TEST_CASE("vulkan parity: scale, sqr, sqrt, silu, gelu, relu", "[vulkan][parity]") {
    auto targets = vulkan_targets();
    if (targets.empty()) return;
    parity_suite ps(31003, std::move(targets));
    CHECK(unary_cases(ps) == expected::unary);
    run_checked(ps);
}

TEST_CASE("vulkan parity: sum_rows, argmax, norm, rms_norm", "[vulkan][parity]") {
    auto targets = vulkan_targets();
    if (targets.empty()) return;
    parity_suite ps(31004, std::move(targets));
    CHECK(rows_cases(ps) == expected::rows);
    run_checked(ps);
}

TEST_CASE("vulkan parity: soft_max without a mask and with f32 and f16 masks", "[vulkan][parity]") {
    auto targets = vulkan_targets();
    if (targets.empty()) return;
    parity_suite ps(31005, std::move(targets));
    CHECK(soft_max_cases(ps) == expected::soft_max);
    run_checked(ps);
}

TEST_CASE("vulkan parity: mul_mat for every weight and activation type", "[vulkan][parity][mul_mat]") {
    auto targets = vulkan_targets();
    if (targets.empty()) return;
    parity_suite ps(31006, std::move(targets));
    CHECK(mul_mat_cases(ps) == expected::mul_mat);
    run_checked(ps);
}

TEST_CASE("vulkan parity: get_rows from every type", "[vulkan][parity]") {
    auto targets = vulkan_targets();
    if (targets.empty()) return;
    parity_suite ps(31007, std::move(targets));
    CHECK(get_rows_cases(ps) == expected::get_rows);
    run_checked(ps);
}

TEST_CASE("vulkan parity: rope normal and neox", "[vulkan][parity]") {
    auto targets = vulkan_targets();
    if (targets.empty()) return;
    parity_suite ps(31008, std::move(targets));
    CHECK(rope_cases(ps) == expected::rope);
    run_checked(ps);
}

TEST_CASE("vulkan parity: concat along every dimension", "[vulkan][parity]") {
    auto targets = vulkan_targets();
    if (targets.empty()) return;
    parity_suite ps(31009, std::move(targets));
    CHECK(concat_cases(ps) == expected::concat);
    run_checked(ps);
}
