#pragma once
// mul_mat on CUDA: c[m, n, i2, i3] = sum_k a[k, m, i2 / r2, i3 / r3] * b[k, n, i2, i3],
// a [K, M, A2, A3] (f32 f16 bf16 or any quantized type), b [K, N, B2, B3] (f32 f16 bf16), c f32,
// r2 = B2 / A2, r3 = B3 / A3; any strides (b transposed or permuted, a's rows strided).
//
// Paths (mm/plan.cuh chooses; the scratch is sized by the same plan):
//   N <= 8, a f32 / f16 / bf16  -> gemv (mm/gemv.cuh): one warp per row, b as f32 (staged
//                                  when it is not packed f32), f32 arithmetic.
//   N <= 8, a q8_0 / q4_0       -> qmv (mm/qmv.cuh): weights streamed in coalesced 16-byte
//                                  units, b quantized to an int8 image matching them, dp4a.
//                                  Rows at different addresses modulo 16 -> generic.
//   N <= 8, a another quantized    -> qgemv (mm/gemv.cuh): one warp per row, each lane
//                                  dequantizing 32 values at a time (quants.hpp), b as
//                                  f32, f32 arithmetic.
//   N > 8, with cuBLAS          -> cublasGemmEx / strided batched (mm/cublas.cuh):
//                                  f32 x f32 in pedantic FP32, f16 / bf16 with b converted
//                                  to a's type, quantized weights dequantized to f16 first.
//   N > 8, own kernels, cc >= 80 -> f16 / bf16 / dequantized q: tensor-core GEMM
//                                  (mm/gemm_tc.cuh); f32: FP32 SIMT GEMM (mm/gemm_f32.cuh).
//   N > 8, own kernels, cc < 80  -> everything staged as f32, SIMT GEMM.
//   anything else (K = 0, sizes past int, scratch missing) -> generic (mm/gemv.cuh).
// Operands a GEMM cannot read in place (other type, strided or unaligned rows) are staged
// in scratch as packed rows (mm/prepare.cuh): b whole, a whole up to 64 MiB, else one
// matrix at a time in row chunks of at most 64 MiB, each chunk multiplied right away.
// All work is queued on ctx.stream; nothing allocates or synchronizes.

#include <backplane/backends/cuda/kernels/common.cuh>
#include <backplane/backends/cuda/kernels/mm/cublas.cuh>
#include <backplane/backends/cuda/kernels/mm/gemm_f32.cuh>
#include <backplane/backends/cuda/kernels/mm/gemm_tc.cuh>
#include <backplane/backends/cuda/kernels/mm/gemv.cuh>
#include <backplane/backends/cuda/kernels/mm/plan.cuh>
#include <backplane/backends/cuda/kernels/mm/prepare.cuh>
#include <backplane/backends/cuda/kernels/mm/qmv.cuh>

#include <cstddef>
#include <cstdint>

namespace backplane::cuda::kernels {

/// Built with cuBLAS (BACKPLANE_CUDA_CUBLAS defined and nonzero).
inline constexpr bool with_cublas = BACKPLANE_CUDA_MM_CUBLAS != 0;

namespace mm {

inline cudaError_t run_product(const gemm_problem& g, const plan& p, const detail::launch_context& ctx) noexcept {
    switch (p.eng) {
    case engine::tc:
        return p.ct == elem_type::bf16 ? launch_gemm_tc<__nv_bfloat16>(g, ctx.stream) : launch_gemm_tc<__half>(g, ctx.stream);
    case engine::simt: return launch_gemm_f32(g, ctx.stream);
    case engine::blas: return blas_gemm(ctx.cublas, g, p.ct);
    }
    return cudaErrorNotSupported;
}

inline cudaError_t run_gemm(const tensor& node, const plan& p, const detail::launch_context& ctx) noexcept {
    const tensor& a = *node.src[0];
    const tensor& b = *node.src[1];
    char* scratch = static_cast<char*>(ctx.scratch);
    const auto es = static_cast<i64>(type_size(p.ct));
    const auto stride = [es](const tensor& t, std::size_t d, i64 fallback) {
        return t.ne[d] > 1 ? static_cast<i64>(t.nb[d]) / es : fallback;
    };

    gemm_problem g;
    g.m = static_cast<int>(p.m);
    g.n = static_cast<int>(p.n);
    g.k = static_cast<int>(p.k);
    g.c = static_cast<float*>(node.data);
    g.cs0 = static_cast<i64>(node.nb[0] / 4);
    g.cs1 = static_cast<i64>(node.nb[1] / 4);
    g.cs2 = static_cast<i64>(node.nb[2] / 4);
    g.cs3 = static_cast<i64>(node.nb[3] / 4);
    g.n2 = p.b2;
    g.batches = p.b2 * p.b3;
    g.r2 = p.r2;
    g.r3 = p.r3;

    if (p.b_stage) {
        void* bs = scratch + p.b_off;
        if (const cudaError_t e = launch_stage(view_of(b), p.ct, bs, p.b_ld, ctx.stream); e != cudaSuccess) return e;
        g.b = bs;
        g.ldb = p.b_ld;
        g.sb2 = p.n * p.b_ld;
        g.sb3 = p.b2 * g.sb2;
    } else {
        g.b = b.data;
        g.ldb = stride(b, 1, p.k);
        g.sb2 = stride(b, 2, 0);
        g.sb3 = stride(b, 3, 0);
    }

    if (!p.a_stage) {
        g.a = a.data;
        g.lda = stride(a, 1, p.k);
        g.sa2 = stride(a, 2, 0);
        g.sa3 = stride(a, 3, 0);
        return run_product(g, p, ctx);
    }
    void* as = scratch + p.a_off;
    if (p.a_whole) {
        if (const cudaError_t e = launch_stage(view_of(a), p.ct, as, p.a_ld, ctx.stream); e != cudaSuccess) return e;
        g.a = as;
        g.lda = p.a_ld;
        g.sa2 = p.m * p.a_ld;
        g.sa3 = p.a2 * g.sa2;
        return run_product(g, p, ctx);
    }
    // weights too big to stage at once: matrix by matrix, a_rows rows at a time, each chunk
    // multiplied with the r2 x r3 b matrices that read it before the next one overwrites it
    // (stream order)
    const auto* bbase = static_cast<const char*>(g.b);
    for (i64 i03 = 0; i03 < p.a3; ++i03) {
        for (i64 i02 = 0; i02 < p.a2; ++i02) {
            for (i64 m0 = 0; m0 < p.m; m0 += p.a_rows) {
                const i64 mc = p.m - m0 < p.a_rows ? p.m - m0 : p.a_rows;
                tview src = view_of(a);
                src.data += m0 * src.nb[1] + i02 * src.nb[2] + i03 * src.nb[3];
                src.ne[1] = mc;
                src.ne[2] = src.ne[3] = 1;
                if (const cudaError_t e = launch_stage(src, p.ct, as, p.a_ld, ctx.stream); e != cudaSuccess) return e;
                gemm_problem q = g;
                q.a = as;
                q.lda = p.a_ld;
                q.sa2 = q.sa3 = 0;
                q.r2 = q.r3 = 1;
                q.m = static_cast<int>(mc);
                q.b = bbase + (i02 * p.r2 * g.sb2 + i03 * p.r3 * g.sb3) * es;
                q.c = g.c + m0 * g.cs0 + i02 * p.r2 * g.cs2 + i03 * p.r3 * g.cs3;
                q.n2 = p.r2;
                q.batches = p.r2 * p.r3;
                if (const cudaError_t e = run_product(q, p, ctx); e != cudaSuccess) return e;
            }
        }
    }
    return cudaSuccess;
}

/// The mat-vec kernels' output: node itself, p's batches.
inline mv_output mv_output_of(const tensor& node, const plan& p) noexcept {
    mv_output o;
    o.c = static_cast<float*>(node.data);
    o.cs0 = static_cast<i64>(node.nb[0] / 4);
    o.cs1 = static_cast<i64>(node.nb[1] / 4);
    o.cs2 = static_cast<i64>(node.nb[2] / 4);
    o.cs3 = static_cast<i64>(node.nb[3] / 4);
    o.m = p.m;
    o.ncols = p.n;
    o.n2 = p.b2;
    o.batches = p.b2 * p.b3;
    o.r2 = p.r2;
    o.r3 = p.r3;
    return o;
}

inline cudaError_t run_gemv(const tensor& node, const plan& p, const detail::launch_context& ctx) noexcept {
    const tensor& a = *node.src[0];
    const tensor& b = *node.src[1];
    gemv_args g;
    g.a = static_cast<const char*>(a.data);
    g.a_nb0 = static_cast<i64>(a.nb[0]);
    g.a_nb1 = static_cast<i64>(a.nb[1]);
    g.a_nb2 = static_cast<i64>(a.nb[2]);
    g.a_nb3 = static_cast<i64>(a.nb[3]);
    if (p.b_stage) {
        auto* bs = reinterpret_cast<float*>(static_cast<char*>(ctx.scratch) + p.b_off);
        if (const cudaError_t e = launch_convert(view_of(b), bs, p.b_ld, ctx.stream); e != cudaSuccess) return e;
        g.b = bs;
        g.ldb = p.b_ld;
        g.sb2 = p.n * p.b_ld;
        g.sb3 = p.b2 * g.sb2;
        g.b_vec = 1;
    } else {
        g.b = static_cast<const float*>(b.data);
        g.ldb = static_cast<i64>(b.nb[1] / 4);
        g.sb2 = static_cast<i64>(b.nb[2] / 4);
        g.sb3 = static_cast<i64>(b.nb[3] / 4);
        g.b_vec = aligned_rows(b, 16) ? 1 : 0;
    }
    g.k = p.k;
    g.out = mv_output_of(node, p);
    return launch_gemv(a.type, g, ctx.stream);
}

inline cudaError_t run_qmv(const tensor& node, const plan& p, const detail::launch_context& ctx) noexcept {
    const tensor& a = *node.src[0];
    const tensor& b = *node.src[1];
    char* scratch = static_cast<char*>(ctx.scratch);
    const int phase = static_cast<int>(reinterpret_cast<std::uintptr_t>(a.data) & 15u);
    const i64 nblk = p.k / 32;
    const i64 cols = p.n * p.b2 * p.b3;
    auto* img = reinterpret_cast<unsigned char*>(scratch + p.img_off);
    auto* meta = reinterpret_cast<float2*>(scratch + p.meta_off);
    if (const cudaError_t e = cudaMemsetAsync(img, 0, p.img_bytes, ctx.stream); e != cudaSuccess) return e;
    qmv_prepare_kernel<void><<<blocks_for(cols * nblk, 8), 256, 0, ctx.stream>>>(
        view_of(b), a.type == elem_type::q4_0 ? 1 : 0, phase, nblk, img, p.q_units * 16, meta, cols);
    if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;

    qmv_args q;
    q.a = static_cast<const char*>(a.data);
    q.a_nb1 = static_cast<i64>(a.nb[1]);
    q.a_nb2 = static_cast<i64>(a.nb[2]);
    q.a_nb3 = static_cast<i64>(a.nb[3]);
    q.phase = phase;
    q.nblk = static_cast<int>(nblk);
    q.img = reinterpret_cast<const uint4*>(img);
    q.img_stride = p.q_units;
    q.meta = meta;
    q.out = mv_output_of(node, p);
    return launch_qmv(a.type, q, ctx.stream);
}

} // namespace mm

/// Scratch bytes the mul_mat `node` needs under ctx.
inline std::size_t mul_mat_scratch(const tensor& node, const detail::launch_context& ctx) noexcept {
    return mm::make_plan(node, ctx).total;
}

/// Queues the mul_mat `node` on ctx.stream.
inline cudaError_t launch_mul_mat(const tensor& node, const detail::launch_context& ctx) noexcept {
    if (node.nelements() == 0) return cudaSuccess;
    mm::plan p = mm::make_plan(node, ctx);
    if (p.total > 0 && (ctx.scratch == nullptr || p.total > ctx.scratch_size)) p.kind = mm::path::generic;
    switch (p.kind) {
    case mm::path::generic: return mm::launch_generic(node, ctx.stream);
    case mm::path::gemv: return mm::run_gemv(node, p, ctx);
    case mm::path::qmv: return mm::run_qmv(node, p, ctx);
    case mm::path::gemm: return mm::run_gemm(node, p, ctx);
    }
    return cudaErrorNotSupported;
}

/// A cuBLAS handle on `stream` with `workspace` as its workspace (so its calls can be
/// captured into CUDA graphs); cudaErrorNotSupported in a build without cuBLAS.
inline cudaError_t cublas_create(void** handle, cudaStream_t stream, void* workspace, std::size_t workspace_size) noexcept {
#if BACKPLANE_CUDA_MM_CUBLAS
    if (handle == nullptr) return cudaErrorInvalidValue;
    *handle = nullptr;
    cublasHandle_t h = nullptr;
    cublasStatus_t s = cublasCreate(&h);
    if (s != CUBLAS_STATUS_SUCCESS) return mm::blas_error(s);
    s = cublasSetStream(h, stream);
    if (s == CUBLAS_STATUS_SUCCESS) s = cublasSetWorkspace(h, workspace, workspace_size);
    // default math: no TF32 (f32 products also ask for the pedantic compute type)
    if (s == CUBLAS_STATUS_SUCCESS) s = cublasSetMathMode(h, CUBLAS_DEFAULT_MATH);
    if (s != CUBLAS_STATUS_SUCCESS) {
        cublasDestroy(h);
        return mm::blas_error(s);
    }
    *handle = h;
    return cudaSuccess;
#else
    (void)stream, (void)workspace, (void)workspace_size;
    if (handle != nullptr) *handle = nullptr;
    return cudaErrorNotSupported;
#endif
}

/// Destroys a handle made by cublas_create (null: nothing).
inline void cublas_destroy(void* handle) noexcept {
#if BACKPLANE_CUDA_MM_CUBLAS
    if (handle != nullptr) cublasDestroy(static_cast<cublasHandle_t>(handle));
#else
    (void)handle;
#endif
}

} // namespace backplane::cuda::kernels
