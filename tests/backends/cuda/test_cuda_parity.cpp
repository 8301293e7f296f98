// The CUDA backend against the CPU backend's reference kernels, through the shared parity
// suite (tests/support/parity_suite.hpp): every op, every type combination (the CUDA
// backend claims all the CPU computes), 20 seeded random shapes each (odd sizes, views
// at odd offsets, non-contiguous and broadcast operands), on device 0 with cuBLAS and
// with the own kernels. Skips with a message where there is no GPU.

#include <backplane/backends/cuda.hpp>

#include "../../support/parity_suite.hpp"
#include "cuda_targets.hpp"

using namespace parity;

namespace {

// The type combinations the CUDA backend computes, per generator: all of the CPU's.
namespace expected {
constexpr int copy = 32;     // cpy: every pair of f32 f16 bf16 q8_0 q4_0, i32 -> i32; dup / cont of each type
constexpr int binary = 36;   // add, sub, mul, div: f32 f16 bf16 x f32 f16 bf16
constexpr int unary = 18;    // scale, sqr, sqrt, silu, gelu, relu of f32 f16 bf16
constexpr int rows = 8;      // sum_rows, argmax of f32 f16 bf16; norm, rms_norm f32
constexpr int soft_max = 3;  // no mask, f32 mask, f16 mask
constexpr int mul_mat = 15;  // f32 f16 bf16 q8_0 q4_0 weights x f32 f16 bf16 activations
constexpr int get_rows = 6;  // f32 f16 bf16 q8_0 q4_0 i32 rows
constexpr int rope = 4;      // normal, neox of f32, f16
constexpr int concat = 4;    // f32 f16 bf16 i32
} // namespace expected

} // namespace

TEST_CASE("cuda parity: dup, cont and cpy for every type pair", "[cuda][parity]") {
    auto targets = cuda_targets();
    if (targets.empty()) return;
    parity_suite ps(41001, std::move(targets));
    CHECK(copy_cases(ps) == expected::copy);
    ps.run();
}

TEST_CASE("cuda parity: add, sub, mul, div with broadcasting for every type pair", "[cuda][parity]") {
    auto targets = cuda_targets();
    if (targets.empty()) return;
    parity_suite ps(41002, std::move(targets));
    CHECK(binary_cases(ps) == expected::binary);
    ps.run();
}

TEST_CASE("cuda parity: scale, sqr, sqrt, silu, gelu, relu", "[cuda][parity]") {
    auto targets = cuda_targets();
    if (targets.empty()) return;
    parity_suite ps(41003, std::move(targets));
    CHECK(unary_cases(ps) == expected::unary);
    ps.run();
}

TEST_CASE("cuda parity: sum_rows, argmax, norm, rms_norm", "[cuda][parity]") {
    auto targets = cuda_targets();
    if (targets.empty()) return;
    parity_suite ps(41004, std::move(targets));
    CHECK(rows_cases(ps) == expected::rows);
    ps.run();
}

TEST_CASE("cuda parity: soft_max without a mask and with f32 and f16 masks", "[cuda][parity]") {
    auto targets = cuda_targets();
    if (targets.empty()) return;
    parity_suite ps(41005, std::move(targets));
    CHECK(soft_max_cases(ps) == expected::soft_max);
    ps.run();
}

TEST_CASE("cuda parity: mul_mat for every weight and activation type", "[cuda][parity][mul_mat]") {
    auto targets = cuda_targets();
    if (targets.empty()) return;
    parity_suite ps(41006, std::move(targets));
    CHECK(mul_mat_cases(ps) == expected::mul_mat);
    ps.run();
}

TEST_CASE("cuda parity: get_rows from every type", "[cuda][parity]") {
    auto targets = cuda_targets();
    if (targets.empty()) return;
    parity_suite ps(41007, std::move(targets));
    CHECK(get_rows_cases(ps) == expected::get_rows);
    ps.run();
}

TEST_CASE("cuda parity: rope normal and neox", "[cuda][parity]") {
    auto targets = cuda_targets();
    if (targets.empty()) return;
    parity_suite ps(41008, std::move(targets));
    CHECK(rope_cases(ps) == expected::rope);
    ps.run();
}

TEST_CASE("cuda parity: concat along every dimension", "[cuda][parity]") {
    auto targets = cuda_targets();
    if (targets.empty()) return;
    parity_suite ps(41009, std::move(targets));
    CHECK(concat_cases(ps) == expected::concat);
    ps.run();
}

TEST_CASE("cuda parity: the combinations claimed are the ones counted above", "[cuda][parity]") {
    // host code only (supports_op), so this runs without a GPU too: the counts the GPU
    // runs check are the backend's claims
    parity_suite ps(41010, {{"cuda claims", [](const tensor& t) { return cuda::supports_op(t); },
                             [](graph&) { return status{}; }}});
    CHECK(copy_cases(ps) == expected::copy);
    CHECK(binary_cases(ps) == expected::binary);
    CHECK(unary_cases(ps) == expected::unary);
    CHECK(rows_cases(ps) == expected::rows);
    CHECK(soft_max_cases(ps) == expected::soft_max);
    CHECK(mul_mat_cases(ps) == expected::mul_mat);
    CHECK(get_rows_cases(ps) == expected::get_rows);
    CHECK(rope_cases(ps) == expected::rope);
    CHECK(concat_cases(ps) == expected::concat);
}
