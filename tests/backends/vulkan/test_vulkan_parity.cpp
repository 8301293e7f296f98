// The Vulkan backend against the CPU backend's reference kernels: the parity cases
// (tests/conformance/parity_cases.hpp) on physical device 0 with its memory mapped and
// with every transfer forced through the staging buffer (vulkan_targets.hpp). Warns and
// skips where there is no Vulkan; every validation-layer message fails the test.
//
// The families with the most distinct kernels (copy, set_rows, mul_mat, mul_mat_id) run
// one type combination in three, rotated by the build's commit (BACKPLANE_TEST_ROTATION):
// lavapipe compiles each pipeline at its first dispatch, about a second each, which was
// most of the suite's time. Their "(every combination)" cases (label full) run them all.

#include "vulkan_targets.hpp"

#include <string_view>

struct vulkan_targets {
    static constexpr std::string_view backend = "Vulkan";
    static parity::target_list targets() { return parity::open_vulkan_targets(); }
    static void after_run() { backplane::test::check_validation(); }
    // copy, the most pipelines (269 pairs): one pair in six, every pair once in six
    // successive commits; the others, whose grids have 3 activation or source types, one in
    // three, so that every run still has every weight and every destination type
    static constexpr parity::sampled_family sampled[] = {
        {"copy", 6}, {"set_rows", 3}, {"mul_mat", 3}, {"mul_mat_id", 3}};
    static constexpr int thin = parity::sanitized_thin;

    // The type combinations the Vulkan backend computes, per family: update an entry
    // when a kernel lands (a test fails until the count here and the claimed one agree).
    static constexpr parity::family_count expected[] = {
        {"copy", 269},   // cpy: every pair of f32 f16 bf16 q8_0 q4_0, i32 -> i32 (32 with dup / cont); from each of
                         // q4_1 q5_0 q5_1 iq4_nl mxfp4 q2_K..q6_K q8_K to f32 f16 bf16 q8_0 q4_0 and itself, dup / cont
                         // of each (11 x 7); into q4_1 q5_0 q5_1 iq4_nl mxfp4 q2_K..q6_K from each of the other 15
                         // (10 x 15); iq4_xs tq1_0 tq2_0 and the 7 lattice i-quants to f32 (10); not i64, not into
                         // q8_K, nothing else of the i-quants (16-bit storage; mxfp4 8-bit too)
        {"binary", 4},   // add, sub, mul, div f32
        {"unary", 24},   // scale, sqr, sqrt, silu, gelu, relu, neg, the 17 unary functions; f32
        {"rows", 10},    // sum_rows, argmax of f32 f16 bf16; norm, rms_norm, l2_norm, group_norm f32 (16-bit storage)
        {"soft_max", 6}, // no mask, f32 mask, f16 mask (16-bit storage); each with sinks (and ALiBi)
        {"mul_mat", 78}, // f32 f16 bf16, the 13 quantized weight types, iq4_xs tq1_0 tq2_0 and the 7 lattice
                         // i-quants x f32 f16 bf16 activations (16-bit storage)
        {"get_rows", 27}, // f32 f16 bf16 i32, the 13 quantized types', iq4_xs tq1_0 tq2_0 and the 7 lattice
                          // i-quants' rows (16-bit storage; mxfp4 8-bit too)
        {"rope", 10},    // normal, neox, mrope, imrope, vision of f32, f16 (16-bit storage)
        {"glu", 6},      // fused, split of f32 f16 bf16 (16-bit storage)
        {"reduce", 6},   // sum, mean of f32 f16 bf16 (16-bit storage)
        {"sort", 6},     // argsort, top_k of f32 f16 bf16, rows up to 4096 (16-bit storage)
        {"concat", 27},  // f32 f16 bf16 i32 and the 23 quantized types, not i64 (16-bit storage; mxfp4 8-bit)
        {"set_rows", 90}, // into f32 f16 bf16 and every quantized type but q8_K from f32 f16 bf16, i32 or i64
                          // indices (16-bit storage; mxfp4 8-bit too); not into q8_K
        {"pad", 3},       // f32 f16 bf16 (16-bit storage)
        {"arange", 1},    // f32
        {"mul_mat_id", 48}, // f32 f16 bf16 and the 13 quantized expert types x f32 f16 bf16 activations (16-bit storage)
        {"add_id", 1},     // f32
        {"flash_attn_ext", 5 * 5}, // k x v of f32 f16 bf16 q8_0 q4_0 (16-bit storage)
        {"repeat", 4},     // f32 f16 bf16 i32 (16-bit storage)
        {"misc", 4},       // repeat_back, cumsum, tri, diag f32
        {"timestep_embedding", 1}, // f32
        {"out_prod", 1},   // f32 a (quantized a: left to the CPU)
        {"im2col", 2 * 2},  // f32 f16 input x f32 f16 result (16-bit storage unless both f32)
        {"conv_2d", 2},     // f32 f16 kernels over f32 inputs (16-bit storage for f16)
        {"pool", 2 * 2},   // pool_1d, pool_2d of f32 f16 (16-bit storage)
        {"upscale", 4},    // nearest, bilinear, bicubic, antialiased bilinear of f32
        {"remap", 2 * 3},  // pad_reflect_1d, roll of f32 f16 bf16 (16-bit storage)
        {"count_acc", 2},  // count_equal i32, acc f32
        {"conv_2d_dw", 1},  // f32 (channel-last inputs too)
        {"window", 3},      // win_part, win_unpart of f32; get_rel_pos f16 (16-bit storage)
        {"conv_transpose", 2 * 2}, // conv_transpose_1d, conv_transpose_2d of f32 f16 kernels (16-bit storage for f16)
        {"recurrent", 1 + 2 + 3}, // ssm_conv; ssm_scan Mamba-1 and Mamba-2 (f32; B and C contiguous);
                                  // gated_linear_attn, rwkv_wkv6, rwkv_wkv7 (f32)
    };
};

#define BACKPLANE_PARITY_PROVIDERS vulkan_targets
#define BACKPLANE_PARITY_SAMPLING_PROVIDERS vulkan_targets
#include "../../conformance/parity_cases.hpp"
