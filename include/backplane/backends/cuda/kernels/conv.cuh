#pragma once
// The convolution kernels, as core/conv_geometry.hpp describes them. im2col: the input's
// windows, one result row per output position (the 1-D form as a 2-D one of height 1); b
// f32 or f16 into f32 or f16 (widened exactly, rounded to nearest even), 0 in the
// padding. conv_2d: each result element's sum over the kernel's taps and the input
// channels in f32, in the CPU's order, products rounded on their own (no contraction),
// the input rounded to f16 first under an f16 kernel. One thread per result element
// (grid-stride); any strides.

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

/// conv_2d's result element (x, y, o, image): k the kernel [kw, kh, ic, oc] (f32 or f16),
/// b the f32 input [iw, ih, ic, n].
__device__ float conv_2d_value(const tview& k, const tview& b, const window& w, i64 x, i64 y, i64 o, i64 image) {
    const bool half = k.type == elem_type::f16;
    float sum = 0.0f;
    for (i64 c = 0; c < k.ne[2]; ++c)
        for (i64 ky = 0; ky < w.kh; ++ky) {
            const i64 iy = y * w.s1 + ky * w.d1 - w.p1;
            if (iy < 0 || iy >= b.ne[1]) continue;
            for (i64 kx = 0; kx < w.kw; ++kx) {
                const i64 ix = x * w.s0 + kx * w.d0 - w.p0;
                if (ix < 0 || ix >= b.ne[0]) continue;
                float v = load(b, ix, iy, c, image);
                if (half) v = __half2float(__float2half_rn(v));
                sum = __fadd_rn(sum, __fmul_rn(load(k, kx, ky, c, o), v));
            }
        }
    return sum;
}

__global__ void k_conv_2d(tview d, tview k, tview b, window w) {
    const i64 total = d.nelements();
    for (i64 i = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
         i += static_cast<i64>(gridDim.x) * blockDim.x) {
        i64 x, y, o, image;
        unravel(i, d.ne, x, y, o, image);
        store(d, x, y, o, image, conv_2d_value(k, b, w, x, y, o, image));
    }
}

/// The window of a geometry with kernel width kw and height kh.
inline window window_for(i64 kw, i64 kh, const conv_window& c) noexcept {
    return {kw, kh, c.s0, c.s1, c.p0, c.p1, c.d0, c.d1};
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

/// The input positions along one dimension whose taps reach result position x: [first,
/// last] for k taps, stride s, n positions (empty when first > last).
__device__ void reaching(i64 x, i64 k, i64 s, i64 n, i64& first, i64& last) {
    const i64 lo = x - k + 1;
    first = lo <= 0 ? 0 : (lo + s - 1) / s;
    last = x / s < n - 1 ? x / s : n - 1;
}

/// The transposed convolutions in their 2-D form: d the result [ow, oh, oc, n], k the
/// kernel [kw, kh, oc, ic] (f32 or f16), b the f32 input [iw, ih, ic, n]; strides s0, s1.
__global__ void k_conv_transpose(tview d, tview k, tview b, i64 s0, i64 s1) {
    const bool half = k.type == elem_type::f16;
    const i64 total = d.nelements();
    for (i64 i = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
         i += static_cast<i64>(gridDim.x) * blockDim.x) {
        i64 x, y, o, image;
        unravel(i, d.ne, x, y, o, image);
        i64 y0, y1, x0, x1;
        reaching(y, k.ne[1], s1, b.ne[1], y0, y1);
        reaching(x, k.ne[0], s0, b.ne[0], x0, x1);
        float sum = 0.0f;
        for (i64 iy = y0; iy <= y1; ++iy)
            for (i64 ix = x0; ix <= x1; ++ix) {
                float dot = 0.0f;
                for (i64 c = 0; c < k.ne[3]; ++c) {
                    float v = load(b, ix, iy, c, image);
                    if (half) v = __half2float(__float2half_rn(v));
                    dot = __fadd_rn(dot, __fmul_rn(load(k, x - ix * s0, y - iy * s1, o, c), v));
                }
                sum = __fadd_rn(sum, dot);
            }
        store(d, x, y, o, image, sum);
    }
}

/// conv_2d_dw's result element (x, y, ch, image) into d: k the f32 kernel [kw, kh, 1, c],
/// b the f32 input [iw, ih, c, n]; kernel row by kernel row, as the CPU.
__global__ void k_conv_2d_dw(tview d, tview k, tview b, window w) {
    const i64 total = d.nelements();
    for (i64 i = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
         i += static_cast<i64>(gridDim.x) * blockDim.x) {
        i64 x, y, ch, image;
        unravel(i, d.ne, x, y, ch, image);
        float sum = 0.0f;
        for (i64 ky = 0; ky < w.kh; ++ky) {
            const i64 iy = y * w.s1 + ky * w.d1 - w.p1;
            if (iy < 0 || iy >= b.ne[1]) continue;
            for (i64 kx = 0; kx < w.kw; ++kx) {
                const i64 ix = x * w.s0 + kx * w.d0 - w.p0;
                if (ix < 0 || ix >= b.ne[0]) continue;
                sum = __fadd_rn(sum, __fmul_rn(load(k, kx, ky, 0, ch), load(b, ix, iy, ch, image)));
            }
        }
        store(d, x, y, ch, image, sum);
    }
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
    const window w = window_for(g.kw, g.kh, g.w);
    k_im2col<<<blocks_for(node.nelements(), 256), 256, 0, ctx.stream>>>(view_as(node, d_ne, g.d_nb), view_as(*b, b_ne, g.b_nb), w);
    return cudaGetLastError();
}

/// conv_2d (kernel_table::launch): an f32 or f16 kernel over an f32 input into f32, any
/// strides.
inline cudaError_t launch_conv_2d(const tensor& node, const detail::launch_context& ctx) noexcept {
    using namespace conv_detail;
    const tensor* k = node.src[0];
    const tensor* b = node.src[1];
    if (k == nullptr || b == nullptr || (k->type != elem_type::f32 && k->type != elem_type::f16) ||
        b->type != elem_type::f32 || node.type != elem_type::f32)
        return cudaErrorInvalidValue;
    if (node.nelements() <= 0) return cudaSuccess;
    const window w = window_for(k->ne[0], k->ne[1], window_of(node));
    k_conv_2d<<<blocks_for(node.nelements(), 128), 128, 0, ctx.stream>>>(view_of(node), view_of(*k), view_of(*b), w);
    return cudaGetLastError();
}

/// conv_2d_dw (kernel_table::launch): f32 kernel, input and result, any strides (ggml's
/// channel-last layout too).
inline cudaError_t launch_conv_2d_dw(const tensor& node, const detail::launch_context& ctx) noexcept {
    using namespace conv_detail;
    const tensor* k = node.src[0];
    const tensor* b = node.src[1];
    if (k == nullptr || b == nullptr || k->type != elem_type::f32 || b->type != elem_type::f32 || node.type != elem_type::f32)
        return cudaErrorInvalidValue;
    if (node.nelements() <= 0) return cudaSuccess;
    const window w = window_for(k->ne[0], k->ne[1], window_of(node));
    k_conv_2d_dw<<<blocks_for(node.nelements(), 128), 128, 0, ctx.stream>>>(view_of(node), view_of(*k), view_of(*b), w);
    return cudaGetLastError();
}

/// conv_transpose_1d and conv_transpose_2d (kernel_table::launch): an f32 or f16 kernel over an f32 input into
/// f32, any strides, in the 2-D form of core/conv_geometry.hpp.
inline cudaError_t launch_conv_transpose(const tensor& node, const detail::launch_context& ctx) noexcept {
    using namespace conv_detail;
    const tensor* k = node.src[0];
    const tensor* b = node.src[1];
    if (k == nullptr || b == nullptr || (k->type != elem_type::f32 && k->type != elem_type::f16) ||
        b->type != elem_type::f32 || node.type != elem_type::f32)
        return cudaErrorInvalidValue;
    if (node.nelements() <= 0) return cudaSuccess;
    const conv_transpose_geometry g = conv_transpose_geometry_of(node);
    const i64 d_ne[4] = {g.ow, g.oh, g.oc, g.n};
    const i64 k_ne[4] = {g.kw, g.kh, g.oc, g.ic};
    const i64 b_ne[4] = {g.iw, g.ih, g.ic, g.n};
    k_conv_transpose<<<blocks_for(node.nelements(), 128), 128, 0, ctx.stream>>>(
        view_as(node, d_ne, g.d_nb), view_as(*k, k_ne, g.a_nb), view_as(*b, b_ne, g.b_nb), g.s0, g.s1);
    return cudaGetLastError();
}

} // namespace backplane::cuda::kernels
