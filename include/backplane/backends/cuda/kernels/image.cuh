#pragma once
// pool_1d and pool_2d: each result element (f32) from a window over dimensions 0 and 1
// of a (f32 or f16, any strides), in f32 and in the CPU's order (the window's rows, then
// the cells of a row), padding cells skipped; avg divides by the cells inside a (pool_1d)
// or by k0 k1 (pool_2d), as ggml's. upscale: f32, core/interpolate.hpp's formulas, as
// the CPU. pad_reflect_1d and roll: f32 f16 bf16 copied as bits, core/index_maps.hpp's
// index maps. One thread per result element.

#include <backplane/backends/cuda/kernels/common.cuh>
#include <backplane/core/image_params.hpp>
#include <backplane/core/index_maps.hpp>

#include <cstdint>

namespace backplane::cuda::kernels {

namespace image_detail {

/// The pooled value of the window whose first cell is (x0, y0) (either may lie in the
/// padding) in plane (i2, i3) of a.
__device__ __forceinline__ float pooled(const tview& a, const pool_window& w, i64 x0, i64 y0, i64 i2, i64 i3) {
    const bool is_max = w.op == pool_op::max;
    float acc = is_max ? __int_as_float(static_cast<int>(0xff7fffffu)) : 0.0f; // -FLT_MAX
    i64 inside = 0;
    const i64 x1 = x0 + w.k0 < a.ne[0] ? x0 + w.k0 : a.ne[0];
    const i64 y1 = y0 + w.k1 < a.ne[1] ? y0 + w.k1 : a.ne[1];
    for (i64 y = y0 > 0 ? y0 : 0; y < y1; ++y)
        for (i64 x = x0 > 0 ? x0 : 0; x < x1; ++x) {
            const float v = load(a, x, y, i2, i3);
            acc = is_max ? (v < acc ? acc : v) : __fadd_rn(acc, v);
            ++inside;
        }
    if (is_max) return acc;
    if (w.avg_over_inside) return inside > 0 ? __fdiv_rn(acc, static_cast<float>(inside)) : 0.0f;
    return __fdiv_rn(acc, static_cast<float>(static_cast<i64>(w.k0) * w.k1));
}

/// Calls f(i0, i1, i2, i3) for each element of d that this thread computes (a grid-stride
/// loop over d's elements).
template <class F> __device__ __forceinline__ void for_each_element(const tview& d, const F& f) {
    const i64 n = d.nelements();
    for (i64 i = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
         i += static_cast<i64>(gridDim.x) * blockDim.x) {
        i64 i0, i1, i2, i3;
        unravel(i, d.ne, i0, i1, i2, i3);
        f(i0, i1, i2, i3);
    }
}

__global__ void k_pool(tview d, tview a, pool_window w) {
    for_each_element(d, [&](i64 i0, i64 i1, i64 i2, i64 i3) {
        store(d, i0, i1, i2, i3, pooled(a, w, i0 * w.s0 - w.p0, i1 * w.s1 - w.p1, i2, i3));
    });
}

__global__ void k_upscale(tview d, tview a, interpolation m) {
    for_each_element(d, [&](i64 i0, i64 i1, i64 i2, i64 i3) {
        const char* plane = a.row(0, interp::nearest(i2, m.sf[2], a.ne[2]), interp::nearest(i3, m.sf[3], a.ne[3]));
        const auto at = [&](i64 x, i64 y) { return *reinterpret_cast<const float*>(plane + x * a.nb[0] + y * a.nb[1]); };
        store(d, i0, i1, i2, i3, interp::sample(m, at, i0, i1, a.ne[0], a.ne[1]));
    });
}

/// pad_reflect_1d's p0 (reflect) or roll's shifts.
struct remap_params {
    bool reflect;
    i64 v[4];
};

/// U: the element as an unsigned integer of its size.
template <class U>
__global__ void k_remap(tview d, tview a, remap_params m) {
    for_each_element(d, [&](i64 i0, i64 i1, i64 i2, i64 i3) {
        const i64 c[4] = {i0, i1, i2, i3};
        i64 j[4];
        for (int k = 0; k < 4; ++k) j[k] = m.reflect ? c[k] : rolled_index(c[k], m.v[k], a.ne[k]);
        if (m.reflect) j[0] = reflected_index(i0, m.v[0], a.ne[0]);
        *reinterpret_cast<U*>(d.row(i1, i2, i3) + i0 * d.nb[0]) =
            *reinterpret_cast<const U*>(a.row(j[1], j[2], j[3]) + j[0] * a.nb[0]);
    });
}

/// win_part, win_unpart: each result element a source element's bits (U: 4 or 2 bytes),
/// its row as core/image_params.hpp's window_source_row says, 0 past the source's edge.
struct window_params {
    int mode; ///< 0 win_part, 1 win_unpart, 2 get_rel_pos
    i64 npx, w;
};
template <class U>
__global__ void k_window(tview d, tview a, window_params m) {
    for_each_element(d, [&](i64 i0, i64 i1, i64 i2, i64 i3) {
        i64 j1, j2, j3;
        bool inside = true;
        if (m.mode == 2) {
            j1 = d.ne[1] - 1 - i1 + i2;
            j2 = j3 = 0;
        } else if (m.mode == 0) {
            j1 = (i3 % m.npx) * m.w + i1;
            j2 = (i3 / m.npx) * m.w + i2;
            j3 = 0;
            inside = j1 < a.ne[1] && j2 < a.ne[2];
        } else {
            j1 = i1 % m.w;
            j2 = i2 % m.w;
            j3 = (i2 / m.w) * m.npx + i1 / m.w;
        }
        *reinterpret_cast<U*>(d.row(i1, i2, i3) + i0 * d.nb[0]) =
            inside ? *reinterpret_cast<const U*>(a.row(j1, j2, j3) + i0 * a.nb[0]) : U(0);
    });
}

} // namespace image_detail

/// pool_1d and pool_2d (kernel_table::launch): f32 or f16 sources, any strides.
inline cudaError_t launch_pool(const tensor& node, const detail::launch_context& ctx) noexcept {
    const tensor* a = node.src[0];
    if (a == nullptr || node.type != elem_type::f32 || (a->type != elem_type::f32 && a->type != elem_type::f16))
        return cudaErrorInvalidValue;
    if (node.nelements() <= 0) return cudaSuccess;
    image_detail::k_pool<<<blocks_for(node.nelements(), 256), 256, 0, ctx.stream>>>(view_of(node), view_of(*a),
                                                                                   pool_window_of(node));
    return cudaGetLastError();
}

/// upscale (kernel_table::launch): f32, any strides.
inline cudaError_t launch_upscale(const tensor& node, const detail::launch_context& ctx) noexcept {
    const tensor* a = node.src[0];
    if (a == nullptr || node.type != elem_type::f32 || a->type != elem_type::f32) return cudaErrorInvalidValue;
    if (node.nelements() <= 0) return cudaSuccess;
    image_detail::k_upscale<<<blocks_for(node.nelements(), 256), 256, 0, ctx.stream>>>(view_of(node), view_of(*a),
                                                                                      interpolation_of(node));
    return cudaGetLastError();
}

/// pad_reflect_1d and roll (kernel_table::launch): f32, f16, bf16, any strides.
inline cudaError_t launch_remap(const tensor& node, const detail::launch_context& ctx) noexcept {
    using namespace image_detail;
    const tensor* a = node.src[0];
    if (a == nullptr || a->type != node.type) return cudaErrorInvalidValue;
    if (node.nelements() <= 0) return cudaSuccess;
    remap_params m{node.op == op_kind::pad_reflect_1d, {}};
    for (std::size_t i = 0; i < max_dims; ++i) m.v[i] = node.param<std::int32_t>(i);
    const unsigned blocks = blocks_for(node.nelements(), 256);
    switch (node.type) {
    case elem_type::f32: k_remap<std::uint32_t><<<blocks, 256, 0, ctx.stream>>>(view_of(node), view_of(*a), m); break;
    case elem_type::f16:
    case elem_type::bf16: k_remap<std::uint16_t><<<blocks, 256, 0, ctx.stream>>>(view_of(node), view_of(*a), m); break;
    default: return cudaErrorNotSupported;
    }
    return cudaGetLastError();
}

/// win_part and win_unpart (kernel_table::launch): f32; get_rel_pos: f16; any strides.
inline cudaError_t launch_window(const tensor& node, const detail::launch_context& ctx) noexcept {
    using namespace image_detail;
    const tensor* a = node.src[0];
    if (node.op == op_kind::get_rel_pos) {
        if (a == nullptr || a->type != elem_type::f16 || node.type != elem_type::f16) return cudaErrorInvalidValue;
        if (node.nelements() <= 0) return cudaSuccess;
        k_window<std::uint16_t><<<blocks_for(node.nelements(), 256), 256, 0, ctx.stream>>>(view_of(node), view_of(*a),
                                                                                          window_params{2, 0, 0});
        return cudaGetLastError();
    }
    if (a == nullptr || a->type != elem_type::f32 || node.type != elem_type::f32) return cudaErrorInvalidValue;
    if (node.nelements() <= 0) return cudaSuccess;
    const bool part = node.op == op_kind::win_part;
    const i64 w = node.param<std::int32_t>(part ? window_slot::part_w : window_slot::unpart_w);
    const window_params m{part ? 0 : 1, part ? i64{node.param<std::int32_t>(window_slot::npx)} : windows_across(node.ne[1], w), w};
    k_window<std::uint32_t><<<blocks_for(node.nelements(), 256), 256, 0, ctx.stream>>>(view_of(node), view_of(*a), m);
    return cudaGetLastError();
}

} // namespace backplane::cuda::kernels
