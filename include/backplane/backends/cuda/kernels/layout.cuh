#pragma once
// pad and arange. pad: element i of dst is element i - lp of a (src[0], dst's type)
// where that lies inside a, else 0, or with `circular` element (i - lp) mod a.ne; values
// are copied as bits (f32, f16, bf16), any strides. arange: d[i] = start + step * i in
// f32, rounded as the CPU rounds (no fused multiply-add).

#include <backplane/backends/cuda/kernels/common.cuh>
#include <backplane/backends/cuda/kernels/copy.cuh> // elem_io

#include <cstdint>

namespace backplane::cuda::kernels {

namespace layout_detail {

using namespace elem_io;

struct pads {
    i64 lp[4];
    bool circular;
};

/// The source index of dst index i along a dimension of extent n with lp leading pads,
/// or -1 for a pad.
__device__ __forceinline__ i64 padded_source(i64 i, i64 lp, i64 n, bool circular) {
    const i64 j = i - lp;
    if (circular) return ((j % n) + n) % n;
    return j >= 0 && j < n ? j : -1;
}

/// U: the element as an unsigned integer of its size.
template <class U>
__global__ void k_pad(tview d, tview a, pads w) {
    const i64 rows = d.nrows();
    for (i64 r = row_first(); r < rows; r += row_step()) {
        i64 i1, i2, i3;
        unravel_row(r, d.ne, i1, i2, i3);
        const i64 j1 = padded_source(i1, w.lp[1], a.ne[1], w.circular);
        const i64 j2 = padded_source(i2, w.lp[2], a.ne[2], w.circular);
        const i64 j3 = padded_source(i3, w.lp[3], a.ne[3], w.circular);
        const bool row_inside = j1 >= 0 && j2 >= 0 && j3 >= 0;
        char* pd = d.row(i1, i2, i3);
        for (i64 i0 = col_first(); i0 < d.ne[0]; i0 += col_step()) {
            const i64 j0 = row_inside ? padded_source(i0, w.lp[0], a.ne[0], w.circular) : -1;
            *reinterpret_cast<U*>(pd + i0 * d.nb[0]) =
                j0 >= 0 ? *reinterpret_cast<const U*>(a.row(j1, j2, j3) + j0 * a.nb[0]) : U{0};
        }
    }
}

__global__ void k_arange(tview d, float start, float step) {
    for (i64 i = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; i < d.ne[0];
         i += static_cast<i64>(gridDim.x) * blockDim.x)
        *reinterpret_cast<float*>(d.data + i * d.nb[0]) = __fadd_rn(start, __fmul_rn(step, static_cast<float>(i)));
}

} // namespace layout_detail

/// pad (kernel_table::launch): f32, f16, bf16, any strides.
inline cudaError_t launch_pad(const tensor& node, const detail::launch_context& ctx) noexcept {
    using namespace layout_detail;
    const tensor* a = node.src[0];
    if (a == nullptr || a->type != node.type) return cudaErrorInvalidValue;
    if (node.nelements() <= 0) return cudaSuccess;
    pads w{};
    for (std::size_t i = 0; i < max_dims; ++i) w.lp[i] = node.param<std::int32_t>(2 * i);
    w.circular = node.param<std::int32_t>(8) != 0;
    const tview d = view_of(node), va = view_of(*a);
    const rows_grid g = rows_geometry(d.ne[0], d.nrows());
    switch (node.type) {
    case elem_type::f32: k_pad<std::uint32_t><<<g.grid, g.block, 0, ctx.stream>>>(d, va, w); break;
    case elem_type::f16:
    case elem_type::bf16: k_pad<std::uint16_t><<<g.grid, g.block, 0, ctx.stream>>>(d, va, w); break;
    default: return cudaErrorNotSupported;
    }
    return cudaGetLastError();
}

/// arange (kernel_table::launch): f32.
inline cudaError_t launch_arange(const tensor& node, const detail::launch_context& ctx) noexcept {
    if (node.type != elem_type::f32) return cudaErrorInvalidValue;
    if (node.nelements() <= 0) return cudaSuccess;
    layout_detail::k_arange<<<blocks_for(node.ne[0], 256), 256, 0, ctx.stream>>>(view_of(node), node.param<float>(0),
                                                                                 node.param<float>(2));
    return cudaGetLastError();
}

} // namespace backplane::cuda::kernels
