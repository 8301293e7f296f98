#pragma once
// glu: gated linear units, y = act(x) * g per row, with the CPU reference kernel's
// formulas (core/glu_functions.hpp, the same functors). Fused form: x and g are the
// halves of each row of a, g first when swapped; split form: x from a, g from b. f32,
// f16 or bf16 (dst has a's type), computed in f32 and rounded once. Any row strides
// (rows have unit stride, the op's rule); in place (the split form over a) too, each
// element being read before the same one is written.

#include <backplane/backends/cuda/kernels/common.cuh>
#include <backplane/backends/cuda/kernels/copy.cuh> // elem_io
#include <backplane/core/glu_functions.hpp>

#include <cstdint>

namespace backplane::cuda::kernels {

namespace glu_detail {

using namespace elem_io;

/// x at element x0 of a's rows, g at element g0 of b's rows (b is a in the fused form).
template <elem_type T, class Fn>
__global__ void k_glu(tview d, tview a, tview b, i64 x0, i64 g0, Fn fn) {
    const i64 nc = d.ne[0];
    const i64 rows = d.nrows();
    for (i64 r = row_first(); r < rows; r += row_step()) {
        i64 i1, i2, i3;
        unravel_row(r, d.ne, i1, i2, i3);
        char* pd = d.row(i1, i2, i3);
        const char* px = a.row(i1, i2, i3) + x0 * a.nb[0];
        const char* pg = b.row(i1, i2, i3) + g0 * b.nb[0];
        for (i64 i = col_first(); i < nc; i += col_step())
            st<T>(pd + i * d.nb[0], fn(ld<T>(px + i * a.nb[0]), ld<T>(pg + i * b.nb[0])));
    }
}

} // namespace glu_detail

/// glu (kernel_table::launch): every function of glu_op, fused and split forms.
inline cudaError_t launch_glu(const tensor& node, const detail::launch_context& ctx) noexcept {
    using namespace glu_detail;
    const tensor* a = node.src[0];
    const tensor* b = node.src[1];
    if (a == nullptr || node.type != a->type) return cudaErrorInvalidValue;
    if (node.nelements() <= 0) return cudaSuccess;
    const glu_fn::halves h = glu_fn::halves_of(node);
    const tview d = view_of(node), va = view_of(*a), vb = view_of(b != nullptr ? *b : *a);
    const rows_grid g = rows_geometry(node.ne[0], node.nrows());
    cudaError_t err = cudaErrorNotSupported;
    glu_fn::with_glu_function(node, [&](auto fn) {
        err = visit_float(node.type, [&](auto tag) -> cudaError_t {
            constexpr elem_type T = decltype(tag)::value;
            k_glu<T><<<g.grid, g.block, 0, ctx.stream>>>(d, va, vb, h.x0, h.g0, fn);
            return cudaGetLastError();
        });
    });
    return err;
}

} // namespace backplane::cuda::kernels
