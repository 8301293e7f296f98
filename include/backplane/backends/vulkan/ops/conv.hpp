#pragma once
// The convolution ops. im2col (im2col.comp): the input's windows, one result row per
// output position; values moved as bits (widened or rounded where the types differ). The
// 1-D form is described as a 2-D one of height 1 (core/conv_geometry.hpp), so one shader
// serves both. conv_2d (conv_2d.comp): each result element's sum over the kernel's taps
// and the input channels. One invocation per result element; any strides and offsets.
//
//   op       input (b)  kernel    result    variant           needs
//   im2col   f32, f16   -         f32, f16  im2col_<b>_<dst>  16-bit storage unless both f32
//   conv_2d  f32        f32, f16  f32       conv_2d_<kernel>  16-bit storage for an f16 kernel
//   conv_transpose_1d, conv_transpose_2d
//            f32        f32, f16  f32       conv_transpose_<kernel>  16-bit storage for an f16 kernel
//   conv_2d_dw  f32     f32       f32       conv_2d_dw        - (any strides: ggml's channel-last layout too)
//
// The transposed convolutions (conv_transpose.comp) gather into each result element the
// products of the input positions whose taps reach it, the 1-D form as a 2-D one of
// height 1 (core/conv_geometry.hpp).
//
// im2col's kernel (source 0) is bound but not read: its push-constant words carry the
// geometry instead (see the shader).

#include <backplane/backends/vulkan/ops/common.hpp>
#include <backplane/core/conv_geometry.hpp>

namespace backplane::vulkan::detail {

/// The im2col variant for input type b and result type dst, or empty.
constexpr std::string_view im2col_variant(elem_type b, elem_type dst) noexcept {
    const bool b16 = b == elem_type::f16, d16 = dst == elem_type::f16;
    if ((!b16 && b != elem_type::f32) || (!d16 && dst != elem_type::f32)) return {};
    return b16 ? (d16 ? "im2col_f16_f16" : "im2col_f16_f32") : (d16 ? "im2col_f32_f16" : "im2col_f32_f32");
}

/// Byte strides in binding units of type t, as 32-bit words (bindable() refuses a tensor
/// whose strides do not fit them).
inline std::array<std::uint32_t, 4> unit_strides(const std::array<std::size_t, max_dims>& nb, elem_type t) noexcept {
    const std::size_t u = binding_unit(t);
    return {static_cast<std::uint32_t>(nb[0] / u), static_cast<std::uint32_t>(nb[1] / u),
            static_cast<std::uint32_t>(nb[2] / u), static_cast<std::uint32_t>(nb[3] / u)};
}

inline bool plan_im2col(const tensor& t, const features& f, dispatch& d) noexcept {
    const tensor* b = t.src[1];
    if (t.src[0] == nullptr || b == nullptr) return false;
    d.shader = im2col_variant(b->type, t.type);
    if (d.shader.empty() || (!f.storage16 && (b->type != elem_type::f32 || t.type != elem_type::f32))) return false;
    const im2col_geometry g = im2col_geometry_of(t);
    const auto u32 = [](std::int64_t x) { return static_cast<std::uint32_t>(x); };
    d.pc = shapes_of(t);
    d.pc.ne = {u32(t.ne[0]), u32(g.ow), u32(g.oh), u32(g.n)};
    d.pc.nb = unit_strides(g.d_nb, t.type);
    d.pc.b_ne = {u32(g.iw), u32(g.ih), u32(g.ic), u32(g.n)};
    d.pc.b_nb = unit_strides(g.b_nb, b->type);
    d.pc.a_ne = {u32(g.kw), u32(g.kh), u32(g.ic), 1};
    d.pc.a_nb = {u32(g.w.s0), u32(g.w.s1), u32(g.w.d0), u32(g.w.d1)};
    d.pc.prm = {u32(g.w.p0), u32(g.w.p1), 0, 0};
    d.groups = groups_for(static_cast<std::uint64_t>(t.nelements()), 128);
    return true;
}

inline bool plan_conv_2d(const tensor& t, const features& f, dispatch& d) noexcept {
    const tensor* a = t.src[0];
    const tensor* b = t.src[1];
    if (a == nullptr || b == nullptr || b->type != elem_type::f32 || t.type != elem_type::f32) return false;
    if (a->type == elem_type::f16 && f.storage16)
        d.shader = "conv_2d_f16";
    else if (a->type == elem_type::f32)
        d.shader = "conv_2d_f32";
    else
        return false;
    const conv_window w = window_of(t);
    const auto u32 = [](std::int64_t x) { return static_cast<std::uint32_t>(x); };
    d.pc = shapes_of(t);
    d.pc.prm = {u32(w.s0), u32(w.s1), u32(w.p0), u32(w.p1)};
    d.pc.offs[3] = u32(w.d0);
    d.pc.a_ne[3] = u32(w.d1);
    d.groups = groups_for(static_cast<std::uint64_t>(t.nelements()), 128);
    return true;
}

/// conv_2d_dw: the window in prm (s0, s1, p0, p1), offs.w (d0) and a_ne.z (d1: the
/// kernel's dimension 2 has extent 1 and is never indexed).
inline bool plan_conv_2d_dw(const tensor& t, const features&, dispatch& d) noexcept {
    const tensor* a = t.src[0];
    const tensor* b = t.src[1];
    if (a == nullptr || b == nullptr || a->type != elem_type::f32 || b->type != elem_type::f32 || t.type != elem_type::f32)
        return false;
    d.shader = "conv_2d_dw";
    const conv_window w = window_of(t);
    const auto u32 = [](std::int64_t x) { return static_cast<std::uint32_t>(x); };
    d.pc = shapes_of(t);
    d.pc.prm = {u32(w.s0), u32(w.s1), u32(w.p0), u32(w.p1)};
    d.pc.offs[3] = u32(w.d0);
    d.pc.a_ne[2] = u32(w.d1);
    d.groups = groups_for(static_cast<std::uint64_t>(t.nelements()), 128);
    return true;
}

/// conv_transpose_1d and conv_transpose_2d: the push constants hold the 2-D form (conv_transpose.comp).
inline bool plan_conv_transpose(const tensor& t, const features& f, dispatch& d) noexcept {
    const tensor* a = t.src[0];
    const tensor* b = t.src[1];
    if (a == nullptr || b == nullptr || b->type != elem_type::f32 || t.type != elem_type::f32) return false;
    if (a->type == elem_type::f16 && f.storage16)
        d.shader = "conv_transpose_f16";
    else if (a->type == elem_type::f32)
        d.shader = "conv_transpose_f32";
    else
        return false;
    const conv_transpose_geometry g = conv_transpose_geometry_of(t);
    const auto u32 = [](std::int64_t x) { return static_cast<std::uint32_t>(x); };
    d.pc = shapes_of(t);
    d.pc.ne = {u32(g.ow), u32(g.oh), u32(g.oc), u32(g.n)};
    d.pc.nb = unit_strides(g.d_nb, t.type);
    d.pc.a_ne = {u32(g.kw), u32(g.kh), u32(g.oc), u32(g.ic)};
    d.pc.a_nb = unit_strides(g.a_nb, a->type);
    d.pc.b_ne = {u32(g.iw), u32(g.ih), u32(g.ic), u32(g.n)};
    d.pc.b_nb = unit_strides(g.b_nb, b->type);
    d.pc.prm = {u32(g.s0), u32(g.s1), 0, 0};
    d.groups = groups_for(static_cast<std::uint64_t>(t.nelements()), 128);
    return true;
}

} // namespace backplane::vulkan::detail
