#pragma once
// argsort and top_k (a row is dimension 0): one block per row (a grid-stride loop over
// the rows) puts the row's (value, index) pairs in the order of core/sort_order.hpp, a
// total order, by a bitonic sort over the row padded to a power of two, then writes the
// first ne0 indices of the destination's row: all for argsort, k for top_k. The result
// is the CPU's exactly.
//
// Rows of up to shared_max values are sorted in shared memory (8 bytes a value); longer
// ones in scratch memory (global), one row buffer per block, with the same code.

#include <backplane/backends/cuda/kernels/common.cuh>
#include <backplane/backends/cuda/kernels/rows.cuh>
#include <backplane/core/sort_order.hpp>

#include <cstdint>

namespace backplane::cuda::kernels {

namespace sort_detail {

inline constexpr int block = 1024;
inline constexpr i64 shared_max = 4096;                       ///< 32 KiB of shared memory
inline constexpr std::size_t scratch_budget = std::size_t{1} << 28; ///< for rows past shared_max

/// The row length rounded up to a power of two.
inline i64 padded(i64 n) noexcept {
    i64 np = 1;
    while (np < n) np <<= 1;
    return np;
}

/// Blocks for rows sorted in scratch: a few per multiprocessor, within the budget.
inline i64 scratch_blocks(i64 nrows, i64 np, int sm_count) noexcept {
    const i64 per = np * 8;
    i64 b = nrows < 2 * static_cast<i64>(sm_count) ? nrows : 2 * static_cast<i64>(sm_count);
    const i64 fit = static_cast<i64>(scratch_budget) / per;
    if (b > fit) b = fit;
    return b < 1 ? 1 : b;
}

/// True when entry (xv, xi) comes before (yv, yi); indices n and above are padding, last.
__device__ __forceinline__ bool before(float xv, std::uint32_t xi, float yv, std::uint32_t yi, i64 n, bool desc) {
    const bool x_pad = xi >= n, y_pad = yi >= n;
    if (x_pad || y_pad) return !x_pad || (y_pad && xi < yi);
    return sorting::sorts_before(xv, xi, yv, yi, desc);
}

using rows_detail::ld;

/// Sorts each row of a (T) into d's rows (i32, first d.ne0 indices). InShared: the row
/// buffer (np values, then np indices) is dynamic shared memory, else block b's slice of
/// scratch.
template <elem_type T, bool InShared>
__global__ void __launch_bounds__(block) sort_kernel(tview a, tview d, bool desc, i64 np, char* scratch) {
    extern __shared__ float shared_row[];
    float* val = InShared ? shared_row : reinterpret_cast<float*>(scratch + static_cast<i64>(blockIdx.x) * np * 8);
    auto* idx = reinterpret_cast<std::uint32_t*>(val + np);
    const i64 n = a.ne[0];
    const i64 nrows = a.nrows();
    for (i64 r = blockIdx.x; r < nrows; r += gridDim.x) {
        const char* pa = a.row(r);
        for (i64 i = threadIdx.x; i < np; i += block) {
            val[i] = i < n ? ld<T>(pa + i * a.nb[0]) : 0.0f;
            idx[i] = static_cast<std::uint32_t>(i);
        }
        __syncthreads();
        // blocks of k in alternating directions, merged at distance j; pair q is (i, i + j),
        // i the q-th index whose bit j is clear
        for (i64 k = 2; k <= np; k <<= 1) {
            for (i64 j = k >> 1; j > 0; j >>= 1) {
                for (i64 q = threadIdx.x; q < np / 2; q += block) {
                    const i64 i = ((q & ~(j - 1)) << 1) | (q & (j - 1));
                    const i64 l = i + j;
                    const bool up = (i & k) == 0;
                    const float vi = val[i], vl = val[l];
                    const std::uint32_t xi = idx[i], xl = idx[l];
                    if (before(vl, xl, vi, xi, n, desc) == up) {
                        val[i] = vl;
                        val[l] = vi;
                        idx[i] = xl;
                        idx[l] = xi;
                    }
                }
                __syncthreads();
            }
        }
        char* pd = d.row(r);
        for (i64 i = threadIdx.x; i < d.ne[0]; i += block)
            *reinterpret_cast<std::int32_t*>(pd + i * d.nb[0]) = static_cast<std::int32_t>(idx[i]);
        __syncthreads(); // the buffer is the next row's
    }
}

template <elem_type T>
inline cudaError_t launch_as(const tview& a, const tview& d, bool desc, const detail::launch_context& ctx) {
    const i64 np = padded(a.ne[0]);
    if (np <= shared_max) {
        const unsigned blocks = blocks_for(a.nrows(), 1);
        sort_kernel<T, true><<<blocks, block, static_cast<std::size_t>(np) * 8, ctx.stream>>>(a, d, desc, np, nullptr);
        return cudaGetLastError();
    }
    const i64 blocks = scratch_blocks(a.nrows(), np, ctx.sm_count);
    if (ctx.scratch == nullptr || ctx.scratch_size < static_cast<std::size_t>(blocks * np * 8))
        return cudaErrorMemoryAllocation;
    sort_kernel<T, false><<<static_cast<unsigned>(blocks), block, 0, ctx.stream>>>(a, d, desc, np,
                                                                                   static_cast<char*>(ctx.scratch));
    return cudaGetLastError();
}

} // namespace sort_detail

/// Scratch bytes of argsort and top_k: row buffers for rows longer than shared memory holds.
inline std::size_t sort_scratch(const tensor& node, const detail::launch_context& ctx) noexcept {
    const tensor* a = node.src[0];
    if (a == nullptr) return 0;
    const i64 np = sort_detail::padded(a->ne[0]);
    if (np <= sort_detail::shared_max) return 0;
    return static_cast<std::size_t>(sort_detail::scratch_blocks(a->nrows(), np, ctx.sm_count) * np * 8);
}

/// argsort (order in param 0) and top_k of f32, f16 or bf16 rows into i32, any strides.
inline cudaError_t launch_sort(const tensor& node, const detail::launch_context& ctx) noexcept {
    const tensor* src = node.src[0];
    if (src == nullptr) return cudaErrorInvalidValue;
    if (node.nelements() == 0) return cudaSuccess;
    const tview a = view_of(*src);
    const tview d = view_of(node);
    const bool desc =
        node.op == op_kind::top_k || node.param<std::int32_t>(0) == static_cast<std::int32_t>(sort_order::desc);
    switch (a.type) {
    case elem_type::f32: return sort_detail::launch_as<elem_type::f32>(a, d, desc, ctx);
    case elem_type::f16: return sort_detail::launch_as<elem_type::f16>(a, d, desc, ctx);
    case elem_type::bf16: return sort_detail::launch_as<elem_type::bf16>(a, d, desc, ctx);
    default: return cudaErrorNotSupported;
    }
}

} // namespace backplane::cuda::kernels
