#pragma once
// dup, cont, cpy (copy.comp), with core's conversions bit for bit (a type to itself is
// copied as bits; quantizing rounds as quantize_row_* does):
//   - from every real type (f32, f16, bf16 and every quantized one: q8_0, q4_0, q4_1,
//     q5_0, q5_1, iq4_nl, mxfp4, q2_K, q3_K, q4_K, q5_K, q6_K, q8_K) to each of them but
//     q8_K, and to itself;
//   - from iq4_xs, tq1_0, tq2_0 and the lattice i-quants (read_quants) to f32;
//   - i32 to i32.
// Not here (the CPU computes them): i64, and quantizing into q8_K from another type (a
// copy of q8_K to itself, bits, is here).
// One invocation per destination element, or per destination block when it is
// quantized; any strides and offsets on either side. Variant cpy_<source>_<destination>;
// everything but f32 -> f32 and i32 -> i32 needs 16-bit storage (16-bit types and
// quantized blocks are read and written as 16-bit words; no 16-bit or 8-bit arithmetic),
// mxfp4 (read and written as bytes) 8-bit storage too.

#include <backplane/backends/vulkan/ops/common.hpp>

namespace backplane::vulkan::detail {

namespace copy_detail {

/// The variant names: [source][destination], in elem_type order f32, f16, bf16, q8_0,
/// q4_0.
inline constexpr std::string_view real_shaders[5][5] = {
    {"cpy_f32_f32", "cpy_f32_f16", "cpy_f32_bf16", "cpy_f32_q8_0", "cpy_f32_q4_0"},
    {"cpy_f16_f32", "cpy_f16_f16", "cpy_f16_bf16", "cpy_f16_q8_0", "cpy_f16_q4_0"},
    {"cpy_bf16_f32", "cpy_bf16_f16", "cpy_bf16_bf16", "cpy_bf16_q8_0", "cpy_bf16_q4_0"},
    {"cpy_q8_0_f32", "cpy_q8_0_f16", "cpy_q8_0_bf16", "cpy_q8_0_q8_0", "cpy_q8_0_q4_0"},
    {"cpy_q4_0_f32", "cpy_q4_0_f16", "cpy_q4_0_bf16", "cpy_q4_0_q8_0", "cpy_q4_0_q4_0"},
};

/// The variants from the quantized types past q4_0 (more_quants, in its order): to f32,
/// f16, bf16, q8_0, q4_0 and to the type itself.
inline constexpr std::string_view more_shaders[n_more_quants][6] = {
    {"cpy_q4_1_f32", "cpy_q4_1_f16", "cpy_q4_1_bf16", "cpy_q4_1_q8_0", "cpy_q4_1_q4_0", "cpy_q4_1_q4_1"},
    {"cpy_q5_0_f32", "cpy_q5_0_f16", "cpy_q5_0_bf16", "cpy_q5_0_q8_0", "cpy_q5_0_q4_0", "cpy_q5_0_q5_0"},
    {"cpy_q5_1_f32", "cpy_q5_1_f16", "cpy_q5_1_bf16", "cpy_q5_1_q8_0", "cpy_q5_1_q4_0", "cpy_q5_1_q5_1"},
    {"cpy_iq4_nl_f32", "cpy_iq4_nl_f16", "cpy_iq4_nl_bf16", "cpy_iq4_nl_q8_0", "cpy_iq4_nl_q4_0", "cpy_iq4_nl_iq4_nl"},
    {"cpy_mxfp4_f32", "cpy_mxfp4_f16", "cpy_mxfp4_bf16", "cpy_mxfp4_q8_0", "cpy_mxfp4_q4_0", "cpy_mxfp4_mxfp4"},
    {"cpy_q2_K_f32", "cpy_q2_K_f16", "cpy_q2_K_bf16", "cpy_q2_K_q8_0", "cpy_q2_K_q4_0", "cpy_q2_K_q2_K"},
    {"cpy_q3_K_f32", "cpy_q3_K_f16", "cpy_q3_K_bf16", "cpy_q3_K_q8_0", "cpy_q3_K_q4_0", "cpy_q3_K_q3_K"},
    {"cpy_q4_K_f32", "cpy_q4_K_f16", "cpy_q4_K_bf16", "cpy_q4_K_q8_0", "cpy_q4_K_q4_0", "cpy_q4_K_q4_K"},
    {"cpy_q5_K_f32", "cpy_q5_K_f16", "cpy_q5_K_bf16", "cpy_q5_K_q8_0", "cpy_q5_K_q4_0", "cpy_q5_K_q5_K"},
    {"cpy_q6_K_f32", "cpy_q6_K_f16", "cpy_q6_K_bf16", "cpy_q6_K_q8_0", "cpy_q6_K_q4_0", "cpy_q6_K_q6_K"},
    {"cpy_q8_K_f32", "cpy_q8_K_f16", "cpy_q8_K_bf16", "cpy_q8_K_q8_0", "cpy_q8_K_q4_0", "cpy_q8_K_q8_K"}
};

/// The variants quantizing into q4_1, q5_0, q5_1, iq4_nl, mxfp4, q2_K, q3_K, q4_K, q5_K and
/// q6_K (more_quants but q8_K): [source (any_index)][destination] (a type to itself is in
/// more_shaders).
inline constexpr std::string_view quantizing_shaders[5 + n_more_quants][n_more_quants - 1] = {
    {"cpy_f32_q4_1", "cpy_f32_q5_0", "cpy_f32_q5_1", "cpy_f32_iq4_nl", "cpy_f32_mxfp4",
     "cpy_f32_q2_K", "cpy_f32_q3_K", "cpy_f32_q4_K", "cpy_f32_q5_K", "cpy_f32_q6_K"},
    {"cpy_f16_q4_1", "cpy_f16_q5_0", "cpy_f16_q5_1", "cpy_f16_iq4_nl", "cpy_f16_mxfp4",
     "cpy_f16_q2_K", "cpy_f16_q3_K", "cpy_f16_q4_K", "cpy_f16_q5_K", "cpy_f16_q6_K"},
    {"cpy_bf16_q4_1", "cpy_bf16_q5_0", "cpy_bf16_q5_1", "cpy_bf16_iq4_nl", "cpy_bf16_mxfp4",
     "cpy_bf16_q2_K", "cpy_bf16_q3_K", "cpy_bf16_q4_K", "cpy_bf16_q5_K", "cpy_bf16_q6_K"},
    {"cpy_q8_0_q4_1", "cpy_q8_0_q5_0", "cpy_q8_0_q5_1", "cpy_q8_0_iq4_nl", "cpy_q8_0_mxfp4",
     "cpy_q8_0_q2_K", "cpy_q8_0_q3_K", "cpy_q8_0_q4_K", "cpy_q8_0_q5_K", "cpy_q8_0_q6_K"},
    {"cpy_q4_0_q4_1", "cpy_q4_0_q5_0", "cpy_q4_0_q5_1", "cpy_q4_0_iq4_nl", "cpy_q4_0_mxfp4",
     "cpy_q4_0_q2_K", "cpy_q4_0_q3_K", "cpy_q4_0_q4_K", "cpy_q4_0_q5_K", "cpy_q4_0_q6_K"},
    {"", "cpy_q4_1_q5_0", "cpy_q4_1_q5_1", "cpy_q4_1_iq4_nl", "cpy_q4_1_mxfp4",
     "cpy_q4_1_q2_K", "cpy_q4_1_q3_K", "cpy_q4_1_q4_K", "cpy_q4_1_q5_K", "cpy_q4_1_q6_K"},
    {"cpy_q5_0_q4_1", "", "cpy_q5_0_q5_1", "cpy_q5_0_iq4_nl", "cpy_q5_0_mxfp4",
     "cpy_q5_0_q2_K", "cpy_q5_0_q3_K", "cpy_q5_0_q4_K", "cpy_q5_0_q5_K", "cpy_q5_0_q6_K"},
    {"cpy_q5_1_q4_1", "cpy_q5_1_q5_0", "", "cpy_q5_1_iq4_nl", "cpy_q5_1_mxfp4",
     "cpy_q5_1_q2_K", "cpy_q5_1_q3_K", "cpy_q5_1_q4_K", "cpy_q5_1_q5_K", "cpy_q5_1_q6_K"},
    {"cpy_iq4_nl_q4_1", "cpy_iq4_nl_q5_0", "cpy_iq4_nl_q5_1", "", "cpy_iq4_nl_mxfp4",
     "cpy_iq4_nl_q2_K", "cpy_iq4_nl_q3_K", "cpy_iq4_nl_q4_K", "cpy_iq4_nl_q5_K", "cpy_iq4_nl_q6_K"},
    {"cpy_mxfp4_q4_1", "cpy_mxfp4_q5_0", "cpy_mxfp4_q5_1", "cpy_mxfp4_iq4_nl", "",
     "cpy_mxfp4_q2_K", "cpy_mxfp4_q3_K", "cpy_mxfp4_q4_K", "cpy_mxfp4_q5_K", "cpy_mxfp4_q6_K"},
    {"cpy_q2_K_q4_1", "cpy_q2_K_q5_0", "cpy_q2_K_q5_1", "cpy_q2_K_iq4_nl", "cpy_q2_K_mxfp4",
     "", "cpy_q2_K_q3_K", "cpy_q2_K_q4_K", "cpy_q2_K_q5_K", "cpy_q2_K_q6_K"},
    {"cpy_q3_K_q4_1", "cpy_q3_K_q5_0", "cpy_q3_K_q5_1", "cpy_q3_K_iq4_nl", "cpy_q3_K_mxfp4",
     "cpy_q3_K_q2_K", "", "cpy_q3_K_q4_K", "cpy_q3_K_q5_K", "cpy_q3_K_q6_K"},
    {"cpy_q4_K_q4_1", "cpy_q4_K_q5_0", "cpy_q4_K_q5_1", "cpy_q4_K_iq4_nl", "cpy_q4_K_mxfp4",
     "cpy_q4_K_q2_K", "cpy_q4_K_q3_K", "", "cpy_q4_K_q5_K", "cpy_q4_K_q6_K"},
    {"cpy_q5_K_q4_1", "cpy_q5_K_q5_0", "cpy_q5_K_q5_1", "cpy_q5_K_iq4_nl", "cpy_q5_K_mxfp4",
     "cpy_q5_K_q2_K", "cpy_q5_K_q3_K", "cpy_q5_K_q4_K", "", "cpy_q5_K_q6_K"},
    {"cpy_q6_K_q4_1", "cpy_q6_K_q5_0", "cpy_q6_K_q5_1", "cpy_q6_K_iq4_nl", "cpy_q6_K_mxfp4",
     "cpy_q6_K_q2_K", "cpy_q6_K_q3_K", "cpy_q6_K_q4_K", "cpy_q6_K_q5_K", ""},
    {"cpy_q8_K_q4_1", "cpy_q8_K_q5_0", "cpy_q8_K_q5_1", "cpy_q8_K_iq4_nl", "cpy_q8_K_mxfp4",
     "cpy_q8_K_q2_K", "cpy_q8_K_q3_K", "cpy_q8_K_q4_K", "cpy_q8_K_q5_K", "cpy_q8_K_q6_K"},
};

/// The variants from read_quants, in its order, to f32.
inline constexpr std::string_view read_shaders[n_read_quants] = {
    "cpy_iq4_xs_f32",  "cpy_tq1_0_f32", "cpy_tq2_0_f32", "cpy_iq2_xxs_f32", "cpy_iq2_xs_f32",
    "cpy_iq2_s_f32",   "cpy_iq3_xxs_f32", "cpy_iq3_s_f32", "cpy_iq1_s_f32",  "cpy_iq1_m_f32"};

/// The variant copying `from` to `to`, or an empty name.
constexpr std::string_view shader_of(elem_type from, elem_type to) noexcept {
    if (const int r = read_quant_index(from); r >= 0) return to == elem_type::f32 ? read_shaders[r] : std::string_view{};
    const int f = any_index(from), t = any_index(to);
    if (f < 0 || t < 0) return {};
    if (from == to && f >= 5) return more_shaders[f - 5][5];
    if (t >= 5) return t < 4 + static_cast<int>(n_more_quants) ? quantizing_shaders[f][t - 5] : std::string_view{}; // q8_K: CPU
    return f < 5 ? real_shaders[f][t] : more_shaders[f - 5][t];
}

} // namespace copy_detail

inline bool plan_copy(const tensor& t, const features& f, dispatch& d) noexcept {
    const tensor* a = t.src[0];
    if (a == nullptr || a->nelements() != t.nelements()) return false;
    if (t.type == elem_type::i32 || a->type == elem_type::i32) {
        if (t.type != a->type) return false;
        d.shader = "cpy_i32_i32";
    } else if (t.type == elem_type::i64 || a->type == elem_type::i64) {
        return false; // i64 copies run on the CPU
    } else {
        d.shader = copy_detail::shader_of(a->type, t.type);
        if (d.shader.empty()) return false;
    }
    // quantized rows are whole blocks
    if (t.ne[0] % block_size(t.type) != 0 || a->ne[0] % block_size(a->type) != 0) return false;
    if (!storable(t.type, f) || !storable(a->type, f)) return false;
    d.pc = shapes_of(t);
    // a quantized destination: one invocation per block, 64 per workgroup
    const bool per_block = is_quantized(t.type);
    const auto items = static_cast<std::uint64_t>(t.nelements() / block_size(t.type));
    d.groups = groups_for(items, per_block ? 64 : 128);
    return true;
}

} // namespace backplane::vulkan::detail
