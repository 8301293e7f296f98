#pragma once
// Fast mul_mat for float weights (a f32 / f16 / bf16, b f32 / f16 / bf16).
//
// Contract (shared with quant.hpp, used by fast/mul_mat.hpp):
//  * gemm_applies(dst): true when gemm() handles this node (types and layouts). Must be a
//    pure function of the node, so every thread of the node takes the same path.
//  * gemm_work_size(dst, nth): bytes of the work buffer shared by the node's nth threads.
//  * gemm(p, dst): computes thread p.ith's share; may fill p.wdata cooperatively and call
//    p.barrier() (every thread of the node must then call it the same number of times).
//
// Two paths (gemm/plan.hpp decides, from the node and nth only):
//  * N <= 8 (decoding a batch of one to a few tokens): mat-vec. Rows of a are split
//    among the threads and streamed from memory once, four rows at a time with software
//    prefetch, each dotted with up to four of b's columns per pass (the rows come back
//    from L2 for columns 5..8). Memory bound for N <= 4.
//  * otherwise a packed, BLIS-style GEMM (gemm/driver.hpp): b packed into the shared work
//    buffer by all threads together, a packed by each thread for its own rows, f16 / bf16
//    converted to f32 while packing, an mr x nr register-tile micro-kernel. With several
//    matrices (dims 2 and 3) to go round, each thread takes whole matrices instead.
// Kernel sets per level: gemm/avx512.hpp (48 x 8 zmm tile), gemm/avx2.hpp (24 x 4 ymm),
// gemm/portable.hpp (16 x 4 plain C++); p.level picks one. Accumulation is f32: in the
// GEMM path each value is one chain of FMAs per K block (kc = 1024), the blocks added
// into dst; the mat-vec path keeps 16 (avx512) or 8 (avx2, portable) partial sums per
// value. Both stay orders of magnitude inside NMSE 1e-7 against a double reference.
//
// Handled layouts: unit-stride rows for a, b and dst, any stride for rows and matrices
// (views, permutations of dims 1..3), a broadcast over dims 2 and 3. Anything else (a
// transposed b, strided elements) is left to the reference kernel.

#include <backplane/backends/cpu/compute_params.hpp>
#include <backplane/backends/cpu/fast/gemm/avx2.hpp>
#include <backplane/backends/cpu/fast/gemm/avx512.hpp>
#include <backplane/backends/cpu/fast/gemm/driver.hpp>
#include <backplane/backends/cpu/fast/gemm/plan.hpp>
#include <backplane/backends/cpu/fast/gemm/portable.hpp>
#include <backplane/backends/cpu/isa.hpp>
#include <backplane/core/error.hpp>
#include <backplane/core/tensor.hpp>

#include <cstddef>

namespace backplane::cpu::fast {

/// True when gemm() computes this mul_mat node (see the header comment for the layouts).
inline bool gemm_applies(const tensor& dst) noexcept { return gemm_detail::applies(dst); }

/// Work buffer bytes for nth threads: packed blocks of b (shared) and a (per thread), or
/// for the mat-vec path b's columns as f32 per thread. The same for every level.
inline std::size_t gemm_work_size(const tensor& dst, int nth) noexcept {
    if (!gemm_detail::applies(dst)) return 0;
    return gemm_detail::make_plan(gemm_detail::make_problem(dst), nth).bytes;
}

/// Thread p.ith's share of dst = a^T b. Returns errc::invalid_argument (every thread
/// alike, before any barrier) when the node is not one gemm_applies() accepts or the
/// work buffer is smaller than gemm_work_size().
template <class = void>
inline errc gemm(const compute_params& p, tensor& dst) noexcept {
    namespace g = gemm_detail;
    if (!g::applies(dst) || p.nth < 1 || p.ith < 0 || p.ith >= p.nth) return errc::invalid_argument;
    const g::problem pr = g::make_problem(dst);
    if (pr.M <= 0 || pr.N <= 0 || pr.batches() <= 0) return errc::ok;
    if (pr.K <= 0) {
        g::zero_dst(pr, p);
        return errc::ok;
    }
    const g::plan pl = g::make_plan(pr, p.nth);
    if (pl.bytes > 0 && (p.wdata == nullptr || p.wsize < pl.bytes)) return errc::invalid_argument;
    float* base = pl.bytes > 0 ? g::aligned_floats(p.wdata) : nullptr;
#if BACKPLANE_HAS_X86_KERNELS
    if (p.level == isa::avx512) {
        g::run<g::avx512::kernels>(pr, pl, p, base);
        return errc::ok;
    }
    if (p.level == isa::avx2) {
        g::run<g::avx2::kernels>(pr, pl, p, base);
        return errc::ok;
    }
#endif
    g::run<g::portable::kernels>(pr, pl, p, base);
    return errc::ok;
}

} // namespace backplane::cpu::fast
