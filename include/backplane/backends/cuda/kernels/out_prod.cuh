#pragma once
// out_prod, as the CPU's reference kernel (backends/cpu/kernels/out_prod.hpp): dst[i0, i1,
// i2, i3] (f32) = sum over k of a[i0, k, i2 / (ne2 / a.ne2), i3 / (ne3 / a.ne3)] * b[i1, k,
// i2, i3], summed in double in k's order; a f32 or quantized (values read as core's
// dequantize_row_* gives them: elem_io::ld_row), b f32. One thread per element of dst; any
// strides (a quantized row's nb0 is its block stride).

#include <backplane/backends/cuda/kernels/common.cuh>
#include <backplane/backends/cuda/kernels/copy.cuh> // elem_io

namespace backplane::cuda::kernels {

namespace out_prod_detail {

using namespace elem_io;

template <elem_type S>
__global__ void k_out_prod(tview d, tview a, tview b) {
    const i64 rows = d.nrows();
    for (i64 q = row_first(); q < rows; q += row_step()) {
        i64 i1, i2, i3;
        unravel_row(q, d.ne, i1, i2, i3);
        const i64 a2 = i2 / (d.ne[2] / a.ne[2]), a3 = i3 / (d.ne[3] / a.ne[3]);
        for (i64 i0 = col_first(); i0 < d.ne[0]; i0 += col_step()) {
            double sum = 0.0;
            for (i64 k = 0; k < a.ne[1]; ++k)
                sum += static_cast<double>(ld_row<S>(a.row(k, a2, a3), a.nb[0], i0)) *
                       static_cast<double>(*reinterpret_cast<const float*>(b.row(k, i2, i3) + i1 * b.nb[0]));
            *reinterpret_cast<float*>(d.row(i1, i2, i3) + i0 * d.nb[0]) = static_cast<float>(sum);
        }
    }
}

} // namespace out_prod_detail

/// out_prod (kernel_table::launch): see the file comment for the types.
inline cudaError_t launch_out_prod(const tensor& node, const detail::launch_context& ctx) noexcept {
    using namespace out_prod_detail;
    const tensor* a = node.src[0];
    const tensor* b = node.src[1];
    if (a == nullptr || b == nullptr || b->type != elem_type::f32 || node.type != elem_type::f32) return cudaErrorInvalidValue;
    if (node.nelements() <= 0) return cudaSuccess;
    const tview d = view_of(node), va = view_of(*a), vb = view_of(*b);
    const rows_grid g = rows_geometry(d.ne[0], d.nrows());
    return visit_real(a->type, [&](auto tag) -> cudaError_t {
        constexpr elem_type S = decltype(tag)::value;
        k_out_prod<S><<<g.grid, g.block, 0, ctx.stream>>>(d, va, vb);
        return cudaGetLastError();
    });
}

} // namespace backplane::cuda::kernels
