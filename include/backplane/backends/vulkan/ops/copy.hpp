#pragma once
// dup, cont, cpy (copy.comp): every pair of f32, f16, bf16, q8_0 and q4_0, and i32 to
// i32, with core's conversions bit for bit (a type to itself is copied as bits;
// quantizing rounds as quantize_row_* does). One invocation per destination element, or
// per destination block when it is quantized; any strides and offsets on either side.
// Variant cpy_<source>_<destination>; everything but f32 -> f32 and i32 -> i32 needs
// 16-bit storage (16-bit types and quantized blocks are read and written as 16-bit
// words; no 16-bit or 8-bit arithmetic).

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
        const int from = real_index(a->type);
        const int to = real_index(t.type);
        if (from < 0 || to < 0) return false;
        d.shader = copy_detail::real_shaders[from][to];
    }
    // quantized rows are whole blocks
    if (t.ne[0] % block_size(t.type) != 0 || a->ne[0] % block_size(a->type) != 0) return false;
    if ((binding_unit(t.type) == 2 || binding_unit(a->type) == 2) && !f.storage16) return false;
    d.pc = shapes_of(t);
    // a quantized destination: one invocation per block, 64 per workgroup
    const bool per_block = is_quantized(t.type);
    const auto items = static_cast<std::uint64_t>(t.nelements() / block_size(t.type));
    d.groups = groups_for(items, per_block ? 64 : 128);
    return true;
}

} // namespace backplane::vulkan::detail
