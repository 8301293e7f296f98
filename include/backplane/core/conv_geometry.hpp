#pragma once
// The geometry of the convolution ops, in one place: ggml's output extent of a sliding
// window, the parameter slots the ops share, and each op's node read as the 2-D form its
// kernels compute (im2col's 1-D form is a 2-D one of height 1). The rules, the builders
// and every backend's kernels read these. The readers of a node are templates on the
// tensor type, so that this header needs no tensor.hpp, which includes op_traits.hpp,
// which includes this header.

#include <backplane/core/op_kind.hpp>

#include <array>
#include <cstddef>
#include <cstdint>

namespace backplane {

/// ggml's output extent of a window of k taps, dilation d, stride s over `in` values
/// padded by p on both sides: (in + 2p - d (k - 1) - 1) / s + 1, the division truncated
/// toward zero as C's (so a window one short of fitting still gives 1 when s > 1, as in
/// ggml). s must be positive.
constexpr std::int64_t conv_output_size(std::int64_t in, std::int64_t k, std::int64_t s, std::int64_t p,
                                        std::int64_t d) noexcept {
    return (in + 2 * p - d * (k - 1) - 1) / s + 1;
}

/// The op_params slots of the convolutions, in ggml's order: strides, pads, dilations
/// (im2col and conv_2d), then im2col's is_2D.
namespace conv_slot {
inline constexpr std::size_t s0 = 0, s1 = 1, p0 = 2, p1 = 3, d0 = 4, d1 = 5;
inline constexpr std::size_t window_count = 6; ///< conv_2d's slots
inline constexpr std::size_t is_2d = 6;        ///< im2col: 1 for the 2-D form
inline constexpr std::size_t im2col_count = 7;
} // namespace conv_slot

/// Strides, pads and dilations of a 2-D window (dimension 0, then 1).
struct conv_window {
    std::int64_t s0 = 1, s1 = 1, p0 = 0, p1 = 0, d0 = 1, d1 = 1;
};

/// The window of a convolution node (conv_slot's first six slots).
template <class Node> conv_window window_of(const Node& t) noexcept {
    namespace s = conv_slot;
    return {t.template param<std::int32_t>(s::s0), t.template param<std::int32_t>(s::s1),
            t.template param<std::int32_t>(s::p0), t.template param<std::int32_t>(s::p1),
            t.template param<std::int32_t>(s::d0), t.template param<std::int32_t>(s::d1)};
}

/// An im2col node as the 2-D form: the input b [iw, ih, ic, n] and the result [ic * kh *
/// kw, ow, oh, n], with byte strides in that order (the 1-D form's b [iw, ic, n] and
/// result [ic * kw, ow, n] get height 1 and a zero stride there). Result element (k, x,
/// y, i), k = (c * kh + ky) * kw + kx, is b's (x s0 + kx d0 - p0, y s1 + ky d1 - p1, c,
/// i), or 0 outside b.
struct im2col_geometry {
    std::int64_t kw = 1, kh = 1, ic = 1;
    std::int64_t iw = 1, ih = 1;
    std::int64_t ow = 1, oh = 1, n = 1;
    conv_window w;
    std::array<std::size_t, 4> b_nb{}; ///< b's strides as [iw, ih, ic, n]
    std::array<std::size_t, 4> d_nb{}; ///< the result's as [ic * kh * kw, ow, oh, n]
};

/// The geometry of im2col node t (src[0] the kernel, src[1] the input).
template <class Node> im2col_geometry im2col_geometry_of(const Node& t) noexcept {
    const Node& a = *t.src[0];
    const Node& b = *t.src[1];
    im2col_geometry g;
    g.w = window_of(t);
    g.kw = a.ne[0];
    g.iw = b.ne[0];
    g.ow = t.ne[1];
    if (t.template param<std::int32_t>(conv_slot::is_2d) == 1) {
        g.kh = a.ne[1];
        g.ic = b.ne[2];
        g.ih = b.ne[1];
        g.oh = t.ne[2];
        g.n = b.ne[3];
        g.b_nb = b.nb;
        g.d_nb = t.nb;
    } else { // height 1: the row stride is never multiplied by anything but 0
        g.ic = b.ne[1];
        g.n = b.ne[2];
        g.b_nb = {b.nb[0], 0, b.nb[1], b.nb[2]};
        g.d_nb = {t.nb[0], t.nb[1], 0, t.nb[2]};
    }
    return g;
}

/// A conv_2d node: the kernel a [kw, kh, ic, oc], the input b [iw, ih, ic, n], the result
/// [ow, oh, oc, n]; result (x, y, o, i) sums a[kx, ky, c, o] * b[x s0 + kx d0 - p0, y s1 +
/// ky d1 - p1, c, i] over the taps inside b.
struct conv_2d_geometry {
    std::int64_t kw = 1, kh = 1, ic = 1, oc = 1;
    std::int64_t iw = 1, ih = 1;
    std::int64_t ow = 1, oh = 1, n = 1;
    conv_window w;
    /// Multiply-adds per result element (the kernel's taps times the input channels).
    [[nodiscard]] std::int64_t taps() const noexcept { return kw * kh * ic; }
};

template <class Node> conv_2d_geometry conv_2d_geometry_of(const Node& t) noexcept {
    const Node& a = *t.src[0];
    const Node& b = *t.src[1];
    return {a.ne[0], a.ne[1], a.ne[2], a.ne[3], b.ne[0], b.ne[1], t.ne[0], t.ne[1], b.ne[3], window_of(t)};
}

/// ggml's output extent of a transposed convolution (stride s, no padding, dilation 1):
/// (in - 1) s + k, each input position spreading its k taps s apart.
constexpr std::int64_t conv_transpose_output_size(std::int64_t in, std::int64_t k, std::int64_t s) noexcept {
    return (in - 1) * s + k;
}

/// The op_params slots of the transposed convolutions, in ggml's order: conv_transpose_1d
/// (s0, p0, d0; ggml defines it for p0 = 0 and d0 = 1 only), conv_transpose_2d (the
/// stride of both dimensions).
namespace conv_transpose_slot {
inline constexpr std::size_t s0 = 0, p0 = 1, d0 = 2;
inline constexpr std::size_t count_1d = 3, count_2d = 1;
} // namespace conv_transpose_slot

/// A transposed convolution node (conv_transpose_1d or conv_transpose_2d) as the 2-D
/// form: the kernel a [kw, kh, oc, ic], the input b [iw, ih, ic, n], the result [ow, oh,
/// oc, n], with byte strides in that order (the 1-D form's a [k, oc, ic], b [iw, ic] and
/// result [ow, oc] get height 1, one image and zero strides there). Input value b(ix, iy,
/// c, i) times kernel tap a(kx, ky, o, c) adds to result (ix s0 + kx, iy s1 + ky, o, i):
/// result (x, y, o, i) sums them over the channels c and the input positions whose taps
/// reach (x, y).
struct conv_transpose_geometry {
    std::int64_t kw = 1, kh = 1, oc = 1, ic = 1;
    std::int64_t iw = 1, ih = 1;
    std::int64_t ow = 1, oh = 1, n = 1;
    std::int64_t s0 = 1, s1 = 1;
    std::array<std::size_t, 4> a_nb{}; ///< the kernel's strides as [kw, kh, oc, ic]
    std::array<std::size_t, 4> b_nb{}; ///< the input's as [iw, ih, ic, n]
    std::array<std::size_t, 4> d_nb{}; ///< the result's as [ow, oh, oc, n]
    /// The input positions along one dimension whose taps reach result position x:
    /// [first, last] (empty when first > last) for k taps, stride s, `in` positions.
    static constexpr void reaching(std::int64_t x, std::int64_t k, std::int64_t s, std::int64_t in, std::int64_t& first,
                                   std::int64_t& last) noexcept {
        const std::int64_t lo = x - k + 1; // the smallest ix with ix s + k - 1 >= x is ceil(lo / s)
        first = lo <= 0 ? 0 : (lo + s - 1) / s;
        last = x / s < in - 1 ? x / s : in - 1;
    }
};

/// The geometry of conv_transpose_1d or conv_transpose_2d node t (src[0] the kernel,
/// src[1] the input).
template <class Node> conv_transpose_geometry conv_transpose_geometry_of(const Node& t) noexcept {
    const Node& a = *t.src[0];
    const Node& b = *t.src[1];
    conv_transpose_geometry g;
    if (t.op != op_kind::conv_transpose_1d) { // conv_transpose_2d
        const std::int64_t s = t.template param<std::int32_t>(0);
        g = {a.ne[0], a.ne[1], a.ne[2], a.ne[3], b.ne[0], b.ne[1], t.ne[0], t.ne[1], b.ne[3], s, s, a.nb, b.nb, t.nb};
    } else {
        g = {a.ne[0], 1, a.ne[1], a.ne[2], b.ne[0], 1, t.ne[0], 1, 1, t.template param<std::int32_t>(conv_transpose_slot::s0), 1,
             {a.nb[0], 0, a.nb[1], a.nb[2]}, {b.nb[0], 0, b.nb[1], 0}, {t.nb[0], 0, t.nb[1], 0}};
    }
    return g;
}

/// ggml's channel-last test (ggml_is_contiguous_channels) of an image [w, h, c, n]: the
/// channels adjacent (nb2 is one element of `elem` bytes) and fastest (nb0 > nb2, nb1 >
/// nb0), as a [c, w, h, n] tensor permuted to [w, h, c, n] is (ggml's CWHN layout).
template <class Node> bool channels_last(const Node& t, std::size_t elem) noexcept {
    return t.nb[0] > t.nb[2] && t.nb[1] > t.nb[0] && t.nb[2] == elem;
}

/// The strides ggml gives conv_2d_dw's result [ow, oh, c, n] of elements of `elem` bytes
/// over a channel-last input: the channels adjacent, then x, then y, then the image
/// (the input's layout); other inputs give a contiguous result.
constexpr std::array<std::size_t, 4> channels_last_strides(const std::array<std::int64_t, 4>& ne, std::size_t elem) noexcept {
    const std::size_t c = static_cast<std::size_t>(ne[2]) * elem;
    return {c, c * static_cast<std::size_t>(ne[0]), elem, c * static_cast<std::size_t>(ne[0] * ne[1])};
}

/// A conv_2d_dw node: the kernel a [kw, kh, 1, c], the input b [iw, ih, c, n], the result
/// [ow, oh, c, n]; result (x, y, ch, i) sums a[kx, ky, 0, ch] * b[x s0 + kx d0 - p0, y s1
/// + ky d1 - p1, ch, i] over the taps inside b.
struct conv_2d_dw_geometry {
    std::int64_t kw = 1, kh = 1, c = 1;
    std::int64_t iw = 1, ih = 1;
    std::int64_t ow = 1, oh = 1, n = 1;
    conv_window w;
};

template <class Node> conv_2d_dw_geometry conv_2d_dw_geometry_of(const Node& t) noexcept {
    const Node& a = *t.src[0];
    const Node& b = *t.src[1];
    return {a.ne[0], a.ne[1], b.ne[2], b.ne[0], b.ne[1], t.ne[0], t.ne[1], b.ne[3], window_of(t)};
}

} // namespace backplane
