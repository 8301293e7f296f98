#pragma once
// mul_mat through cuBLAS (built only with BACKPLANE_CUDA_CUBLAS nonzero).
//
// Column-major, one matrix is C (M x N, ldc) = A^T B with A stored K x M (lda = a's row
// stride) and B K x N (ldb): cublasGemmEx(OP_T, OP_N, M, N, K). f32 operands compute in
// CUBLAS_COMPUTE_32F_PEDANTIC (plain FP32: no TF32, no reduced-precision tricks); f16 /
// bf16 operands in CUBLAS_COMPUTE_32F with an f32 C. Batches: a loop over i3 of strided
// batches over i2; with a broadcast over dim 2 (r2 > 1), the r2 b matrices that share an
// a matrix become one product of r2 * N columns when b's and C's columns run on across
// them (prepared b and contiguous C always do), else a batch with a stride of 0 for A.

#include <backplane/backends/cuda/kernels/common.cuh>
#include <backplane/backends/cuda/kernels/mm/problem.cuh>

#if defined(BACKPLANE_CUDA_CUBLAS)
#if BACKPLANE_CUDA_CUBLAS + 0
#define BACKPLANE_CUDA_MM_CUBLAS 1
#endif
#endif
#ifndef BACKPLANE_CUDA_MM_CUBLAS
#define BACKPLANE_CUDA_MM_CUBLAS 0
#endif

#if BACKPLANE_CUDA_MM_CUBLAS
#include <cublas_v2.h>
#endif

#include <climits>

namespace backplane::cuda::kernels::mm {

#if BACKPLANE_CUDA_MM_CUBLAS

/// A cuBLAS status as the CUDA error the kernel table reports.
inline cudaError_t blas_error(cublasStatus_t s) noexcept {
    switch (s) {
    case CUBLAS_STATUS_SUCCESS: return cudaSuccess;
    case CUBLAS_STATUS_ALLOC_FAILED: return cudaErrorMemoryAllocation;
    case CUBLAS_STATUS_NOT_INITIALIZED: return cudaErrorInitializationError;
    case CUBLAS_STATUS_INVALID_VALUE: return cudaErrorInvalidValue;
    case CUBLAS_STATUS_ARCH_MISMATCH:
    case CUBLAS_STATUS_NOT_SUPPORTED: return cudaErrorNotSupported;
    case CUBLAS_STATUS_EXECUTION_FAILED: return cudaErrorLaunchFailure;
    default: return cudaErrorUnknown;
    }
}

/// Queues the product p (operands of type ct: f32, f16 or bf16; p.cs0 == 1, p.cs1 >= p.m)
/// on the handle's stream.
inline cudaError_t blas_gemm(void* handle, const gemm_problem& p, elem_type ct) noexcept {
    const auto h = static_cast<cublasHandle_t>(handle);
    const cudaDataType_t dt = ct == elem_type::f32 ? CUDA_R_32F : (ct == elem_type::f16 ? CUDA_R_16F : CUDA_R_16BF);
    const cublasComputeType_t comp = ct == elem_type::f32 ? CUBLAS_COMPUTE_32F_PEDANTIC : CUBLAS_COMPUTE_32F;
    const i64 es = static_cast<i64>(type_size(ct));
    const float one = 1.0f, zero = 0.0f;
    const int lda = static_cast<int>(p.lda), ldb = static_cast<int>(p.ldb), ldc = static_cast<int>(p.cs1);
    const auto* a = static_cast<const char*>(p.a);
    const auto* b = static_cast<const char*>(p.b);

    // count products of n columns: A at pa (stride sa elements), B at pb, C at pc
    const auto gemm = [&](const char* pa, i64 sa, const char* pb, i64 sb, float* pc, i64 sc, i64 n, i64 count) {
        if (count == 1)
            return cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, p.m, static_cast<int>(n), p.k, &one, pa, dt, lda, pb, dt, ldb,
                                &zero, pc, CUDA_R_32F, ldc, comp, CUBLAS_GEMM_DEFAULT);
        return cublasGemmStridedBatchedEx(h, CUBLAS_OP_T, CUBLAS_OP_N, p.m, static_cast<int>(n), p.k, &one, pa, dt, lda, sa, pb,
                                          dt, ldb, sb, &zero, pc, CUDA_R_32F, ldc, sc, static_cast<int>(count), comp,
                                          CUBLAS_GEMM_DEFAULT);
    };

    const i64 n3 = p.batches / p.n2;
    const bool merge = p.r2 > 1 && p.sb2 == p.n * p.ldb && p.cs2 == p.n * p.cs1 && p.n * p.r2 <= INT_MAX;
    for (i64 i3 = 0; i3 < n3; ++i3) {
        const char* a3 = a + (i3 / p.r3) * p.sa3 * es;
        const char* b3 = b + i3 * p.sb3 * es;
        float* c3 = p.c + i3 * p.cs3;
        cublasStatus_t s = CUBLAS_STATUS_SUCCESS;
        if (p.r2 == 1) {
            s = gemm(a3, p.sa2, b3, p.sb2, c3, p.cs2, p.n, p.n2);
        } else if (merge) {
            s = gemm(a3, p.sa2, b3, p.r2 * p.sb2, c3, p.r2 * p.cs2, p.n * p.r2, p.n2 / p.r2);
        } else {
            for (i64 i02 = 0; s == CUBLAS_STATUS_SUCCESS && i02 < p.n2 / p.r2; ++i02)
                s = gemm(a3 + i02 * p.sa2 * es, 0, b3 + i02 * p.r2 * p.sb2 * es, p.sb2, c3 + i02 * p.r2 * p.cs2, p.cs2, p.n, p.r2);
        }
        if (s != CUBLAS_STATUS_SUCCESS) return blas_error(s);
    }
    return cudaSuccess;
}

#else

inline cudaError_t blas_gemm(void*, const gemm_problem&, elem_type) noexcept {
    return cudaErrorNotSupported;
}

#endif

} // namespace backplane::cuda::kernels::mm
