#pragma once
// The convolution kernels. im2col: each output position's window of the input, one
// result row per position (core/conv_geometry.hpp says which input value each element
// is); values are copied, rounded to f16 where the result is f16, and the padding is 0.
// The threads split the result's rows.

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
            const i64 iy = y * g.s1 + ky * g.d1 - g.p1;
            for (i64 kx = 0; kx < g.kw; ++kx, ++k) {
                const i64 ix = x * g.s0 + kx * g.d0 - g.p0;
                const bool inside = iy >= 0 && iy < g.ih && ix >= 0 && ix < g.iw;
                const std::size_t at = static_cast<std::size_t>(ix) * g.b_nb[0] + static_cast<std::size_t>(iy) * g.b_nb[1] +
                                       static_cast<std::size_t>(c) * g.b_nb[2];
                store<D>(out + static_cast<std::size_t>(k) * g.d_nb[0], inside ? load<B>(image + at) : 0.0f);
            }
        }
}

} // namespace detail

template <class = void>
inline void im2col(const compute_params& p, tensor& dst) noexcept {
    const tensor& b = *dst.src[1];
    const im2col_geometry g = im2col_geometry_of(dst);
    const auto [r0, r1] = split_work(g.ow * g.oh * g.n, p);
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

} // namespace backplane::cpu::kernels
