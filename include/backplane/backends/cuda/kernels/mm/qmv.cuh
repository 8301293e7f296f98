#pragma once
// Quantized mat-vec (q8_0 / q4_0 weights, N <= 8 columns of b): memory-bound, so the
// whole design is about reading the weights once, with wide coalesced loads.
//
// Blocks are 34 or 18 bytes and only 2-byte aligned, so a lane cannot load "its block"
// with wide loads. Instead each warp streams a row as aligned 16-byte units (lane l takes
// unit l, l + 32, ...), fully coalesced, and b is prepared to match the weights byte for
// byte: b is quantized to int8 per 32 values (scale d_b) and each int8 is written at the
// byte position (within a 16-byte-aligned frame shifted like the weight rows) that its
// weight occupies; the two scale bytes of each weight block, and everything outside the
// row, read 0 in that image. A dp4a of a weight word with the image word then sums
// exactly the products of that word's values, whatever the word holds:
//   - the scale bytes sit at even offsets and are two bytes long, so a 4-byte word never
//     holds values of two different blocks: word j of the unit at row offset o belongs to
//     block floor((o + 4j) / BS), and a 16-byte unit touches at most two blocks (BS > 16);
//   - q4_0: the low nibbles of a word meet image "lo" (values j < 16 of the block), the
//     high nibbles image "hi" (values j + 16), interleaved per 16-byte unit; the nibbles
//     are unsigned, so sum (q - 8) * b = sum q * b - 8 * sum b, the second term added once
//     per block by the unit that holds the block's scale bytes.
// The unit's two partial integer sums are scaled by d_w * d_b of their blocks (the weight
// scales come from 2-byte loads that hit L1, the unit having just been read).
//
// This needs every weight row at the same address modulo 16 (the "phase": row strides
// multiples of 16); other layouts take the generic kernel. One warp per (row, batch
// matrix), all N columns at once, so each weight byte is read once.

#include <backplane/backends/cuda/kernels/common.cuh>
#include <backplane/backends/cuda/kernels/mm/problem.cuh>

namespace backplane::cuda::kernels::mm {

struct qmv_args {
    const char* a = nullptr;
    i64 a_nb1 = 0, a_nb2 = 0, a_nb3 = 0;
    int phase = 0;    ///< row addresses modulo 16
    int nblk = 0;     ///< blocks per row
    const uint4* img = nullptr;
    i64 img_stride = 0; ///< 16-byte units per column image
    const float2* meta = nullptr; ///< per column and block: d_b, 8 * d_b * sum of the int8 values
    mv_output out;
};

/// The 16-byte unit u of a row frame whose valid bytes are [lo, hi) (both even): 2-byte
/// loads of the valid part, zeros elsewhere (the first and last unit of a row).
__device__ __forceinline__ uint4 load_unit_partial(const uint4* base, int u, int lo, int hi) {
    const auto* h = reinterpret_cast<const std::uint16_t*>(base + u);
    unsigned w[4] = {0u, 0u, 0u, 0u};
#pragma unroll
    for (int j = 0; j < 8; ++j) {
        const int pos = 16 * u + 2 * j;
        if (pos >= lo && pos < hi) w[j >> 1] |= static_cast<unsigned>(__ldg(h + j)) << (16 * (j & 1));
    }
    return make_uint4(w[0], w[1], w[2], w[3]);
}

template <int BS, int NC>
__global__ void __launch_bounds__(128) qmv_kernel(const qmv_args p) {
    constexpr bool q4 = BS == 18;
    constexpr int U = NC == 1 ? 4 : 2; // units in flight per lane
    const int lane = static_cast<int>(threadIdx.x & 31u);
    const i64 row_id = static_cast<i64>(blockIdx.x) * 4 + (threadIdx.x >> 5);
    if (row_id >= p.out.m) return;
    const int end = p.phase + p.nblk * BS; // the row's bytes are [phase, end) of its frame
    const int nu = (end + 15) >> 4;
    for (i64 z = blockIdx.y; z < p.out.batches; z += gridDim.y) {
        const i64 i2 = z % p.out.n2;
        const i64 i3 = z / p.out.n2;
        const char* row = p.a + row_id * p.a_nb1 + (i2 / p.out.r2) * p.a_nb2 + (i3 / p.out.r3) * p.a_nb3;
        const auto* base = reinterpret_cast<const uint4*>(row - p.phase);
        const auto* wscale = reinterpret_cast<const std::uint16_t*>(row);
        const i64 col0 = z * p.out.ncols;
        float acc[NC];
#pragma unroll
        for (int j = 0; j < NC; ++j) acc[j] = 0.0f;

        for (int u0 = lane; u0 < nu; u0 += 32 * U) {
            uint4 wv[U];
#pragma unroll
            for (int x = 0; x < U; ++x) {
                const int u = u0 + 32 * x;
                wv[x] = make_uint4(0u, 0u, 0u, 0u);
                if (u < nu) wv[x] = 16 * u >= p.phase && 16 * u + 16 <= end ? __ldg(base + u) : load_unit_partial(base, u, p.phase, end);
            }
#pragma unroll
            for (int x = 0; x < U; ++x) {
                const int u = u0 + 32 * x;
                if (u >= nu) break;
                const int o = 16 * u - p.phase; // the unit's offset in the row (>= -14)
                const int blk0 = o <= 0 ? 0 : o / BS;
                const int bnd = (blk0 + 1) * BS - o; // bytes of the unit in blk0 (or before the row)
                const int t = bnd >= 16 ? 4 : (bnd + 3) >> 2; // words of the unit in blk0 (>= 1)
                const int blk1 = blk0 + 1 < p.nblk ? blk0 + 1 : blk0;
                bool c0 = false, c1 = false; // q4_0: the unit holds blk0's / blk1's scale bytes
                if constexpr (q4) {
                    const int ic = o <= 0 ? 0 : (o + BS - 1) / BS;
                    const bool has = ic * BS < o + 16 && ic < p.nblk;
                    c0 = has && ic == blk0;
                    c1 = has && ic == blk0 + 1;
                }
                const float wd0 = f16_bits_to_float(__ldg(wscale + blk0 * (BS / 2)));
                const float wd1 = f16_bits_to_float(__ldg(wscale + blk1 * (BS / 2)));
                const unsigned w[4] = {wv[x].x, wv[x].y, wv[x].z, wv[x].w};
#pragma unroll
                for (int j = 0; j < NC; ++j) {
                    if (j < p.out.ncols) {
                        const uint4* im = p.img + (col0 + j) * p.img_stride;
                        int d[4];
                        if constexpr (q4) {
                            const uint4 lo = __ldg(im + 2 * u);
                            const uint4 hi = __ldg(im + 2 * u + 1);
                            const unsigned l[4] = {lo.x, lo.y, lo.z, lo.w};
                            const unsigned h[4] = {hi.x, hi.y, hi.z, hi.w};
#pragma unroll
                            for (int i = 0; i < 4; ++i)
                                d[i] = dot4(static_cast<int>(w[i] & 0x0f0f0f0fu), static_cast<int>(l[i]),
                                            dot4(static_cast<int>((w[i] >> 4) & 0x0f0f0f0fu), static_cast<int>(h[i]), 0));
                        } else {
                            const uint4 v = __ldg(im + u);
                            const unsigned l[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
                            for (int i = 0; i < 4; ++i) d[i] = dot4(static_cast<int>(w[i]), static_cast<int>(l[i]), 0);
                        }
                        const int all = d[0] + d[1] + d[2] + d[3];
                        const int s0 = d[0] + (t > 1 ? d[1] : 0) + (t > 2 ? d[2] : 0) + (t > 3 ? d[3] : 0);
                        const int s1 = all - s0;
                        const float2* mt = p.meta + (col0 + j) * p.nblk;
                        const float2 m0 = __ldg(mt + blk0);
                        const float2 m1 = __ldg(mt + blk1);
                        const float f0 = m0.x * static_cast<float>(s0) - (c0 ? m0.y : 0.0f);
                        const float f1 = m1.x * static_cast<float>(s1) - (c1 ? m1.y : 0.0f);
                        acc[j] = fmaf(wd0, f0, fmaf(wd1, f1, acc[j]));
                    }
                }
            }
        }
        store_warp_sums<NC>(p.out, acc, row_id, i2, i3, lane);
    }
}

template <int BS>
inline cudaError_t launch_qmv_bs(const qmv_args& p, cudaStream_t stream) noexcept {
    return launch_mv(&qmv_kernel<BS, 1>, &qmv_kernel<BS, 8>, p, stream);
}

/// Queues qmv for weights of type t (q8_0 or q4_0), p.out.ncols <= 8.
inline cudaError_t launch_qmv(elem_type t, const qmv_args& p, cudaStream_t stream) noexcept {
    return t == elem_type::q4_0 ? launch_qmv_bs<18>(p, stream) : launch_qmv_bs<34>(p, stream);
}

} // namespace backplane::cuda::kernels::mm
