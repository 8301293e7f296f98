#pragma once
// What a backend's test program hands the parity cases (tests/conformance/parity_cases.hpp):
// a provider type naming its backend, opening its targets (or saying why there are none)
// and pinning the type combinations each family must find claimed.
//
//     struct cuda_targets {
//         static constexpr std::string_view backend = "CUDA";
//         static parity::target_list targets();       // device 0 with and without cuBLAS
//         static bool claims(const tensor& t);        // optional: host-only supports_op, so
//                                                     // the counts are checked without a GPU
//         static constexpr auto& expected = parity::op_table_combinations;
//         static void after_run();                    // optional: checks after each run
//         // optional: families whose combinations are sampled, one in `every` per run
//         // (their "(every combination)" cases, label full, run them all)
//         static constexpr parity::sampled_family sampled[] = {{"copy", 3}};
//     };

#include <backplane/conformance/batch.hpp>

#include <catch2/catch.hpp>

#include <array>
#include <cstddef>
#include <cstdlib>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace parity {

namespace cf = backplane::conformance;

/// A program's targets, or none and why (no device).
struct target_list {
    std::vector<cf::target> targets;
    std::string absent; ///< why there are none
};

/// The type combinations a family must find claimed.
struct family_count {
    std::string_view family;
    int combinations;
};

/// What the op table's rules define, per family (core/op_traits.hpp), which the CPU
/// computes in full: update an entry when a rule or an op changes.
inline constexpr family_count op_table_combinations[] = {
    {"copy", 26 * 19 + 7 + 2 + 28}, // cpy from the 3 float and 23 quantized types into the 3 float and the 16 quantized
                                    // types f32 converts into, each of the 7 others into itself, i32 -> i32, i64 -> i64;
                                    // dup / cont of each type
    {"binary", 4 * 9},       // add, sub, mul, div: f32 f16 bf16 x f32 f16 bf16
    {"unary", 24 * 3},       // scale, sqr, sqrt, silu, gelu, relu, neg, the 17 unary functions; f32 f16 bf16
    {"rows", 3 + 3 + 4},     // sum_rows, argmax of f32 f16 bf16; norm, rms_norm, l2_norm, group_norm f32
    {"soft_max", 3 * 2},     // no mask, f32 mask, f16 mask; each again with sinks (and ALiBi where masked)
    {"mul_mat", 26 * 3},     // f32 f16 bf16 and the 23 quantized weights x f32 f16 bf16 activations
    {"get_rows", 26 + 1},    // f32 f16 bf16, the 23 quantized types and i32 rows
    {"rope", 5 * 2},         // normal, neox, mrope, imrope, vision of f32, f16
    {"glu", 2 * 3},          // fused, split of f32 f16 bf16 (every function in each)
    {"reduce", 2 * 3},       // sum, mean of f32 f16 bf16
    {"sort", 2 * 3},         // argsort, top_k of f32 f16 bf16
    {"concat", 28},          // every type
    {"set_rows", 19 * 3 * 2}, // into f32 f16 bf16 and the 16 quantized types f32 converts into, from f32 f16 bf16 rows,
                              // by i32 or i64 indices
    {"pad", 3},              // f32 f16 bf16
    {"arange", 1},           // f32
    {"mul_mat_id", 26 * 3},  // f32 f16 bf16 and the 23 quantized experts x f32 f16 bf16 activations
    {"add_id", 1},           // f32
    {"flash_attn_ext", 5 * 5}, // k x v of f32 f16 bf16 q8_0 q4_0 (each with and without mask, sinks, softcap, ALiBi)
    {"repeat", 4},           // f32 f16 bf16 i32
    {"misc", 4},             // repeat_back, cumsum, tri, diag f32
    {"timestep_embedding", 1}, // f32
    {"out_prod", 1 + 22},    // a f32 and every quantized type but q8_K (ggml's list), b f32
    {"im2col", 2 * 2},       // f32 f16 input x f32 f16 result (1-D and 2-D, f32 and f16 kernels in each)
    {"conv_2d", 2},          // f32 f16 kernels over f32 inputs
    {"pool", 2 * 2},         // pool_1d, pool_2d of f32 f16 (max and avg in each)
    {"upscale", 4},          // nearest, bilinear, bicubic, antialiased bilinear of f32 (each with and without aligned corners)
    {"remap", 2 * 3},        // pad_reflect_1d, roll of f32 f16 bf16
    {"count_acc", 2},        // count_equal i32, acc f32
    {"conv_2d_dw", 1},       // f32 (channel-last inputs too)
    {"window", 3},           // win_part, win_unpart of f32; get_rel_pos of f16
    {"conv_transpose", 2 * 2}, // conv_transpose_1d, conv_transpose_2d of f32 f16 kernels over f32 inputs
    {"recurrent", 1 + 2 + 3}, // ssm_conv; ssm_scan Mamba-1 and Mamba-2; gated_linear_attn, rwkv_wkv6, rwkv_wkv7 (f32)
};

/// `base` with the counts of the families in `changed` replaced: a backend that computes
/// what the op table defines but for a few families.
template <std::size_t N>
constexpr std::array<family_count, N> narrowed(const family_count (&base)[N], std::initializer_list<family_count> changed) {
    std::array<family_count, N> out{};
    for (std::size_t i = 0; i < N; ++i) {
        out[i] = base[i];
        for (const family_count& c : changed)
            if (c.family == base[i].family) out[i].combinations = c.combinations;
    }
    return out;
}

/// The count `counts` pins for `family`; -1 when it names none.
inline int expected_combinations(std::span<const family_count> counts, std::string_view family) {
    for (const family_count& c : counts)
        if (c.family == family)
            return c.combinations;
    return -1;
}

/// Fails the test on every failure of a batch's run, and when its cases are fewer than
/// its sampled combinations ask for.
inline void check_report(const cf::batch_report& report, int shapes_per_combination = 0) {
    INFO(report.summary());
    for (const std::string& failure : report.failures)
        FAIL_CHECK(failure);
    CHECK(report.ok());
    CHECK(report.cases >= static_cast<std::size_t>(shapes_per_combination * report.sampled));
}

/// Which part of a family a test case runs: the provider's sample of its combinations, or
/// every combination (the "(every combination)" cases, label full).
enum class sweep { sample, full };

/// The rotation of sampled parity cases: $BACKPLANE_TEST_ROTATION (the build sets it from
/// its commit, so that successive commits cover every combination), else 0.
inline int test_rotation() {
    const char* v = std::getenv("BACKPLANE_TEST_ROTATION");
    return v != nullptr ? std::atoi(v) : 0;
}

/// Whether `family` is among `families`.
inline bool samples(std::span<const std::string_view> families, std::string_view family) {
    for (std::string_view f : families)
        if (f == family)
            return true;
    return false;
}

/// A family a provider samples: one combination in `every` per run.
struct sampled_family {
    std::string_view family;
    int every;
};

/// One combination in how many of `family` a provider samples: 1 (all) unless it says.
inline int sample_every(std::span<const sampled_family> sampled, std::string_view family) {
    for (const sampled_family& f : sampled)
        if (f.family == family)
            return f.every;
    return 1;
}

} // namespace parity
