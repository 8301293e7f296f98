#pragma once
// Tensor-core GEMM for f16 and bf16 operands with f32 accumulation (sm_80 and later):
// C[m, n] = sum_k A[m][k] * B[n][k], both operands k-contiguous (gemm_problem).
//
// Block tile 128 (m) x 128 (n) x 32 (k), 8 warps as 2 (m) x 4 (n), each warp 64 x 32 as
// 4 x 4 mma.sync.m16n8k16 tiles (64 f32 accumulators per thread). A and B tiles go from
// global to shared memory with cp.async in a 4-stage pipeline (64 KiB of dynamic shared
// memory, two blocks per SM), and from shared memory to registers with ldmatrix. Rows of
// a tile are 64 bytes (four 16-byte chunks); chunk c of row r is stored at c ^ ((r / 2) % 4),
// which makes both the cp.async writes and the ldmatrix reads (8 rows of one chunk)
// conflict-free. Edges: cp.async's source size zero-fills chunks past K and rows past M
// or N, stores are bounds-checked, so any M, N, K works; operand rows must be 16-byte
// aligned (the planner stages them otherwise).
//
// mma.sync reaches roughly 70-80% of cuBLAS on an A100; an H100's cuBLAS uses wgmma
// (sm_90a), which this sm_90 build cannot, so expect about half of cuBLAS there.

#include <backplane/backends/cuda/kernels/common.cuh>
#include <backplane/backends/cuda/kernels/mm/problem.cuh>

#include <type_traits>

namespace backplane::cuda::kernels::mm {

namespace tc {
inline constexpr int bm = 128, bn = 128, bk = 32, stages = 4, threads = 256;
inline constexpr int a_stage_bytes = bm * bk * 2;
inline constexpr int b_stage_bytes = bn * bk * 2;
inline constexpr int smem_bytes = stages * (a_stage_bytes + b_stage_bytes); // 64 KiB
} // namespace tc

__device__ __forceinline__ unsigned smem_addr(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

/// 16 bytes global -> shared; only the first src_bytes are read, the rest is zero-filled.
__device__ __forceinline__ void cp_async_16(unsigned dst, const void* src, int src_bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
#else
    (void)dst, (void)src, (void)src_bytes;
#endif
}

__device__ __forceinline__ void cp_async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;\n" ::);
#endif
}

template <int N>
__device__ __forceinline__ void cp_async_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#endif
}

/// Four 8x8 b16 matrices; lane l gives the address of row l % 8 of matrix l / 8.
__device__ __forceinline__ void ldmatrix_x4(unsigned addr, unsigned (&r)[4]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
#else
    (void)addr;
    r[0] = r[1] = r[2] = r[3] = 0u;
#endif
}

/// d += a * b on a 16x8x16 tile (a row-major 16x16, b column-major 16x8), f32 accumulators.
template <class T>
__device__ __forceinline__ void mma_16816(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    if constexpr (std::is_same_v<T, __half>) {
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    } else {
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    }
#else
    (void)d, (void)a, (void)b0, (void)b1;
#endif
}

/// T: __half or __nv_bfloat16. Grid: (tiles_m * tiles_n, 1, batch matrices from z0);
/// 256 threads; tc::smem_bytes of dynamic shared memory.
template <class T>
__global__ void __launch_bounds__(tc::threads, 2) gemm_tc_kernel(const gemm_problem p, const int tiles_m, const int tiles_n, const i64 z0) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    constexpr int BK = tc::bk, S = tc::stages;
    extern __shared__ __align__(128) unsigned char tc_smem[];
    const unsigned sa = smem_addr(tc_smem);
    const unsigned sb = sa + S * tc::a_stage_bytes;

    const int tid = static_cast<int>(threadIdx.x);
    const int lane = tid & 31, warp = tid >> 5;
    const int wm = warp & 1, wn = warp >> 1; // warp tile: rows wm * 64, columns wn * 32

    int tm, tn;
    tile_coords(static_cast<int>(blockIdx.x), tiles_m, tiles_n, tm, tn);
    const int m0 = tm * tc::bm, n0 = tn * tc::bn;

    // ldmatrix addresses (bytes in a stage) for the two k16 steps of a stage: lane l
    // addresses row l % 8 of matrix q = l / 8. A (16x16 per mma): matrices are (rows 0-7,
    // k 0-7), (rows 8-15, k 0-7), (rows 0-7, k 8-15), (rows 8-15, k 8-15) = a0..a3.
    // B (two n8 tiles): (n 0-7, k 0-7), (n 0-7, k 8-15), (n 8-15, k 0-7), (n 8-15, k 8-15)
    // = b0, b1 of the first tile, b0, b1 of the second. The swizzle term (row / 2) % 4
    // is the same for every row a lane addresses (they differ by multiples of 8).
    const int q = lane >> 3, r = lane & 7, sw = (r >> 1) & 3;
    unsigned a_off[2], b_off[2];
#pragma unroll
    for (int kk = 0; kk < 2; ++kk) {
        a_off[kk] = static_cast<unsigned>(((wm * 64 + (q & 1) * 8 + r) * BK + (((kk * 2 + (q >> 1)) ^ sw) * 8)) * 2);
        b_off[kk] = static_cast<unsigned>(((wn * 32 + (q >> 1) * 8 + r) * BK + (((kk * 2 + (q & 1)) ^ sw) * 8)) * 2);
    }
    const int kt_count = (p.k + BK - 1) / BK;

    {
        const i64 z = z0 + blockIdx.z; // batch matrix (a loop over z costs registers: spills)
        i64 oa, ob, oc;
        batch_offsets(p, z, oa, ob, oc);
        const T* A = static_cast<const T*>(p.a) + oa;
        const T* B = static_cast<const T*>(p.b) + ob;
        float* C = p.c + oc;

        // stage s <- k tile kt: 512 chunks of 16 bytes per operand, two per thread
        auto load_stage = [&](int s, int kt) {
            const int k0 = kt * BK;
#pragma unroll
            for (int i = 0; i < 2; ++i) {
                const int c = tid + i * tc::threads;
                const int row = c >> 2, kc = c & 3;
                const unsigned soff = static_cast<unsigned>((row * BK + ((kc ^ ((row >> 1) & 3)) * 8)) * 2);
                const int gk = k0 + kc * 8;
                const int kbytes = gk < p.k ? min(8, p.k - gk) * 2 : 0;
                const int gm = m0 + row, gn = n0 + row;
                const bool am = gm < p.m && kbytes > 0, bn = gn < p.n && kbytes > 0;
                cp_async_16(sa + s * tc::a_stage_bytes + soff, am ? A + gm * p.lda + gk : A, am ? kbytes : 0);
                cp_async_16(sb + s * tc::b_stage_bytes + soff, bn ? B + gn * p.ldb + gk : B, bn ? kbytes : 0);
            }
        };

        float acc[4][4][4];
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
            for (int j = 0; j < 4; ++j)
#pragma unroll
                for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;

#pragma unroll
        for (int s = 0; s < S - 1; ++s) {
            if (s < kt_count) load_stage(s, s);
            cp_async_commit(); // empty groups keep the count uniform
        }
        for (int kt = 0; kt < kt_count; ++kt) {
            cp_async_wait<S - 2>(); // this thread's copies of tile kt have landed
            __syncthreads();        // everyone's have; and stage (kt - 1) % S is no longer read
            const int pf = kt + S - 1;
            if (pf < kt_count) load_stage(pf % S, pf);
            cp_async_commit();

            const unsigned as = sa + (kt % S) * tc::a_stage_bytes;
            const unsigned bs = sb + (kt % S) * tc::b_stage_bytes;
#pragma unroll
            for (int kk = 0; kk < 2; ++kk) {
                unsigned bfr[4][2];
#pragma unroll
                for (int pj = 0; pj < 2; ++pj) {
                    unsigned x[4];
                    ldmatrix_x4(bs + b_off[kk] + pj * 16 * BK * 2, x);
                    bfr[2 * pj][0] = x[0];
                    bfr[2 * pj][1] = x[1];
                    bfr[2 * pj + 1][0] = x[2];
                    bfr[2 * pj + 1][1] = x[3];
                }
#pragma unroll
                for (int mi = 0; mi < 4; ++mi) { // A fragments one 16-row tile at a time: fewer live registers
                    unsigned af[4];
                    ldmatrix_x4(as + a_off[kk] + mi * 16 * BK * 2, af);
#pragma unroll
                    for (int ni = 0; ni < 4; ++ni) mma_16816<T>(acc[mi][ni], af, bfr[ni][0], bfr[ni][1]);
                }
            }
        }

        // accumulator e of tile (mi, ni): row g + 8 * (e / 2), column 2 * t + e % 2
        const int g = lane >> 2, t = lane & 3;
#pragma unroll
        for (int mi = 0; mi < 4; ++mi) {
#pragma unroll
            for (int e2 = 0; e2 < 2; ++e2) {
                const int m = m0 + wm * 64 + mi * 16 + g + e2 * 8;
                if (m >= p.m) continue;
                float* crow = C + static_cast<i64>(m) * p.cs0;
#pragma unroll
                for (int ni = 0; ni < 4; ++ni) {
                    const int n = n0 + wn * 32 + ni * 8 + 2 * t;
                    if (n < p.n) crow[static_cast<i64>(n) * p.cs1] = acc[mi][ni][2 * e2];
                    if (n + 1 < p.n) crow[static_cast<i64>(n + 1) * p.cs1] = acc[mi][ni][2 * e2 + 1];
                }
            }
        }
    }
#else
    (void)p, (void)tiles_m, (void)tiles_n, (void)z0;
#endif
}

/// Queues the product on tensor cores (cc >= 80); T: __half or __nv_bfloat16.
template <class T>
inline cudaError_t launch_gemm_tc(const gemm_problem& p, cudaStream_t stream) noexcept {
    const int tiles_m = (p.m + tc::bm - 1) / tc::bm;
    const int tiles_n = (p.n + tc::bn - 1) / tc::bn;
    const cudaError_t e = cudaFuncSetAttribute(gemm_tc_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, tc::smem_bytes);
    if (e != cudaSuccess) return e;
    for (i64 z0 = 0; z0 < p.batches; z0 += 65535) { // gridDim.z <= 65535
        const dim3 grid(static_cast<unsigned>(tiles_m * tiles_n), 1, batch_grid(p.batches - z0));
        gemm_tc_kernel<T><<<grid, tc::threads, tc::smem_bytes, stream>>>(p, tiles_m, tiles_n, z0);
    }
    return cudaGetLastError();
}

} // namespace backplane::cuda::kernels::mm
