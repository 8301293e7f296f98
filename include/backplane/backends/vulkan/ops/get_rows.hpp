#pragma once
// get_rows (get_rows.comp): rows of source 0 picked by the i32 indices of source 1. One
// invocation per destination element; any strides and offsets. An index out of range
// reads nothing, fills its row of dst with zeros and raises the stream's error word,
// which synchronize() reports as errc::out_of_range (see the shader).
//
//   a       dst   variant          needs
//   f32     f32   get_rows_f32     -
//   i32     i32   get_rows_i32     -
//   f16     f32   get_rows_f16     16-bit storage
//   bf16    f32   get_rows_bf16    16-bit storage
//   q8_0    f32   get_rows_q8_0    16-bit storage
//   q4_0    f32   get_rows_q4_0    16-bit storage
//   q4_1, q5_0, q5_1, iq4_nl, q2_K, q3_K, q4_K, q5_K, q6_K, q8_K
//           f32   get_rows_<type>  16-bit storage
//   mxfp4   f32   get_rows_mxfp4   8-bit and 16-bit storage (its blocks are read as bytes)
//   iq4_xs, tq1_0, tq2_0, iq2_xxs, iq2_xs, iq2_s, iq3_xxs, iq3_s, iq1_s, iq1_m (read_quants)
//           f32   get_rows_<type>  16-bit storage

#include <backplane/backends/vulkan/ops/common.hpp>

namespace backplane::vulkan::detail {

namespace get_rows_detail {
/// The variants of more_quants, in its order.
inline constexpr std::string_view more_shaders[n_more_quants] = {
    "get_rows_q4_1", "get_rows_q5_0", "get_rows_q5_1", "get_rows_iq4_nl", "get_rows_mxfp4", "get_rows_q2_K",
    "get_rows_q3_K", "get_rows_q4_K", "get_rows_q5_K", "get_rows_q6_K", "get_rows_q8_K"};
/// The variants of read_quants, in its order.
inline constexpr std::string_view read_shaders[n_read_quants] = {
    "get_rows_iq4_xs", "get_rows_tq1_0", "get_rows_tq2_0", "get_rows_iq2_xxs", "get_rows_iq2_xs",
    "get_rows_iq2_s",  "get_rows_iq3_xxs", "get_rows_iq3_s", "get_rows_iq1_s",  "get_rows_iq1_m"};
} // namespace get_rows_detail

inline bool plan_get_rows(const tensor& t, const features& f, dispatch& d) noexcept {
    const tensor* a = t.src[0];
    const tensor* idx = t.src[1];
    if (a == nullptr || idx == nullptr || idx->type != elem_type::i32) return false;
    const elem_type want = a->type == elem_type::i32 ? elem_type::i32 : elem_type::f32;
    if (t.type != want) return false;
    switch (a->type) {
    case elem_type::f32: d.shader = "get_rows_f32"; break;
    case elem_type::i32: d.shader = "get_rows_i32"; break;
    case elem_type::f16: d.shader = "get_rows_f16"; break;
    case elem_type::bf16: d.shader = "get_rows_bf16"; break;
    case elem_type::q8_0: d.shader = "get_rows_q8_0"; break;
    case elem_type::q4_0: d.shader = "get_rows_q4_0"; break;
    default: {
        const int q = more_quant_index(a->type), r = read_quant_index(a->type);
        if (q < 0 && r < 0) return false;
        d.shader = q >= 0 ? get_rows_detail::more_shaders[q] : get_rows_detail::read_shaders[r];
    }
    }
    if (!storable(a->type, f)) return false;
    d.pc = shapes_of(t);
    d.groups = groups_for(static_cast<std::uint64_t>(t.nelements()), 128);
    return true;
}

} // namespace backplane::vulkan::detail
