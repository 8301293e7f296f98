#pragma once
// FP32 SIMT GEMM: C[m, n] = sum_k A[m][k] * B[n][k] in single-precision FMA (no TF32, no
// conversion), for f32 weights without cuBLAS, and for every type on GPUs without
// cp.async / mma.sync (cc < 80, operands staged as f32).
//
// Block tile 128 x 128 x 8, 256 threads, each computing 8 x 8 outputs (two 4-wide strips in
// m and two in n, so shared-memory reads are float4 and conflict-free). Both operands are
// k-contiguous in global memory: a thread loads 4 consecutive k of one row (one float4 when
// the rows are 16-byte aligned) and stores them transposed into k-major shared tiles
// (padded by 4 floats: the transposed stores are conflict-free). Shared tiles and the
// register prefetch of the next k tile are double-buffered: one barrier per k tile.

#include <backplane/backends/cuda/kernels/common.cuh>
#include <backplane/backends/cuda/kernels/mm/problem.cuh>

namespace backplane::cuda::kernels::mm {

namespace simt {
inline constexpr int bm = 128, bn = 128, bk = 8, threads = 256, pad = 4;
} // namespace simt

/// Values k0 + 0..3 of a row (zeros past k or for a row out of range).
__device__ __forceinline__ float4 fetch4(const float* rowp, bool ok, int vec, int k0, int k) {
    float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (!ok) return v;
    if (vec && k0 + 3 < k) return __ldg(reinterpret_cast<const float4*>(rowp + k0));
    if (k0 < k) v.x = __ldg(rowp + k0);
    if (k0 + 1 < k) v.y = __ldg(rowp + k0 + 1);
    if (k0 + 2 < k) v.z = __ldg(rowp + k0 + 2);
    if (k0 + 3 < k) v.w = __ldg(rowp + k0 + 3);
    return v;
}

/// vec_a / vec_b: the operand's rows are 16-byte aligned (float4 loads).
template <class = void>
__global__ void __launch_bounds__(simt::threads) gemm_f32_kernel(const gemm_problem p, const int tiles_m, const int tiles_n,
                                                                 const int vec_a, const int vec_b, const i64 z0) {
    constexpr int BM = simt::bm, BN = simt::bn, BK = simt::bk, P = simt::pad;
    __shared__ __align__(16) float As[2][BK][BM + P];
    __shared__ __align__(16) float Bs[2][BK][BN + P];

    const int tid = static_cast<int>(threadIdx.x);
    const int tx = tid & 15, ty = tid >> 4; // outputs: m in tx * 4 + {0..3, 64..67}, n likewise with ty
    const int lr = tid >> 1, lk = (tid & 1) * 4; // loads: row lr of the tile, k lk..lk+3

    int tm, tn;
    tile_coords(static_cast<int>(blockIdx.x), tiles_m, tiles_n, tm, tn);
    const int m0 = tm * BM, n0 = tn * BN;
    const int kt_count = (p.k + BK - 1) / BK;

    {
        const i64 z = z0 + blockIdx.z; // batch matrix
        i64 oa, ob, oc;
        batch_offsets(p, z, oa, ob, oc);
        const float* A = static_cast<const float*>(p.a) + oa;
        const float* B = static_cast<const float*>(p.b) + ob;
        float* C = p.c + oc;
        const bool am = m0 + lr < p.m, bn = n0 + lr < p.n;
        const float* arow = A + (am ? static_cast<i64>(m0 + lr) * p.lda : 0);
        const float* brow = B + (bn ? static_cast<i64>(n0 + lr) * p.ldb : 0);

        float4 ra = fetch4(arow, am, vec_a, lk, p.k);
        float4 rb = fetch4(brow, bn, vec_b, lk, p.k);
        auto put = [&](int buf) {
            As[buf][lk + 0][lr] = ra.x;
            As[buf][lk + 1][lr] = ra.y;
            As[buf][lk + 2][lr] = ra.z;
            As[buf][lk + 3][lr] = ra.w;
            Bs[buf][lk + 0][lr] = rb.x;
            Bs[buf][lk + 1][lr] = rb.y;
            Bs[buf][lk + 2][lr] = rb.z;
            Bs[buf][lk + 3][lr] = rb.w;
        };
        put(0);
        __syncthreads();

        float acc[8][8];
#pragma unroll
        for (int i = 0; i < 8; ++i)
#pragma unroll
            for (int j = 0; j < 8; ++j) acc[i][j] = 0.0f;

        for (int kt = 0; kt < kt_count; ++kt) {
            const int buf = kt & 1;
            const bool more = kt + 1 < kt_count;
            if (more) {
                ra = fetch4(arow, am, vec_a, (kt + 1) * BK + lk, p.k);
                rb = fetch4(brow, bn, vec_b, (kt + 1) * BK + lk, p.k);
            }
#pragma unroll
            for (int k = 0; k < BK; ++k) {
                const float4 a0 = *reinterpret_cast<const float4*>(&As[buf][k][tx * 4]);
                const float4 a1 = *reinterpret_cast<const float4*>(&As[buf][k][64 + tx * 4]);
                const float4 b0 = *reinterpret_cast<const float4*>(&Bs[buf][k][ty * 4]);
                const float4 b1 = *reinterpret_cast<const float4*>(&Bs[buf][k][64 + ty * 4]);
                const float av[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
                const float bv[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
                for (int i = 0; i < 8; ++i)
#pragma unroll
                    for (int j = 0; j < 8; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
            }
            if (more) put(buf ^ 1); // buf ^ 1 was last read before the previous barrier
            __syncthreads();
        }

#pragma unroll
        for (int i = 0; i < 8; ++i) {
            const int m = m0 + (i < 4 ? tx * 4 + i : 64 + tx * 4 + i - 4);
            if (m >= p.m) continue;
            float* crow = C + static_cast<i64>(m) * p.cs0;
#pragma unroll
            for (int j = 0; j < 8; ++j) {
                const int n = n0 + (j < 4 ? ty * 4 + j : 64 + ty * 4 + j - 4);
                if (n < p.n) crow[static_cast<i64>(n) * p.cs1] = acc[i][j];
            }
        }
    }
}

/// Queues the FP32 product (f32 operands).
inline cudaError_t launch_gemm_f32(const gemm_problem& p, cudaStream_t stream) noexcept {
    const int tiles_m = (p.m + simt::bm - 1) / simt::bm;
    const int tiles_n = (p.n + simt::bn - 1) / simt::bn;
    const auto al16 = [](const void* ptr, i64 ld, i64 s2, i64 s3) {
        return (reinterpret_cast<std::uintptr_t>(ptr) & 15u) == 0 && ld % 4 == 0 && s2 % 4 == 0 && s3 % 4 == 0 ? 1 : 0;
    };
    const int vec_a = al16(p.a, p.lda, p.sa2, p.sa3), vec_b = al16(p.b, p.ldb, p.sb2, p.sb3);
    for (i64 z0 = 0; z0 < p.batches; z0 += 65535) { // gridDim.z <= 65535
        const dim3 grid(static_cast<unsigned>(tiles_m * tiles_n), 1, batch_grid(p.batches - z0));
        gemm_f32_kernel<void><<<grid, simt::threads, 0, stream>>>(p, tiles_m, tiles_n, vec_a, vec_b, z0);
    }
    return cudaGetLastError();
}

} // namespace backplane::cuda::kernels::mm
