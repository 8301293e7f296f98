#pragma once
// add_id: a f32 [ne0, n_used, n_tokens], b f32 [ne0, n_expert], ids i32 [n_used,
// n_tokens] -> dst f32 [ne0, n_used, n_tokens], dst[:, i1, i2] = a[:, i1, i2] +
// b[:, ids[i1, i2]]. Any strides.
//
// An id outside [0, n_expert) reads nothing: its row of dst is written with zeros, as the
// CPU's kernel writes them, and the row's first thread sets error_index in the stream's
// error word (launch_context::error_word), which synchronize() reports as
// errc::out_of_range.

#include <backplane/backends/cuda/kernels/common.cuh>
#include <backplane/backends/cuda/kernels/copy.cuh> // elem_io: the rows grid

#include <cstdint>

namespace backplane::cuda::kernels {

namespace add_id_detail {

using namespace elem_io;

__global__ void k_add_id(tview d, tview a, tview b, tview ids, std::uint32_t* error_word) {
    const i64 n0 = d.ne[0];
    const i64 rows = d.nrows();
    for (i64 q = row_first(); q < rows; q += row_step()) {
        i64 i1, i2, i3;
        unravel_row(q, d.ne, i1, i2, i3);
        const i64 e = *reinterpret_cast<const std::int32_t*>(ids.data + i1 * ids.nb[0] + i2 * ids.nb[1]);
        const bool valid = e >= 0 && e < b.ne[1];
        const char* pa = a.row(i1, i2, i3);
        const char* pb = b.row(valid ? e : 0, 0, 0); // not read when invalid
        char* pd = d.row(i1, i2, i3);
        if (!valid && error_word != nullptr && col_first() == 0) atomicOr(error_word, detail::error_index);
        for (i64 i0 = col_first(); i0 < n0; i0 += col_step()) {
            const float x = *reinterpret_cast<const float*>(pa + i0 * a.nb[0]);
            const float y = valid ? *reinterpret_cast<const float*>(pb + i0 * b.nb[0]) : 0.0f;
            *reinterpret_cast<float*>(pd + i0 * d.nb[0]) = valid ? x + y : 0.0f;
        }
    }
}

} // namespace add_id_detail

/// add_id (kernel_table::launch): see the file comment for the types.
inline cudaError_t launch_add_id(const tensor& node, const detail::launch_context& ctx) noexcept {
    using namespace add_id_detail;
    using namespace elem_io;
    const tensor* a = node.src[0];
    const tensor* b = node.src[1];
    const tensor* ids = node.src[2];
    if (a == nullptr || b == nullptr || ids == nullptr || ids->type != elem_type::i32 || a->type != elem_type::f32 ||
        b->type != elem_type::f32 || node.type != elem_type::f32)
        return cudaErrorInvalidValue;
    if (node.nelements() <= 0) return cudaSuccess;
    const tview d = view_of(node), va = view_of(*a), vb = view_of(*b), vi = view_of(*ids);
    const rows_grid g = rows_geometry(d.ne[0], d.nrows());
    k_add_id<<<g.grid, g.block, 0, ctx.stream>>>(d, va, vb, vi, ctx.error_word);
    return cudaGetLastError();
}

} // namespace backplane::cuda::kernels
