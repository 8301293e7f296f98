#pragma once
// The convolution kernels. im2col: each output position's window of the input, one
// result row per position (core/conv_geometry.hpp says which input value each element
// is); values are copied, rounded to f16 where the result is f16, and the padding is 0.
// conv_2d: each result element the sum over the kernel's taps and the input channels of
// kernel value times input value (rounded to the kernel's type first), in f32, in the
// order channel, kernel row, kernel column. conv_transpose_1d and conv_transpose_2d (one
// kernel: the 1-D form is a 2-D one of height 1): each result element gathers, input row
// by input row and input position by position (increasing, the order in which ggml's CPU
// scatters them), the sum over the input channels of kernel tap times input value
// (rounded to the kernel's type first), in f32. conv_2d_dw: each result element the sum
// over its channel's kernel plane, kernel row by kernel row, in f32. The threads split
// the result's rows.

#include <backplane/backends/cpu/kernels/common.hpp>
#include <backplane/core/conv_geometry.hpp>

namespace backplane::cpu::kernels {

namespace detail {

/// Row (x, y, i) of im2col's result: every channel's window at output position (x, y)
/// of image i. B and D are the input's and the result's storage types.
template <class B, class D>
void im2col_row(const im2col_geometry& g, const std::byte* image, std::byte* out, i64 x, i64 y) noexcept {
    i64 k = 0;
    for (i64 c = 0; c < g.ic; ++c)
        for (i64 ky = 0; ky < g.kh; ++ky) {
            const i64 iy = y * g.w.s1 + ky * g.w.d1 - g.w.p1;
            for (i64 kx = 0; kx < g.kw; ++kx, ++k) {
                const i64 ix = x * g.w.s0 + kx * g.w.d0 - g.w.p0;
                const bool inside = iy >= 0 && iy < g.ih && ix >= 0 && ix < g.iw;
                const std::size_t at = static_cast<std::size_t>(ix) * g.b_nb[0] + static_cast<std::size_t>(iy) * g.b_nb[1] +
                                       static_cast<std::size_t>(c) * g.b_nb[2];
                store<D>(out + static_cast<std::size_t>(k) * g.d_nb[0], inside ? load<B>(image + at) : 0.0f);
            }
        }
}

/// x as stored in T and read back (the input of an f16 kernel's product).
template <float_storage T> [[nodiscard]] inline float as_stored(float x) noexcept {
    if constexpr (std::is_same_v<T, float>)
        return x;
    else
        return f16_to_f32(f32_to_f16(x));
}

/// Result element (x, y, o) of image `image` (b's plane of image i): K is the kernel's
/// storage type.
template <class K>
float conv_2d_value(const tensor& a, const tensor& b, const conv_2d_geometry& g, const std::byte* image, i64 x, i64 y,
                    i64 o) noexcept {
    float sum = 0.0f;
    for (i64 c = 0; c < g.ic; ++c)
        for (i64 ky = 0; ky < g.kh; ++ky) {
            const i64 iy = y * g.w.s1 + ky * g.w.d1 - g.w.p1;
            if (iy < 0 || iy >= g.ih) continue;
            const std::byte* krow = row_ptr(a, ky, c, o);
            const std::byte* irow = image + static_cast<std::size_t>(iy) * b.nb[1] + static_cast<std::size_t>(c) * b.nb[2];
            for (i64 kx = 0; kx < g.kw; ++kx) {
                const i64 ix = x * g.w.s0 + kx * g.w.d0 - g.w.p0;
                if (ix < 0 || ix >= g.iw) continue;
                const float v = as_stored<K>(load<float>(irow + static_cast<std::size_t>(ix) * b.nb[0]));
                sum += load<K>(krow + static_cast<std::size_t>(kx) * a.nb[0]) * v;
            }
        }
    return sum;
}

/// Result element (x, y, o) of image `image` (the input's plane of that image) of a
/// transposed convolution; K is the kernel's storage type.
template <class K>
float conv_transpose_value(const conv_transpose_geometry& g, const std::byte* kernel, const std::byte* image, i64 x, i64 y,
                           i64 o) noexcept {
    i64 y0 = 0, y1 = -1, x0 = 0, x1 = -1;
    conv_transpose_geometry::reaching(y, g.kh, g.s1, g.ih, y0, y1);
    conv_transpose_geometry::reaching(x, g.kw, g.s0, g.iw, x0, x1);
    float sum = 0.0f;
    for (i64 iy = y0; iy <= y1; ++iy)
        for (i64 ix = x0; ix <= x1; ++ix) {
            const std::byte* tap = kernel + static_cast<std::size_t>(x - ix * g.s0) * g.a_nb[0] +
                                   static_cast<std::size_t>(y - iy * g.s1) * g.a_nb[1] + static_cast<std::size_t>(o) * g.a_nb[2];
            const std::byte* in = image + static_cast<std::size_t>(ix) * g.b_nb[0] + static_cast<std::size_t>(iy) * g.b_nb[1];
            float dot = 0.0f;
            for (i64 c = 0; c < g.ic; ++c)
                dot += load<K>(tap + static_cast<std::size_t>(c) * g.a_nb[3]) *
                       as_stored<K>(load<float>(in + static_cast<std::size_t>(c) * g.b_nb[2]));
            sum += dot;
        }
    return sum;
}

} // namespace detail

template <class = void>
inline void im2col(const compute_params& p, tensor& dst) noexcept {
    const tensor& b = *dst.src[1];
    const im2col_geometry g = im2col_geometry_of(dst);
    const work_range work = split_work(g.ow * g.oh * g.n, p);
    const i64 r0 = work.begin, r1 = work.end; // not a structured binding: lambdas below use them
    visit_float(b.type, [&]<class B>() {
        visit_float(dst.type, [&]<class D>() {
            for (i64 r = r0; r < r1; ++r) {
                const i64 x = r % g.ow, y = r / g.ow % g.oh, i = r / (g.ow * g.oh);
                const std::byte* image = static_cast<const std::byte*>(b.data) + static_cast<std::size_t>(i) * g.b_nb[3];
                std::byte* out = static_cast<std::byte*>(dst.data) + static_cast<std::size_t>(x) * g.d_nb[1] +
                                 static_cast<std::size_t>(y) * g.d_nb[2] + static_cast<std::size_t>(i) * g.d_nb[3];
                detail::im2col_row<B, D>(g, image, out, x, y);
            }
        });
    });
}

/// conv_2d: the kernel a [kw, kh, ic, oc] (f32 or f16) over the f32 input b [iw, ih, ic,
/// n] into f32 [ow, oh, oc, n]; any layouts.
template <class = void>
inline void conv_2d(const compute_params& p, tensor& dst) noexcept {
    const tensor& a = *dst.src[0];
    const tensor& b = *dst.src[1];
    const conv_2d_geometry g = conv_2d_geometry_of(dst);
    const work_range work = split_work(dst.nrows(), p);
    const i64 r0 = work.begin, r1 = work.end; // not a structured binding: lambdas below use them
    const auto rows = [&]<class K>() {
        for (i64 r = r0; r < r1; ++r) {
            const auto [y, o, i] = row_of(r, dst.ne);
            const std::byte* image = static_cast<const std::byte*>(b.data) + static_cast<std::size_t>(i) * b.nb[3];
            std::byte* out = row_ptr(dst, y, o, i);
            for (i64 x = 0; x < g.ow; ++x)
                store<float>(out + static_cast<std::size_t>(x) * dst.nb[0], detail::conv_2d_value<K>(a, b, g, image, x, y, o));
        }
    };
    if (a.type == elem_type::f16)
        rows.template operator()<f16_t>();
    else
        rows.template operator()<float>();
}

/// conv_2d_dw: the f32 kernel a [kw, kh, 1, c] over the f32 input b [iw, ih, c, n] into
/// f32 [ow, oh, c, n]; any layouts (ggml's channel-last one among them).
template <class = void>
inline void conv_2d_dw(const compute_params& p, tensor& dst) noexcept {
    const tensor& a = *dst.src[0];
    const tensor& b = *dst.src[1];
    const conv_2d_dw_geometry g = conv_2d_dw_geometry_of(dst);
    const auto [r0, r1] = split_work(dst.nrows(), p);
    for (i64 r = r0; r < r1; ++r) {
        const auto [y, ch, i] = row_of(r, dst.ne);
        const std::byte* plane = row_ptr(b, 0, ch, i);
        std::byte* out = row_ptr(dst, y, ch, i);
        for (i64 x = 0; x < g.ow; ++x) {
            float sum = 0.0f;
            for (i64 ky = 0; ky < g.kh; ++ky) {
                const i64 iy = y * g.w.s1 + ky * g.w.d1 - g.w.p1;
                if (iy < 0 || iy >= g.ih) continue;
                const std::byte* krow = row_ptr(a, ky, 0, ch);
                for (i64 kx = 0; kx < g.kw; ++kx) {
                    const i64 ix = x * g.w.s0 + kx * g.w.d0 - g.w.p0;
                    if (ix < 0 || ix >= g.iw) continue;
                    sum += load<float>(krow + static_cast<std::size_t>(kx) * a.nb[0]) *
                           load<float>(plane + static_cast<std::size_t>(iy) * b.nb[1] + static_cast<std::size_t>(ix) * b.nb[0]);
                }
            }
            store<float>(out + static_cast<std::size_t>(x) * dst.nb[0], sum);
        }
    }
}

/// conv_transpose_1d and conv_transpose_2d (core/conv_geometry.hpp's 2-D form): the
/// kernel a (f32 or f16) over the f32 input b into f32; any layouts. The threads split the
/// rows (y, o, image) of the 2-D form.
template <class = void>
inline void conv_transpose(const compute_params& p, tensor& dst) noexcept {
    const tensor& a = *dst.src[0];
    const tensor& b = *dst.src[1];
    const conv_transpose_geometry g = conv_transpose_geometry_of(dst);
    const work_range work = split_work(g.oh * g.oc * g.n, p);
    const i64 r0 = work.begin, r1 = work.end; // not a structured binding: the lambda below uses them
    const auto rows = [&]<class K>() {
        for (i64 r = r0; r < r1; ++r) {
            const i64 y = r % g.oh, o = r / g.oh % g.oc, i = r / (g.oh * g.oc);
            const std::byte* image = static_cast<const std::byte*>(b.data) + static_cast<std::size_t>(i) * g.b_nb[3];
            std::byte* out = static_cast<std::byte*>(dst.data) + static_cast<std::size_t>(y) * g.d_nb[1] +
                             static_cast<std::size_t>(o) * g.d_nb[2] + static_cast<std::size_t>(i) * g.d_nb[3];
            for (i64 x = 0; x < g.ow; ++x)
                store<float>(out + static_cast<std::size_t>(x) * g.d_nb[0],
                             detail::conv_transpose_value<K>(g, static_cast<const std::byte*>(a.data), image, x, y, o));
        }
    };
    if (a.type == elem_type::f16)
        rows.template operator()<f16_t>();
    else
        rows.template operator()<float>();
}

} // namespace backplane::cpu::kernels
