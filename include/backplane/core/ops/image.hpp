#pragma once
// Image and sequence layout: pooling (pool_1d, pool_2d), resampling (upscale),
// rearranging (pad_reflect_1d, roll), windows (win_part, win_unpart) and relative
// positions (get_rel_pos), as ggml's ops of those names.
// Their parameters as nodes hold them: core/image_params.hpp.

#include <backplane/core/image_params.hpp>
#include <backplane/core/ops/node.hpp>

#include <cstddef>
#include <cstdint>
#include <initializer_list>

namespace backplane {

namespace detail {
/// Writes `values` into node's op_params slots 0, 1, ...
inline void set_int_params(tensor& node, std::initializer_list<int> values) {
    std::size_t slot = 0;
    for (const int v : values) node.set_param(slot++, static_cast<std::int32_t>(v));
}
} // namespace detail

/// Each row of a (dimension 0) pooled by windows of k0 cells every s0 cells, the row
/// padded by p0 cells on both sides, as ggml's pool_1d: the result is f32
/// [(a.ne0 + 2 p0 - k0) / s0 + 1, a.ne1, a.ne2, a.ne3] and element i reads a's cells
/// i s0 - p0 .. i s0 - p0 + k0 - 1. Padding cells are skipped: max is the largest cell
/// inside a (-FLT_MAX for a window of padding only), avg the f32 sum of the cells inside
/// a divided by their count (0 for a window of padding only). a is f32 or f16 in any
/// layout. Needs k0 > 0, s0 > 0, p0 >= 0 and k0 <= a.ne0 + 2 p0. Op params: op, k0, s0, p0.
inline tensor* pool_1d(context& ctx, tensor* a, pool_op op, int k0, int s0, int p0) {
    detail::require_tensor("pool_1d", "a", a);
    tensor node = detail::proposed(op_kind::pool_1d, elem_type::f32,
                                   {pool_extent(a->ne[0], k0, s0, p0), a->ne[1], a->ne[2], a->ne[3]}, {a});
    detail::set_int_params(node, {static_cast<int>(op), k0, s0, p0});
    return detail::make_node(ctx, node, {{"a", a}});
}

/// Each plane of a (dimensions 0 and 1) pooled by k0 x k1 windows every s0 cells along
/// dimension 0 and s1 along dimension 1, the plane padded by p0 and p1 cells on both
/// sides, as ggml's pool_2d: the result is f32 [(a.ne0 + 2 p0 - k0) / s0 + 1,
/// (a.ne1 + 2 p1 - k1) / s1 + 1, a.ne2, a.ne3]. max skips the padding cells (-FLT_MAX for
/// a window of padding only); avg, unlike pool_1d's, counts them as zeros: the f32 sum of
/// the cells inside a divided by k0 k1. a is f32 or f16 in any layout. ggml takes the
/// paddings as floats, stores them truncated to integers and computes the result's shape
/// from the untruncated ones; here they are integers, so both agree. Op params: op, k0,
/// k1, s0, s1, p0, p1.
inline tensor* pool_2d(context& ctx, tensor* a, pool_op op, int k0, int k1, int s0, int s1, int p0, int p1) {
    detail::require_tensor("pool_2d", "a", a);
    tensor node = detail::proposed(
        op_kind::pool_2d, elem_type::f32,
        {pool_extent(a->ne[0], k0, s0, p0), pool_extent(a->ne[1], k1, s1, p1), a->ne[2], a->ne[3]}, {a});
    detail::set_int_params(node, {static_cast<int>(op), k0, k1, s0, s1, p0, p1});
    return detail::make_node(ctx, node, {{"a", a}});
}

/// a resampled to extents ne0 .. ne3 (up or down), as ggml's interpolate: f32 in and out,
/// `mode` a scale_mode ORed with scale_align_corners and (bilinear only)
/// scale_antialias. Each dimension i has ggml's f32 scale factor sf_i = ne_i / a.ne_i;
/// with aligned corners, dimensions 0 and 1 take (ne_i - 1) / (a.ne_i - 1) where both
/// exceed 1 and the pixel offset o is 0, else 0.5. Dimensions 2 and 3 (and every
/// dimension under nearest) take source index floor(i / sf) (f32 quotient); bilinear and
/// bicubic interpolate in dimensions 0 and 1 around the source point (i + o) / sf - o,
/// their neighbours clamped to the source's edges (bicubic: ggml's and PyTorch's
/// coefficient -0.75); antialiased bilinear weighs the source cells within max(1, 1 / sf)
/// of (i + o) / sf by triangle filters (PyTorch's antialias=True). Coordinates are
/// computed in f32 as ggml's CPU computes them (the formulas: core/interpolate.hpp).
/// a in any layout. Op param: mode | flags.
inline tensor* interpolate(context& ctx, tensor* a, std::int64_t ne0, std::int64_t ne1, std::int64_t ne2,
                           std::int64_t ne3, std::uint32_t mode) {
    detail::require_tensor("upscale", "a", a);
    tensor node = detail::proposed(op_kind::upscale, elem_type::f32, {ne0, ne1, ne2, ne3}, {a});
    node.set_param(0, static_cast<std::int32_t>(mode));
    return detail::make_node(ctx, node, {{"a", a}});
}

/// interpolate to extents ne0 .. ne3, as ggml's upscale_ext.
inline tensor* upscale_ext(context& ctx, tensor* a, int ne0, int ne1, int ne2, int ne3,
                           scale_mode mode = scale_mode::nearest) {
    return interpolate(ctx, a, ne0, ne1, ne2, ne3, static_cast<std::uint32_t>(mode));
}

/// interpolate to dimensions 0 and 1 times scale_factor (more than 1, as ggml asserts),
/// as ggml's upscale.
inline tensor* upscale(context& ctx, tensor* a, int scale_factor, scale_mode mode = scale_mode::nearest) {
    detail::require_tensor("upscale", "a", a);
    if (scale_factor <= 1) detail::op_error("upscale", "the scale factor must be above 1", {{"a", a}});
    return interpolate(ctx, a, a->ne[0] * scale_factor, a->ne[1] * scale_factor, a->ne[2], a->ne[3],
                       static_cast<std::uint32_t>(mode));
}

/// a's rows (dimension 0) with p0 cells before and p1 after, mirrored from the row without
/// repeating its ends, as ggml's pad_reflect_1d: [a, b, c, d] padded by 2 and 1 is
/// [c, b, a, b, c, d, c]. The result has a's type and extents (a.ne0 + p0 + p1, a.ne1,
/// a.ne2, a.ne3). Needs 0 <= p0, p1 < a.ne0. f32, f16 or bf16 in any layout (ggml: f32,
/// contiguous); values are copied as bits. Op params: p0, p1.
inline tensor* pad_reflect_1d(context& ctx, tensor* a, int p0, int p1) {
    detail::require_tensor("pad_reflect_1d", "a", a);
    tensor node = detail::proposed(op_kind::pad_reflect_1d, a->type,
                                   {a->ne[0] + p0 + p1, a->ne[1], a->ne[2], a->ne[3]}, {a});
    detail::set_int_params(node, {p0, p1});
    return detail::make_node(ctx, node, {{"a", a}});
}

/// a with its elements moved by shift_i along each dimension i, those moved past the end
/// wrapped around to the start, as ggml's roll: element i of the result is a's element
/// (i - shift) mod a.ne in each dimension. Needs |shift_i| < a.ne_i. f32, f16 or bf16 in
/// any layout (ggml: f32, elements contiguous); values are copied as bits. Op params:
/// shift0 .. shift3.
inline tensor* roll(context& ctx, tensor* a, int shift0, int shift1 = 0, int shift2 = 0, int shift3 = 0) {
    detail::require_tensor("roll", "a", a);
    tensor node = detail::proposed(op_kind::roll, a->type, a->ne, {a});
    detail::set_int_params(node, {shift0, shift1, shift2, shift3});
    return detail::make_node(ctx, node, {{"a", a}});
}

/// The image a [c, w0, h0] (f32, any layout; ggml: 3-dimensional) cut into windows of w x
/// w positions, as ggml's win_part (the windowed attention of SAM's image encoder): the
/// image padded with zeros at its right and bottom to whole windows, npx = ceil(w0 / w)
/// across and npy = ceil(h0 / w) down; the result is f32 [c, w, w, npx npy], window py
/// npx + px holding a's positions (px w .. px w + w - 1, py w .. py w + w - 1), 0 past its
/// edge. Op params: npx, npy, w (window_slot).
inline tensor* win_part(context& ctx, tensor* a, int w) {
    detail::require_tensor("win_part", "a", a);
    const std::int64_t npx = w > 0 ? windows_across(a->ne[1], w) : 0, npy = w > 0 ? windows_across(a->ne[2], w) : 0;
    tensor node = detail::proposed(op_kind::win_part, elem_type::f32, {a->ne[0], w, w, npx * npy}, {a});
    detail::set_int_params(node, {static_cast<int>(npx), static_cast<int>(npy), w});
    return detail::make_node(ctx, node, {{"a", a}});
}

/// The windows a [c, w, w, np] (f32, any layout) put back into an image [c, w0, h0], as
/// ggml's win_unpart (win_part's inverse, the padding dropped): result (e, x, y) is
/// window (y / w) npx + x / w's (e, x mod w, y mod w), npx = ceil(w0 / w). a must hold at
/// least npx ceil(h0 / w) windows. Op param: w (window_slot).
inline tensor* win_unpart(context& ctx, tensor* a, int w0, int h0, int w) {
    detail::require_tensor("win_unpart", "a", a);
    tensor node = detail::proposed(op_kind::win_unpart, elem_type::f32, {a->ne[0], w0, h0, 1}, {a});
    detail::set_int_params(node, {w});
    return detail::make_node(ctx, node, {{"a", a}});
}

/// The relative-position embeddings of every (key, query) pair, as ggml's get_rel_pos
/// (SAM's image encoder): a [c, 2 qh - 1] (f16, any layout; ggml: contiguous) holds one
/// embedding per distance; the result is f16 [c, kh, qh] and its row (k, q) is a's row kh
/// - 1 - k + q (the distance q - k, shifted to count from 0). Values are copied. ggml
/// defines only qh = kh. ggml's CPU also copies bf16 rows as bits into its f16 result;
/// here a is f16 only. No op params.
inline tensor* get_rel_pos(context& ctx, tensor* a, int qh, int kh) {
    detail::require_tensor("get_rel_pos", "a", a);
    tensor node = detail::proposed(op_kind::get_rel_pos, elem_type::f16, {a->ne[0], kh, qh, 1}, {a});
    return detail::make_node(ctx, node, {{"a", a}});
}

} // namespace backplane
