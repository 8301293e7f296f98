#pragma once
// Fast mul_mat for quantized weights (a q8_0 / q4_0, b f32 / f16 / bf16: quantized to
// q8_0 on the fly), as ggml does it: integer dot products of weight blocks with
// activation blocks, scaled by the two blocks' f16 scales.
//
// Contract (shared with gemm.hpp, used by fast/mul_mat.hpp):
//  * quant_applies(dst): true when quant_mul_mat() handles this node (types and layouts).
//    A pure function of the node, so every thread of the node takes the same path.
//  * quant_work_size(dst, nth): bytes of the work buffer shared by the node's nth threads.
//  * quant_mul_mat(p, dst): computes thread p.ith's share; fills p.wdata cooperatively and
//    calls p.barrier() once (every thread of the node must call it).
//
// The two steps (quant/plan.hpp describes the work buffer and the job grid):
//  1. each thread quantizes its share of b's rows into p.wdata (quant/quantize.hpp);
//  2. after the barrier, each thread computes its share of the (matrix, column chunk,
//     32-row panel) jobs with the kernels of p.level: AVX-512 VNNI (quant/avx512.hpp),
//     AVX2 (quant/avx2.hpp) or plain C++ (quant/portable.hpp).
//
// The result differs from the exact product only by b's quantization (and the order of
// f32 additions), like ggml's: the integer sums of every block pair are exact.

#include <backplane/backends/cpu/compute_params.hpp>
#include <backplane/backends/cpu/fast/quant/avx2.hpp>
#include <backplane/backends/cpu/fast/quant/avx512.hpp>
#include <backplane/backends/cpu/fast/quant/avx512_gemv.hpp>
#include <backplane/backends/cpu/fast/quant/plan.hpp>
#include <backplane/backends/cpu/fast/quant/portable.hpp>
#include <backplane/backends/cpu/fast/quant/quantize.hpp>
#include <backplane/core/error.hpp>
#include <backplane/core/tensor.hpp>

#include <cstddef>

namespace backplane::cpu::fast {

/// True for mul_mat with a q8_0 / q4_0 weight (rows contiguous), b f32 / f16 / bf16 in any
/// layout, and dst f32 with unit stride along its rows.
inline bool quant_applies(const tensor& dst) noexcept { return quant::make_plan(dst, nullptr); }

/// Quantized b plus, where the AVX-512 kernels are compiled, one panel scratch per thread.
inline std::size_t quant_work_size(const tensor& dst, int nth) noexcept {
    quant::plan pl;
    return quant::make_plan(dst, &pl) ? quant::work_bytes(pl, nth) : 0;
}

/// Step 2 alone: thread p.ith's share of the jobs of plan pl, b quantized in qb (as
/// quantize_b leaves it), its AVX-512 panel scratch at panels + p.ith * pl.panel_bytes.
/// Also the fast mul_mat_id's, which quantizes b its own way (fast/mul_mat_id.hpp).
template <class = void>
inline void quant_jobs(const compute_params& p, const quant::plan& pl, const tensor& a, tensor& dst, std::byte* qb,
                       std::byte* panels, isa level) noexcept {
    const quant::job_grid grid = quant::make_grid(pl, p.nth, quant::tile_width(level, pl.N));
    const auto [j0, j1] = split_work(grid.jobs(pl), p);
    const bool q8 = pl.wtype == elem_type::q8_0;
#if BACKPLANE_HAS_X86_KERNELS
    if (level == isa::avx512 && pl.N <= quant::gemv_max_cols) {
        // the thread's jobs, merged where they are consecutive row panels of one matrix and
        // column chunk: each run of rows streams as one (see avx512_gemv.hpp)
        for (auto j = j0; j < j1;) {
            quant::job run = quant::job_at(pl, grid, j);
            for (++j; j < j1; ++j) {
                const quant::job next = quant::job_at(pl, grid, j);
                if (next.bi != run.bi || next.n0 != run.n0 || next.n1 != run.n1 || next.m0 != run.m1) break;
                run.m1 = next.m1;
            }
            if (q8)
                quant::gemv_job_avx512<elem_type::q8_0>(pl, a, dst, qb, run);
            else
                quant::gemv_job_avx512<elem_type::q4_0>(pl, a, dst, qb, run);
        }
        return;
    }
#endif
    for (auto j = j0; j < j1; ++j) {
        const quant::job jb = quant::job_at(pl, grid, j);
#if BACKPLANE_HAS_X86_KERNELS
        if (level == isa::avx512) {
            std::byte* panel = panels + static_cast<std::size_t>(p.ith) * pl.panel_bytes;
            if (q8)
                quant::job_avx512<elem_type::q8_0>(pl, a, dst, qb, panel, jb);
            else
                quant::job_avx512<elem_type::q4_0>(pl, a, dst, qb, panel, jb);
            continue;
        }
        if (level == isa::avx2) {
            if (q8)
                quant::job_avx2<elem_type::q8_0>(pl, a, dst, qb, jb);
            else
                quant::job_avx2<elem_type::q4_0>(pl, a, dst, qb, jb);
            continue;
        }
#endif
        (void)q8;
        (void)panels;
        quant::job_portable(pl, a, dst, qb, jb);
    }
}

/// Thread p.ith's share of the node (see the header comment). Returns not_supported when
/// quant_applies(dst) is false, and invalid_argument when p.wdata is missing or smaller
/// than quant_work_size(dst, p.nth) or several threads have no barrier; every thread then
/// returns the same, before the barrier.
template <class = void>
inline errc quant_mul_mat(const compute_params& p, tensor& dst) noexcept {
    quant::plan pl;
    if (!quant::make_plan(dst, &pl)) return errc::not_supported;
    if (p.wdata == nullptr || p.wsize < quant::work_bytes(pl, p.nth) || p.ith < 0 || p.ith >= p.nth ||
        (p.nth > 1 && p.barrier_fn == nullptr))
        return errc::invalid_argument;
    const isa level = quant::effective_level(p.level);
    auto* qb = static_cast<std::byte*>(p.wdata);

    quant::quantize_b(p, pl, *dst.src[1], qb, level);
    p.barrier();
    quant_jobs(p, pl, *dst.src[0], dst, qb, qb + pl.b_bytes, level);
    return errc::ok;
}

} // namespace backplane::cpu::fast
