#pragma once
// set_rows (set_rows.comp): rows of source 0 (f32, f16, bf16) written over the rows of
// the destination that the i32 or i64 indices of source 1 name, converted to the
// destination's type (f32, f16, bf16 and every quantized type but q8_K) bit for bit as
// core converts; q8_K destinations are left to the CPU. One
// invocation per element of source 0, or per block when the destination is quantized;
// any strides and offsets. An index out of range writes nothing and raises the stream's
// error word, which synchronize() reports as errc::out_of_range (see the shader).
// Variant set_rows_<source>_<destination>; everything but f32 -> f32 needs 16-bit
// storage.

#include <backplane/backends/vulkan/ops/common.hpp>
#include <backplane/backends/vulkan/ops/copy.hpp>

namespace backplane::vulkan::detail {

namespace set_rows_detail {

/// The variant names: [source][destination] (f32, f16, bf16 rows; f32, f16, bf16, q8_0,
/// q4_0, q4_1, q5_0, q5_1, iq4_nl, mxfp4, q2_K ... q6_K destinations: their any_index).
inline constexpr std::string_view shaders[3][15] = {
    {"set_rows_f32_f32", "set_rows_f32_f16", "set_rows_f32_bf16", "set_rows_f32_q8_0", "set_rows_f32_q4_0",
     "set_rows_f32_q4_1", "set_rows_f32_q5_0", "set_rows_f32_q5_1", "set_rows_f32_iq4_nl", "set_rows_f32_mxfp4",
     "set_rows_f32_q2_K", "set_rows_f32_q3_K", "set_rows_f32_q4_K", "set_rows_f32_q5_K", "set_rows_f32_q6_K"},
    {"set_rows_f16_f32", "set_rows_f16_f16", "set_rows_f16_bf16", "set_rows_f16_q8_0", "set_rows_f16_q4_0",
     "set_rows_f16_q4_1", "set_rows_f16_q5_0", "set_rows_f16_q5_1", "set_rows_f16_iq4_nl", "set_rows_f16_mxfp4",
     "set_rows_f16_q2_K", "set_rows_f16_q3_K", "set_rows_f16_q4_K", "set_rows_f16_q5_K", "set_rows_f16_q6_K"},
    {"set_rows_bf16_f32", "set_rows_bf16_f16", "set_rows_bf16_bf16", "set_rows_bf16_q8_0", "set_rows_bf16_q4_0",
     "set_rows_bf16_q4_1", "set_rows_bf16_q5_0", "set_rows_bf16_q5_1", "set_rows_bf16_iq4_nl", "set_rows_bf16_mxfp4",
     "set_rows_bf16_q2_K", "set_rows_bf16_q3_K", "set_rows_bf16_q4_K", "set_rows_bf16_q5_K", "set_rows_bf16_q6_K"},
};

} // namespace set_rows_detail

inline bool plan_set_rows(const tensor& t, const features& f, dispatch& d) noexcept {
    const tensor* b = t.src[0];
    const tensor* idx = t.src[1];
    if (b == nullptr || idx == nullptr) return false;
    const int from = real_index(b->type);
    const int to = any_index(t.type);
    if (from < 0 || from > 2 || to < 0 || to >= 15) return false; // q8_K: the CPU
    if (idx->type != elem_type::i32 && idx->type != elem_type::i64) return false;
    if (!storable(t.type, f) || !storable(b->type, f)) return false;
    d.shader = set_rows_detail::shaders[from][to];
    d.pc = shapes_of(t);
    d.pc.prm[0] = idx->type == elem_type::i64 ? 1u : 0u;
    const bool per_block = is_quantized(t.type);
    const auto items = static_cast<std::uint64_t>(b->nelements() / block_size(t.type));
    d.groups = groups_for(items, per_block ? 64 : 128);
    return true;
}

} // namespace backplane::vulkan::detail
