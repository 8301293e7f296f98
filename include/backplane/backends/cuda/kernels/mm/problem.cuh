#pragma once
// mul_mat internals shared by its kernels: the batched product as the GEMM kernels and the
// cuBLAS calls see it once the operands are prepared, and the launch geometry they share.

#include <backplane/backends/cuda/kernels/common.cuh>

#include <cstdint>

namespace backplane::cuda::kernels::mm {

/// C[m, n] = sum_k A[m][k] * B[n][k] for every matrix (i2, i3) of a batch of n2 x n3:
/// rows of A and B hold their k values contiguously (leading dimensions lda and ldb, in
/// elements of the operand type), A's matrix for batch (i2, i3) is (i2 / r2, i3 / r3)
/// (mul_mat's broadcast of a), and C (f32) has arbitrary element strides.
struct gemm_problem {
    const void* a = nullptr;
    i64 lda = 0, sa2 = 0, sa3 = 0;
    const void* b = nullptr;
    i64 ldb = 0, sb2 = 0, sb3 = 0;
    float* c = nullptr;
    i64 cs0 = 1, cs1 = 0, cs2 = 0, cs3 = 0;
    int m = 0, n = 0, k = 0;
    i64 n2 = 1;      ///< batch extent over dim 2 (i2 is the faster batch index)
    i64 r2 = 1, r3 = 1;
    i64 batches = 1; ///< n2 * n3
};

/// Element offsets of batch matrix z (i2 fastest) in A, B and C.
__device__ __forceinline__ void batch_offsets(const gemm_problem& p, i64 z, i64& oa, i64& ob, i64& oc) {
    const i64 i2 = z % p.n2;
    const i64 i3 = z / p.n2;
    oa = (i2 / p.r2) * p.sa2 + (i3 / p.r3) * p.sa3;
    ob = i2 * p.sb2 + i3 * p.sb3;
    oc = i2 * p.cs2 + i3 * p.cs3;
}

/// Output tile (tm, tn) of linear block t: blocks walk groups of 8 tile rows column by
/// column, so blocks running together share A tiles and B tiles in L2.
__device__ __forceinline__ void tile_coords(int t, int tiles_m, int tiles_n, int& tm, int& tn) {
    constexpr int group = 8;
    const int per_group = group * tiles_n;
    const int first_m = (t / per_group) * group;
    const int gsize = min(tiles_m - first_m, group);
    const int in = t % per_group;
    tm = first_m + in % gsize;
    tn = in / gsize;
}

/// Blocks along y or z for n batch matrices (at most 65535: the mat-vec kernels loop over
/// the rest, the GEMM launchers launch again from an offset).
inline unsigned batch_grid(i64 n) noexcept {
    return static_cast<unsigned>(n < 1 ? 1 : (n > 65535 ? 65535 : n));
}

/// What the mat-vec kernels (gemv, qmv) write: M rows by ncols columns of c (f32, element
/// strides) for each of `batches` matrices (n2 x n3, i2 fastest), a broadcast by r2, r3.
struct mv_output {
    float* c = nullptr;
    i64 cs0 = 1, cs1 = 0, cs2 = 0, cs3 = 0;
    i64 m = 0, ncols = 1, n2 = 1, batches = 1, r2 = 1, r3 = 1;
};

/// Each warp's sums of acc[j] (its NC columns) written by lane 0 to row `row` of batch
/// matrix (i2, i3).
template <int NC>
__device__ __forceinline__ void store_warp_sums(const mv_output& o, const float (&acc)[NC], i64 row, i64 i2, i64 i3,
                                                int lane) {
#pragma unroll
    for (int j = 0; j < NC; ++j) {
        if (j < o.ncols) {
            const float s = warp_sum(acc[j]);
            if (lane == 0) o.c[row * o.cs0 + j * o.cs1 + i2 * o.cs2 + i3 * o.cs3] = s;
        }
    }
}

/// Launches a mat-vec kernel, its one-column variant for a single column: 4 rows (warps)
/// per block of 128 threads, batch matrices along y.
template <class Args>
inline cudaError_t launch_mv(void (*one)(Args), void (*eight)(Args), const Args& p, cudaStream_t stream) noexcept {
    const dim3 grid(static_cast<unsigned>((p.out.m + 3) / 4), batch_grid(p.out.batches));
    (p.out.ncols == 1 ? one : eight)<<<grid, 128, 0, stream>>>(p);
    return cudaGetLastError();
}

/// 4-way int8 dot product with accumulate (dp4a from sm_61 on).
__device__ __forceinline__ int dot4(int a, int b, int c) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 610
    return __dp4a(a, b, c);
#else
    for (int i = 0; i < 4; ++i)
        c += static_cast<int>(static_cast<signed char>(a >> (8 * i))) * static_cast<int>(static_cast<signed char>(b >> (8 * i)));
    return c;
#endif
}

} // namespace backplane::cuda::kernels::mm
