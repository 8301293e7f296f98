#pragma once
// Convolutions, as ggml builds them: im2col (the input's windows unrolled into rows), the
// composites conv_1d and conv_2d (im2col, then one matrix product with the kernel), and
// conv_2d_direct (the op conv_2d: one node, no unrolled copy in the graph).
//
// Layouts are ggml's, dimension 0 fastest: an image is [width, height, channels, batch],
// a 2-D kernel [kw, kh, in channels, out channels]; a 1-D signal is [length, channels,
// batch] and its kernel [k, in channels, out channels].

#include <backplane/core/conv_geometry.hpp>
#include <backplane/core/ops/matmul.hpp>
#include <backplane/core/ops/node.hpp>
#include <backplane/core/ops/view.hpp>

#include <array>
#include <cstdint>

namespace backplane {

namespace detail {
/// Sets a convolution's window parameters (conv_slot's first six slots).
inline void set_window(tensor& node, int s0, int s1, int p0, int p1, int d0, int d1) {
    const std::int32_t w[conv_slot::window_count] = {s0, s1, p0, p1, d0, d1};
    for (std::size_t i = 0; i < conv_slot::window_count; ++i) node.set_param(i, w[i]);
}
/// ggml's output extent, or 0 for a stride the rule refuses (its division stays defined).
constexpr std::int64_t output_size_or_0(std::int64_t in, std::int64_t k, int s, int p, int d) noexcept {
    return s > 0 ? conv_output_size(in, k, s, p, d) : 0;
}
} // namespace detail

/// The windows of b that a kernel shaped as a visits, one row per output position, as
/// ggml's im2col. 2-D (is_2d): a [kw, kh, ic, oc], b [iw, ih, ic, n]; the result is
/// [ic * kh * kw, ow, oh, n] with ow = conv_output_size(iw, kw, s0, p0, d0) and oh
/// likewise from (ih, kh, s1, p1, d1), and element (k, x, y, i), k = (c * kh + ky) * kw
/// + kx, is b's (x s0 + kx d0 - p0, y s1 + ky d1 - p1, c, i), or 0 where that lies in the
/// padding. 1-D: a [k, ic, oc], b [iw, ic, n] (3-dimensional); the result is [ic * k, ow,
/// n], from s0, p0 and d0 (s1 and d1 are not read; p1 must be 0). Only a's extents are
/// read. a, b and the result f32 or f16 in any combination (ggml's CPU takes an f16 b
/// only into f16, and an f16 result only from an f16 a); values are copied, rounded to
/// f16 where the result is. b in any layout. Op params: s0, s1, p0, p1, d0, d1, is_2D
/// (conv_slot). Strides and dilations must be positive, pads not negative.
inline tensor* im2col(context& ctx, tensor* a, tensor* b, int s0, int s1, int p0, int p1, int d0, int d1, bool is_2d,
                      elem_type dst_type) {
    detail::require_tensor("im2col", "a", a);
    detail::require_tensor("im2col", "b", b);
    constexpr auto out = detail::output_size_or_0;
    const std::int64_t ow = out(b->ne[0], a->ne[0], s0, p0, d0);
    const std::array<std::int64_t, max_dims> ne =
        is_2d ? std::array<std::int64_t, max_dims>{a->ne[2] * a->ne[1] * a->ne[0], ow, out(b->ne[1], a->ne[1], s1, p1, d1), b->ne[3]}
              : std::array<std::int64_t, max_dims>{a->ne[1] * a->ne[0], ow, b->ne[2], 1};
    tensor node = detail::proposed(op_kind::im2col, dst_type, ne, {a, b});
    detail::set_window(node, s0, s1, p0, p1, d0, d1);
    node.set_param(conv_slot::is_2d, std::int32_t{is_2d ? 1 : 0});
    return detail::make_node(ctx, node, {{"a", a}, {"b", b}});
}

/// 1-D convolution of b [iw, ic, n] by the kernel a [k, ic, oc] (contiguous), as ggml's
/// conv_1d: im2col into f16 [ic * k, ow, n], then mul_mat of it (as [ic * k, ow * n]) by
/// a (as [ic * k, oc]), f32 [ow * n, oc], seen as [ow, oc, n]. Output position x of
/// channel o sums a[t, c, o] * b[x s0 + t d0 - p0, c] over taps t and channels c, the
/// input rounded to f16 first. For n = 1 that is the convolution [ow, oc, 1]; for n > 1
/// the memory holds [ow, n, oc] (ggml's layout, which the view reads as [ow, oc, n]).
inline tensor* conv_1d(context& ctx, tensor* a, tensor* b, int s0, int p0, int d0) {
    detail::require_tensor("conv_1d", "a", a);
    tensor* cols = im2col(ctx, a, b, s0, 0, p0, 0, d0, 0, false, elem_type::f16);
    tensor* prod = mul_mat(ctx, reshape(ctx, cols, {cols->ne[0], cols->ne[2] * cols->ne[1]}),
                           reshape(ctx, a, {a->ne[0] * a->ne[1], a->ne[2]}));
    return reshape(ctx, prod, {cols->ne[1], a->ne[2], cols->ne[2]});
}

/// 2-D convolution of the image b [iw, ih, ic, n] by the kernel a [kw, kh, ic, oc]
/// (contiguous), as ggml's conv_2d: im2col into a's type [ic * kh * kw, ow, oh, n], then
/// mul_mat of it (as [ic * kh * kw, ow * oh * n]) by a (as [ic * kh * kw, oc]), f32
/// [ow * oh * n, oc], seen as [ow, oh, n, oc] and made contiguous as [ow, oh, oc, n].
/// Output (x, y, o, i) sums a[kx, ky, c, o] * b[x s0 + kx d0 - p0, y s1 + ky d1 - p1, c, i].
inline tensor* conv_2d(context& ctx, tensor* a, tensor* b, int s0, int s1, int p0, int p1, int d0, int d1) {
    detail::require_tensor("conv_2d", "a", a);
    tensor* cols = im2col(ctx, a, b, s0, s1, p0, p1, d0, d1, true, a->type);
    tensor* prod = mul_mat(ctx, reshape(ctx, cols, {cols->ne[0], cols->ne[3] * cols->ne[2] * cols->ne[1]}),
                           reshape(ctx, a, {a->ne[0] * a->ne[1] * a->ne[2], a->ne[3]}));
    tensor* planes = reshape(ctx, prod, {cols->ne[1], cols->ne[2], cols->ne[3], a->ne[3]});
    return cont(ctx, permute(ctx, planes, 0, 1, 3, 2));
}

/// 2-D convolution of the image b [iw, ih, ic, n] (f32, any layout) by the kernel a [kw,
/// kh, ic, oc] (f32 or f16, any layout), as ggml's conv_2d_direct (the op conv_2d): f32
/// [ow, oh, oc, n] with ow = conv_output_size(iw, kw, s0, p0, d0) and oh likewise, result
/// (x, y, o, i) the sum of a[kx, ky, c, o] * b[x s0 + kx d0 - p0, y s1 + ky d1 - p1, c, i]
/// over the taps inside b, in f32. With an f16 kernel the input is rounded to f16 first,
/// as ggml's CPU computes it (its windows are unrolled into the kernel's type). Op
/// params: s0, s1, p0, p1, d0, d1 (conv_slot). Strides and dilations must be positive,
/// pads not negative.
inline tensor* conv_2d_direct(context& ctx, tensor* a, tensor* b, int s0, int s1, int p0, int p1, int d0, int d1) {
    detail::require_tensor("conv_2d", "a", a);
    detail::require_tensor("conv_2d", "b", b);
    constexpr auto out = detail::output_size_or_0;
    tensor node = detail::proposed(op_kind::conv_2d, elem_type::f32,
                                   {out(b->ne[0], a->ne[0], s0, p0, d0), out(b->ne[1], a->ne[1], s1, p1, d1), a->ne[3], b->ne[3]},
                                   {a, b});
    detail::set_window(node, s0, s1, p0, p1, d0, d1);
    return detail::make_node(ctx, node, {{"a", a}, {"b", b}});
}

/// 1-D transposed convolution of the signal b [iw, ic] (f32, a matrix, any layout) by the
/// kernel a [k, oc, ic] (f32 or f16, any layout), as ggml's conv_transpose_1d: f32 [ow,
/// oc] with ow = (iw - 1) s0 + k; input value b[ix, c] times tap a[kx, o, c] adds to
/// result (ix s0 + kx, o), so result (x, o) sums a[x - ix s0, o, c] * b[ix, c] over the
/// channels and the positions ix whose taps reach x, in f32 (per position ix, its sum over
/// the channels, ix increasing, as ggml's CPU). With an f16 kernel the input is rounded
/// to f16 first, as ggml's CPU computes it. ggml defines only p0 = 0 and d0 = 1, and the
/// builder refuses others as it does. Op params: s0, p0, d0 (conv_transpose_slot).
inline tensor* conv_transpose_1d(context& ctx, tensor* a, tensor* b, int s0, int p0 = 0, int d0 = 1) {
    detail::require_tensor("conv_transpose_1d", "a", a);
    detail::require_tensor("conv_transpose_1d", "b", b);
    tensor node = detail::proposed(op_kind::conv_transpose_1d, elem_type::f32,
                                   {conv_transpose_output_size(b->ne[0], a->ne[0], s0), a->ne[1], 1, 1}, {a, b});
    node.set_param(conv_transpose_slot::s0, std::int32_t{s0});
    node.set_param(conv_transpose_slot::p0, std::int32_t{p0});
    node.set_param(conv_transpose_slot::d0, std::int32_t{d0});
    return detail::make_node(ctx, node, {{"a", a}, {"b", b}});
}

/// 2-D transposed convolution of the image b [iw, ih, ic, n] (f32, any layout) by the
/// kernel a [kw, kh, oc, ic] (f32 or f16, any layout), without padding, as ggml's
/// conv_transpose_2d_p0 (the op conv_transpose_2d): f32 [ow, oh, oc, n] with ow = (iw -
/// 1) stride + kw and oh = (ih - 1) stride + kh; input value b[ix, iy, c, i] times tap
/// a[kx, ky, o, c] adds to result (ix stride + kx, iy stride + ky, o, i), in f32 (per
/// input position, its sum over the channels; input rows, then positions, increasing, as
/// ggml's CPU). With an f16 kernel the input is rounded to f16 first, as ggml's CPU
/// computes it. Every image of the batch is computed (ggml's CPU computes the first
/// image only and leaves the others 0). Op param: the stride.
inline tensor* conv_transpose_2d_p0(context& ctx, tensor* a, tensor* b, int stride) {
    detail::require_tensor("conv_transpose_2d", "a", a);
    detail::require_tensor("conv_transpose_2d", "b", b);
    tensor node = detail::proposed(op_kind::conv_transpose_2d, elem_type::f32,
                                   {conv_transpose_output_size(b->ne[0], a->ne[0], stride),
                                    conv_transpose_output_size(b->ne[1], a->ne[1], stride), a->ne[2], b->ne[3]},
                                   {a, b});
    node.set_param(0, std::int32_t{stride});
    return detail::make_node(ctx, node, {{"a", a}, {"b", b}});
}

/// Depthwise 2-D convolution of the image b [iw, ih, c, n] (f32, any layout) by the
/// kernel a [kw, kh, 1, c] (f32, any layout), one kernel plane per channel, as ggml's
/// conv_2d_dw_direct (the op conv_2d_dw): f32 [ow, oh, c, n] with ow =
/// conv_output_size(iw, kw, s0, p0, d0) and oh likewise; result (x, y, ch, i) the sum of
/// a[kx, ky, 0, ch] * b[x s0 + kx d0 - p0, y s1 + ky d1 - p1, ch, i] over the taps inside
/// b, in f32, kernel row by kernel row. The result's layout is ggml's: over a
/// channel-last input (channels_last: ggml's CWHN, a [c, w, h, n] tensor permuted to [w,
/// h, c, n]) it is channel-last too (channels_last_strides, not contiguous), else
/// contiguous. Op params: s0, s1, p0, p1, d0, d1 (conv_slot). Strides and dilations must
/// be positive, pads not negative.
inline tensor* conv_2d_dw_direct(context& ctx, tensor* a, tensor* b, int s0, int s1, int p0, int p1, int d0, int d1) {
    detail::require_tensor("conv_2d_dw", "a", a);
    detail::require_tensor("conv_2d_dw", "b", b);
    constexpr auto out = detail::output_size_or_0;
    tensor node = detail::proposed(op_kind::conv_2d_dw, elem_type::f32,
                                   {out(b->ne[0], a->ne[0], s0, p0, d0), out(b->ne[1], a->ne[1], s1, p1, d1), b->ne[2], b->ne[3]},
                                   {a, b});
    detail::set_window(node, s0, s1, p0, p1, d0, d1);
    tensor* r = detail::make_node(ctx, node, {{"a", a}, {"b", b}});
    if (channels_last(*b, type_size(b->type))) r->nb = channels_last_strides(r->ne, type_size(r->type));
    return r;
}

/// Depthwise 2-D convolution as ggml's composite conv_2d_dw: the kernel a [kw, kh, *, *]
/// (f32 or f16, contiguous; its dimensions 2 and 3 together the channels c) and the image
/// b [iw, ih, c, n] (contiguous) seen as n c images of one channel, im2col into f16
/// [kw * kh, ow, oh, n c], then mul_mat of a (as [kw * kh, 1, c]) by it (as [kw * kh, ow
/// oh, c, n]), f32 [1, ow oh, c, n], seen as [ow, oh, c, n]. The input is rounded to f16
/// (im2col's f16 windows).
inline tensor* conv_2d_dw(context& ctx, tensor* a, tensor* b, int s0, int s1, int p0, int p1, int d0, int d1) {
    detail::require_tensor("conv_2d_dw", "a", a);
    detail::require_tensor("conv_2d_dw", "b", b);
    tensor* planes = reshape(ctx, a, {a->ne[0], a->ne[1], 1, a->ne[2] * a->ne[3]});
    tensor* cols = im2col(ctx, planes, reshape(ctx, b, {b->ne[0], b->ne[1], 1, b->ne[2] * b->ne[3]}), s0, s1, p0, p1, d0, d1,
                          true, elem_type::f16); // [kw * kh, ow, oh, n c]
    tensor* windows = reshape(ctx, cols, {cols->ne[0], cols->ne[2] * cols->ne[1], b->ne[2], b->ne[3]});
    tensor* kernels = reshape(ctx, planes, {planes->ne[0] * planes->ne[1], 1, planes->ne[3], 1});
    return reshape(ctx, mul_mat(ctx, kernels, windows), {cols->ne[1], cols->ne[2], b->ne[2], b->ne[3]});
}

} // namespace backplane
