#pragma once
// set_rows: b [E, N, A2, A3] (src[0]; f32, f16 or bf16), idx i32 or i64 [N, I2, I3]
// (src[1]), and the destination a (src[2], whose memory the node is; f32, f16, bf16, q8_0,
// q4_0, q4_1, q5_0, q5_1, iq4_nl, mxfp4 or q2_K ... q6_K; q8_K: cudaErrorNotSupported,
// narrowed by supports.hpp): row (n, j, k) of b is written over row idx[n, j % I2, k % I3] of matrix
// (j, k) of the node, converted as core converts (rows of the same type copied as bits,
// quantized blocks as core's quantize_row_*: store_block_lane for q8_0 / q4_0, one warp
// per block; quant::quantize for the others, one thread per block of 32 or 256 values). Any strides on all of
// them (a quantized row's nb0 is its block stride).
//
// An index outside [0, rows of a) writes nothing, and the row's first thread sets
// error_index in the stream's error word (launch_context::error_word), which the
// backend's synchronize() reports as errc::out_of_range, as the CPU reports it.

#include <backplane/backends/cuda/kernels/common.cuh>
#include <backplane/backends/cuda/kernels/copy.cuh> // elem_io, store_block_lane

#include <cstdint>

namespace backplane::cuda::kernels {

namespace set_rows_detail {

using namespace elem_io;

/// The destination row of b's row (n, j, k), or -1 when its index is outside [0, rows).
__device__ __forceinline__ i64 target_row(const tview& idx, bool wide, i64 rows, i64 n, i64 j, i64 k) {
    const char* p = idx.data + n * idx.nb[0] + (j % idx.ne[1]) * idx.nb[1] + (k % idx.ne[2]) * idx.nb[2];
    const i64 r = wide ? *reinterpret_cast<const std::int64_t*>(p) : *reinterpret_cast<const std::int32_t*>(p);
    return r >= 0 && r < rows ? r : -1;
}

/// A non-quantized destination D from S: rows of b split over the grid's rows.
template <elem_type S, elem_type D>
__global__ void k_set_rows(tview d, tview b, tview idx, bool wide, std::uint32_t* error_word) {
    const i64 n0 = b.ne[0];
    const i64 rows = b.nrows();
    for (i64 q = row_first(); q < rows; q += row_step()) {
        i64 n, j, k;
        unravel_row(q, b.ne, n, j, k);
        const i64 r = target_row(idx, wide, d.ne[1], n, j, k);
        if (r < 0) {
            if (error_word != nullptr && col_first() == 0) atomicOr(error_word, detail::error_index);
            continue;
        }
        const char* pb = b.row(n, j, k);
        char* pd = d.row(r, j, k);
        for (i64 i0 = col_first(); i0 < n0; i0 += col_step()) {
            if constexpr (S == D) { // as bits
                if constexpr (unit_bytes<D> == 4)
                    *reinterpret_cast<std::uint32_t*>(pd + i0 * d.nb[0]) =
                        *reinterpret_cast<const std::uint32_t*>(pb + i0 * b.nb[0]);
                else
                    *reinterpret_cast<std::uint16_t*>(pd + i0 * d.nb[0]) =
                        *reinterpret_cast<const std::uint16_t*>(pb + i0 * b.nb[0]);
            } else {
                st<D>(pd + i0 * d.nb[0], ld_row<S>(pb, b.nb[0], i0));
            }
        }
    }
}

/// A quantized destination D from S: one warp per block of 32 values of b.
template <elem_type S, elem_type D>
__global__ void k_set_rows_quantize(tview d, tview b, tview idx, bool wide, std::uint32_t* error_word) {
    const i64 nbx = b.ne[0] / 32;
    const i64 nblocks = nbx * b.nrows();
    const int lane = static_cast<int>(threadIdx.x % 32);
    // the loop is uniform over a warp: every lane takes part in the shuffles
    const i64 warp0 = (static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
    const i64 warps = static_cast<i64>(gridDim.x) * blockDim.x / 32;
    for (i64 blk = warp0; blk < nblocks; blk += warps) {
        const i64 ib = blk % nbx;
        i64 n, j, k;
        unravel_row(blk / nbx, b.ne, n, j, k);
        const i64 r = target_row(idx, wide, d.ne[1], n, j, k);
        if (r < 0) {
            if (error_word != nullptr && ib == 0 && lane == 0) atomicOr(error_word, detail::error_index);
            continue;
        }
        const float x = ld_row<S>(b.row(n, j, k), b.nb[0], ib * 32 + lane);
        copy_detail::store_block_lane<D>(x, d.row(r, j, k) + ib * d.nb[0], lane);
    }
}

/// A quantized destination D of quant::quantize from S: one thread per destination block
/// (32 or 256 values) of b.
template <elem_type S, elem_type D>
__global__ void k_set_rows_quantize_ext(tview d, tview b, tview idx, bool wide, std::uint32_t* error_word) {
    constexpr int bv = quant::block_values(D);
    const i64 nbx = b.ne[0] / bv;
    const i64 nblocks = nbx * b.nrows();
    const i64 stride = static_cast<i64>(gridDim.x) * blockDim.x;
    for (i64 blk = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; blk < nblocks; blk += stride) {
        const i64 ib = blk % nbx;
        i64 n, j, k;
        unravel_row(blk / nbx, b.ne, n, j, k);
        const i64 r = target_row(idx, wide, d.ne[1], n, j, k);
        if (r < 0) {
            if (error_word != nullptr && ib == 0) atomicOr(error_word, detail::error_index);
            continue;
        }
        const char* pb = b.row(n, j, k);
        float x[bv];
        for (int v = 0; v < bv; ++v) x[v] = ld_row<S>(pb, b.nb[0], ib * bv + v);
        quant::quantize<D>(x, reinterpret_cast<unsigned char*>(d.row(r, j, k) + ib * d.nb[0]));
    }
}

} // namespace set_rows_detail

/// set_rows (kernel_table::launch): see the file comment for the types.
inline cudaError_t launch_set_rows(const tensor& node, const detail::launch_context& ctx) noexcept {
    using namespace set_rows_detail;
    const tensor* b = node.src[0];
    const tensor* idx = node.src[1];
    if (b == nullptr || idx == nullptr || (idx->type != elem_type::i32 && idx->type != elem_type::i64))
        return cudaErrorInvalidValue;
    if (b->nelements() <= 0) return cudaSuccess;
    const tview d = view_of(node), vb = view_of(*b), vi = view_of(*idx);
    const bool wide = idx->type == elem_type::i64;
    return visit_float(b->type, [&](auto stag) -> cudaError_t {
        constexpr elem_type S = decltype(stag)::value;
        if (quant::quantizable(node.type)) {
            const unsigned blocks = blocks_for(b->nelements() / quant::block_values(node.type), 128); // a thread per block
            return copy_detail::visit_quantizable(node.type, [&](auto dtag) -> cudaError_t {
                k_set_rows_quantize_ext<S, decltype(dtag)::value><<<blocks, 128, 0, ctx.stream>>>(d, vb, vi, wide, ctx.error_word);
                return cudaGetLastError();
            });
        }
        if (is_quantized(node.type)) {
            if (node.type != elem_type::q8_0 && node.type != elem_type::q4_0) return cudaErrorNotSupported;
            const unsigned blocks = blocks_for(b->nelements() / 32, 256 / 32); // a warp per block of values
            if (node.type == elem_type::q8_0)
                k_set_rows_quantize<S, elem_type::q8_0><<<blocks, 256, 0, ctx.stream>>>(d, vb, vi, wide, ctx.error_word);
            else
                k_set_rows_quantize<S, elem_type::q4_0><<<blocks, 256, 0, ctx.stream>>>(d, vb, vi, wide, ctx.error_word);
            return cudaGetLastError();
        }
        const rows_grid g = rows_geometry(vb.ne[0], vb.nrows());
        return visit_float(node.type, [&](auto dtag) -> cudaError_t {
            constexpr elem_type D = decltype(dtag)::value;
            k_set_rows<S, D><<<g.grid, g.block, 0, ctx.stream>>>(d, vb, vi, wide, ctx.error_word);
            return cudaGetLastError();
        });
    });
}

} // namespace backplane::cuda::kernels
