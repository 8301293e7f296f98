#pragma once
// get_rows: a [E, R, A2, A3], idx i32 [N, A2, A3] -> dst [E, N, A2, A3]; dst row
// (n, j, k) is row idx[n, j, k] of matrix (j, k) of a. a is f32, f16, bf16 or any
// quantized type with an f32 dst (values widened exactly, quantized ones dequantized as
// core's dequantize_row_*: elem_io::ld_block, quants.hpp), or i32 with an i32 dst (copied
// as is). Any strides on all three (a quantized row's nb0 is its block stride).
//
// An index outside [0, R) reads nothing: its row of dst is written with zeros, as the
// CPU's kernel writes them, and the row's first thread sets error_index in the stream's
// error word (launch_context::error_word), which the backend's synchronize() reports as
// errc::out_of_range, as the CPU reports it.

#include <backplane/backends/cuda/kernels/common.cuh>
#include <backplane/backends/cuda/kernels/copy.cuh> // elem_io

#include <cstdint>

namespace backplane::cuda::kernels {

namespace get_rows_detail {

using namespace elem_io;

template <elem_type S>
__global__ void k_get_rows(tview d, tview a, tview idx, std::uint32_t* error_word) {
    const i64 n0 = d.ne[0];
    const i64 rows = d.nrows();
    const i64 nrows_a = a.ne[1];
    for (i64 q = row_first(); q < rows; q += row_step()) {
        i64 n, j, k;
        unravel_row(q, d.ne, n, j, k);
        const i64 r = *reinterpret_cast<const std::int32_t*>(idx.data + n * idx.nb[0] + j * idx.nb[1] + k * idx.nb[2]);
        const bool valid = r >= 0 && r < nrows_a;
        const char* pa = a.row(valid ? r : 0, j, k); // not read when invalid
        char* pd = d.row(n, j, k);
        if (!valid && error_word != nullptr && col_first() == 0) atomicOr(error_word, detail::error_index);
        for (i64 i0 = col_first(); i0 < n0; i0 += col_step()) {
            if constexpr (S == elem_type::i32)
                *reinterpret_cast<std::int32_t*>(pd + i0 * d.nb[0]) =
                    valid ? *reinterpret_cast<const std::int32_t*>(pa + i0 * a.nb[0]) : 0;
            else
                *reinterpret_cast<float*>(pd + i0 * d.nb[0]) = valid ? ld_row<S>(pa, a.nb[0], i0) : 0.0f;
        }
    }
}

} // namespace get_rows_detail

/// get_rows (kernel_table::launch): see the file comment for the types.
inline cudaError_t launch_get_rows(const tensor& node, const detail::launch_context& ctx) noexcept {
    using namespace get_rows_detail;
    const tensor* a = node.src[0];
    const tensor* idx = node.src[1];
    if (a == nullptr || idx == nullptr || idx->type != elem_type::i32) return cudaErrorInvalidValue;
    const bool ints = a->type == elem_type::i32;
    if (node.type != (ints ? elem_type::i32 : elem_type::f32)) return cudaErrorInvalidValue;
    if (node.nelements() <= 0) return cudaSuccess;
    const tview d = view_of(node), va = view_of(*a), vi = view_of(*idx);
    const rows_grid g = rows_geometry(d.ne[0], d.nrows());
    if (ints) {
        k_get_rows<elem_type::i32><<<g.grid, g.block, 0, ctx.stream>>>(d, va, vi, ctx.error_word);
        return cudaGetLastError();
    }
    return visit_real(a->type, [&](auto tag) -> cudaError_t {
        constexpr elem_type S = decltype(tag)::value;
        k_get_rows<S><<<g.grid, g.block, 0, ctx.stream>>>(d, va, vi, ctx.error_word);
        return cudaGetLastError();
    });
}

} // namespace backplane::cuda::kernels
