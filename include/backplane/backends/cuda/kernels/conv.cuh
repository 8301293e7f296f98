#pragma once
// The convolution kernels. im2col: the input's windows, one result row per output
// position, as core/conv_geometry.hpp describes them (the 1-D form as a 2-D one of
// height 1); b f32 or f16 into f32 or f16 (widened exactly, rounded to nearest even),
// 0 in the padding. One thread per result element (grid-stride); any strides.

#include <backplane/backends/cuda/kernels/common.cuh>
#include <backplane/core/conv_geometry.hpp>

#include <cstdint>

namespace backplane::cuda::kernels {

namespace conv_detail {

/// The window geometry a kernel reads: kernel width and height, strides, pads, dilations.
struct window {
    i64 kw, kh, s0, s1, p0, p1, d0, d1;
};

/// d: the result as [ic * kh * kw, ow, oh, n]; b: the input as [iw, ih, ic, n].
__global__ void k_im2col(tview d, tview b, window w) {
    const i64 total = d.nelements();
    for (i64 i = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
         i += static_cast<i64>(gridDim.x) * blockDim.x) {
        i64 k, x, y, image;
        unravel(i, d.ne, k, x, y, image);
        const i64 kx = k % w.kw, ky = k / w.kw % w.kh, channel = k / (w.kw * w.kh);
        const i64 ix = x * w.s0 + kx * w.d0 - w.p0;
        const i64 iy = y * w.s1 + ky * w.d1 - w.p1;
        const bool inside = ix >= 0 && ix < b.ne[0] && iy >= 0 && iy < b.ne[1];
        store(d, k, x, y, image, inside ? load(b, ix, iy, channel, image) : 0.0f);
    }
}

/// A view of t with the extents and byte strides given (the geometry's 2-D reading).
inline tview view_as(const tensor& t, const i64 (&ne)[4], const std::array<std::size_t, max_dims>& nb) noexcept {
    tview v = view_of(t);
    for (int i = 0; i < 4; ++i) {
        v.ne[i] = ne[i];
        v.nb[i] = static_cast<i64>(nb[static_cast<std::size_t>(i)]);
    }
    return v;
}

} // namespace conv_detail

/// im2col (kernel_table::launch): b f32 or f16 into f32 or f16, any strides.
inline cudaError_t launch_im2col(const tensor& node, const detail::launch_context& ctx) noexcept {
    using namespace conv_detail;
    const tensor* b = node.src[1];
    const auto f32_f16 = [](elem_type t) { return t == elem_type::f32 || t == elem_type::f16; };
    if (node.src[0] == nullptr || b == nullptr || !f32_f16(b->type) || !f32_f16(node.type)) return cudaErrorInvalidValue;
    if (node.nelements() <= 0) return cudaSuccess;
    const im2col_geometry g = im2col_geometry_of(node);
    const i64 d_ne[4] = {node.ne[0], g.ow, g.oh, g.n};
    const i64 b_ne[4] = {g.iw, g.ih, g.ic, g.n};
    const window w{g.kw, g.kh, g.s0, g.s1, g.p0, g.p1, g.d0, g.d1};
    k_im2col<<<blocks_for(node.nelements(), 256), 256, 0, ctx.stream>>>(view_as(node, d_ne, g.d_nb), view_as(*b, b_ne, g.b_nb), w);
    return cudaGetLastError();
}

} // namespace backplane::cuda::kernels
