#pragma once
// flash_attn_ext (core/ops/attention.hpp): softmax(scale * K q + slope * mask) V for each
// query row, with GQA, ALiBi, logit_softcap and sinks, as the CPU reference
// (backends/cpu/kernels/attention.hpp) computes it: in f32 throughout, q not rounded to
// k's type, k and v of any real type (f32, f16, bf16, q8_0, q4_0, each on its own)
// widened to f32 as they are read.
//
// One block per query row (query, head, dim-3 slice), over a grid-stride loop on the
// rows. The block walks the positions in chunks of its size: each thread scores one
// position of the chunk (a masked one is skipped: its weight is 0), the block takes the
// chunk's maximum, rescales its running sum and accumulator when the maximum grows (the
// online softmax of the CPU, a chunk at a time), and each thread then adds the chunk's
// weighted values into its own output elements. The q row and the accumulator live in
// shared memory (D_k + D_v floats, at most flash_attn_max_head_floats: supports.hpp
// refuses more).
// Results differ from the CPU only in the order of additions (dot products, sums).

#include <backplane/backends/cuda/kernels/common.cuh>
#include <backplane/backends/cuda/supports.hpp>
#include <backplane/core/alibi.hpp>

namespace backplane::cuda::kernels {

namespace flash_attn_detail {

inline constexpr int block = 128;
static_assert(flash_attn_max_head_floats + block == 8192, "the q row, the accumulator and the weights fill 32 KiB");

/// The operands and parameters of one node.
struct attention {
    tview q, k, v, mask, sinks, d;
    float scale;    ///< divided by logit_softcap when it is set, as the CPU does
    float softcap;  ///< 0: none
    float max_bias; ///< ALiBi; 0: none
};

/// scale * dot(q, k_j), softcapped, plus the masked term mv.
__device__ __forceinline__ float score(const attention& a, const float* sq, const char* krow, float mv) {
    float dot = 0.0f;
    for (i64 i = 0; i < a.q.ne[0]; ++i) dot = __fadd_rn(dot, __fmul_rn(sq[i], load_row(krow, a.k.type, i)));
    float s = __fmul_rn(dot, a.scale);
    if (a.softcap != 0.0f) s = __fmul_rn(a.softcap, tanhf(s));
    return __fadd_rn(s, mv);
}

/// Rescales the accumulator (the thread's elements) by ms.
__device__ __forceinline__ void rescale(float* acc, i64 dv, float ms) {
    for (i64 i = threadIdx.x; i < dv; i += blockDim.x) acc[i] *= ms;
}

__global__ void __launch_bounds__(block) flash_attn_kernel(attention a) {
    extern __shared__ float sh[]; // q row (D_k), accumulator (D_v), weights (block)
    __shared__ float red[32];
    const i64 dk = a.q.ne[0], dv = a.v.ne[0], n_kv = a.k.ne[1];
    const i64 n_q = a.q.ne[1], n_head = a.q.ne[2];
    const i64 group = n_head / a.k.ne[2]; // query heads per key/value head
    float* sq = sh;
    float* acc = sh + dk;
    float* w = acc + dv;
    const int tid = static_cast<int>(threadIdx.x);
    for (i64 item = blockIdx.x; item < a.q.nrows(); item += gridDim.x) {
        const i64 iq = item % n_q, h = (item / n_q) % n_head, i3 = item / (n_q * n_head);
        const char* qrow = a.q.row(iq, h, i3);
        __syncthreads(); // the previous row's reads of sq, acc and w are done
        for (i64 i = tid; i < dk; i += blockDim.x) sq[i] = reinterpret_cast<const float*>(qrow)[i];
        for (i64 i = tid; i < dv; i += blockDim.x) acc[i] = 0.0f;
        const char* mrow = a.mask.data ? a.mask.row(iq, h % a.mask.ne[2], i3 % a.mask.ne[3]) : nullptr;
        const float slope = alibi::slope(a.max_bias, static_cast<int>(n_head), static_cast<int>(h));
        float m = -INFINITY, s = 0.0f;
        __syncthreads();
        for (i64 c0 = 0; c0 < n_kv; c0 += blockDim.x) {
            const i64 j = c0 + tid;
            float sj = -INFINITY;
            if (j < n_kv) {
                const float mv = mrow ? __fmul_rn(slope, load_row(mrow, elem_type::f16, j)) : 0.0f;
                if (mv != -INFINITY) sj = score(a, sq, a.k.row(j, h / group, i3), mv);
            }
            const float cm = block_max(sj, red);
            if (cm == -INFINITY) continue; // every position of the chunk masked
            const float mn = fmaxf(m, cm);
            const float ms = expf(m - mn); // 0 while m is -inf
            const float wj = sj == -INFINITY ? 0.0f : expf(sj - mn);
            w[tid] = wj;
            s = s * ms + block_sum(wj, red); // (block_sum's barriers publish w)
            m = mn;
            const i64 n = n_kv - c0 < blockDim.x ? n_kv - c0 : blockDim.x;
            for (i64 i = tid; i < dv; i += blockDim.x) {
                float x = acc[i] * ms;
                for (i64 jj = 0; jj < n; ++jj)
                    if (w[jj] != 0.0f) x = __fadd_rn(x, __fmul_rn(w[jj], load_row(a.v.row(c0 + jj, h / group, i3), a.v.type, i)));
                acc[i] = x;
            }
            __syncthreads(); // w is rewritten by the next chunk
        }
        if (a.sinks.data) { // the sink's mass, without a value
            const float sink = *reinterpret_cast<const float*>(a.sinks.data + h * a.sinks.nb[0]);
            if (sink > m) {
                const float ms = expf(m - sink);
                rescale(acc, dv, ms);
                s = s * ms + 1.0f;
            } else {
                s += expf(sink - m);
            }
        }
        const float inv = s == 0.0f ? 0.0f : 1.0f / s;
        char* out = a.d.row(h, iq, i3);
        for (i64 i = tid; i < dv; i += blockDim.x) reinterpret_cast<float*>(out)[i] = acc[i] * inv;
    }
}

} // namespace flash_attn_detail

/// flash_attn_ext: q f32 (src[0]), k and v (src[1], src[2]) f32 / f16 / bf16 / q8_0 /
/// q4_0 with contiguous rows, optional f16 mask (src[3]) and f32 sinks (src[4]); scale,
/// max_bias, logit_softcap in params 0, 1, 2; dst f32 [D_v, n_head, n_q, ne3].
inline cudaError_t launch_flash_attn(const tensor& node, const detail::launch_context& ctx) noexcept {
    using namespace flash_attn_detail;
    if (node.nelements() == 0) return cudaSuccess;
    const tensor& q = *node.src[0];
    const std::int64_t floats = q.ne[0] + node.src[2]->ne[0];
    if (floats > flash_attn_max_head_floats) return cudaErrorNotSupported;
    attention a;
    a.q = view_of(q);
    a.k = view_of(*node.src[1]);
    a.v = view_of(*node.src[2]);
    if (node.src[3] != nullptr) a.mask = view_of(*node.src[3]);
    if (node.src[4] != nullptr) a.sinks = view_of(*node.src[4]);
    a.d = view_of(node);
    a.softcap = node.param<float>(2);
    a.scale = a.softcap != 0.0f ? node.param<float>(0) / a.softcap : node.param<float>(0);
    a.max_bias = node.param<float>(1);
    const auto shared = static_cast<std::size_t>(floats + block) * sizeof(float);
    flash_attn_kernel<<<blocks_for(q.nrows(), 1), block, shared, ctx.stream>>>(a);
    return cudaGetLastError();
}

} // namespace backplane::cuda::kernels
