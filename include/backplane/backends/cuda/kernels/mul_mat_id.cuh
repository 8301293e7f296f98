#pragma once
// mul_mat_id: as [K, M, n_expert] (f32, f16, bf16, any quantized type), b [K, B1, n_tokens]
// (f32, f16, bf16), ids i32 [n_used, n_tokens] -> dst f32 [M, n_used, n_tokens]; column
// (s, t) of dst is expert ids[s, t]'s matrix, transposed, times column (s % B1, t) of b.
// One block per column of dst, one warp per output value at a time: the lanes walk K
// (quantized weights dequantized as core's dequantize_row_*) and sum with a warp
// reduction. Any strides (a quantized row's nb0 is its block stride).
//
// An expert id outside [0, n_expert) is never read: its column is written as zeros and
// the block's first thread sets error_index in the stream's error word
// (launch_context::error_word), which synchronize() reports as errc::out_of_range.

#include <backplane/backends/cuda/kernels/common.cuh>
#include <backplane/backends/cuda/kernels/copy.cuh> // elem_io

#include <cstdint>

namespace backplane::cuda::kernels {

namespace mul_mat_id_detail {

using namespace elem_io;

template <elem_type TA, elem_type TB>
__global__ void k_mul_mat_id(tview d, tview as, tview b, tview ids, std::uint32_t* error_word) {
    const i64 cols = d.ne[1] * d.ne[2];
    const int lane = static_cast<int>(threadIdx.x % 32);
    const int warp = static_cast<int>(threadIdx.x / 32);
    const int warps = static_cast<int>(blockDim.x / 32);
    for (i64 c = blockIdx.x; c < cols; c += gridDim.x) {
        const i64 s = c % d.ne[1];
        const i64 t = c / d.ne[1];
        const i64 e = *reinterpret_cast<const std::int32_t*>(ids.data + s * ids.nb[0] + t * ids.nb[1]);
        char* pd = d.row(s, t, 0);
        if (e < 0 || e >= as.ne[2]) {
            if (error_word != nullptr && threadIdx.x == 0) atomicOr(error_word, detail::error_index);
            for (i64 m = threadIdx.x; m < d.ne[0]; m += blockDim.x) *reinterpret_cast<float*>(pd + m * d.nb[0]) = 0.0f;
            continue;
        }
        const char* pb = b.row(s % b.ne[1], t, 0);
        for (i64 m = warp; m < d.ne[0]; m += warps) {
            const char* pa = as.row(m, e, 0);
            float sum = 0.0f;
            for (i64 k = lane; k < as.ne[0]; k += 32) sum += ld_row<TA>(pa, as.nb[0], k) * ld_row<TB>(pb, b.nb[0], k);
            sum = warp_sum(sum);
            if (lane == 0) *reinterpret_cast<float*>(pd + m * d.nb[0]) = sum;
        }
    }
}

} // namespace mul_mat_id_detail

/// mul_mat_id (kernel_table::launch): see the file comment for the types.
inline cudaError_t launch_mul_mat_id(const tensor& node, const detail::launch_context& ctx) noexcept {
    using namespace mul_mat_id_detail;
    const tensor* as = node.src[0];
    const tensor* b = node.src[1];
    const tensor* ids = node.src[2];
    if (as == nullptr || b == nullptr || ids == nullptr || ids->type != elem_type::i32) return cudaErrorInvalidValue;
    if (node.nelements() <= 0) return cudaSuccess;
    const tview d = view_of(node), va = view_of(*as), vb = view_of(*b), vi = view_of(*ids);
    const unsigned blocks = blocks_for(d.ne[1] * d.ne[2], 1);
    return visit_real(as->type, [&](auto atag) -> cudaError_t {
        constexpr elem_type TA = decltype(atag)::value;
        return visit_float(b->type, [&](auto btag) -> cudaError_t {
            constexpr elem_type TB = decltype(btag)::value;
            k_mul_mat_id<TA, TB><<<blocks, 256, 0, ctx.stream>>>(d, va, vb, vi, ctx.error_word);
            return cudaGetLastError();
        });
    });
}

} // namespace backplane::cuda::kernels
