#pragma once
// Fast mul_mat for quantized weights with blocks of 32 values (a q8_0, q4_0, q4_1, q5_0,
// q5_1, iq4_nl or mxfp4; b f32 / f16 / bf16: quantized to q8_0 on the fly), as ggml does
// it: integer dot products of weight blocks with activation blocks, scaled by the two
// blocks' scales. The kernels are written once, for a weight type T as a template
// parameter; quant/weights.hpp describes each type (where its scale, minimum, fifth bits
// and codes are, its offset or table) and decodes its blocks into unsigned codes.
//
// q8_0 and q4_0 are always compiled in. The kernels of the other five types are
// instantiated only by the programs that include <backplane/backends/cpu/weight_kernels.hpp> (as
// the K-quants': fast/quant_types.hpp sets quant_more_jobs before main), so that
// <backplane/backplane.hpp> parses no more kernel code than before; until then
// quant_applies is false for them and the reference kernel computes them.
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
// f32 additions), like ggml's: the integer sums of every block pair are exact. (ggml
// quantizes b to q8_1 for q4_1 / q5_1 weights: the same codes and scale as q8_0, plus
// d * sum(qs), which b's records here hold too.)

#include <backplane/backends/cpu/compute_params.hpp>
#include <backplane/backends/cpu/fast/quant/avx2.hpp>
#include <backplane/backends/cpu/fast/quant/avx512.hpp>
#include <backplane/backends/cpu/fast/quant/avx512_gemv.hpp>
#include <backplane/backends/cpu/fast/quant/plan.hpp>
#include <backplane/backends/cpu/fast/quant/portable.hpp>
#include <backplane/backends/cpu/fast/quant/quantize.hpp>
#include <backplane/backends/cpu/fast/quant/weights.hpp>
#include <backplane/core/error.hpp>
#include <backplane/core/tensor.hpp>

#include <atomic>
#include <cstddef>

namespace backplane::cpu::fast {

/// Step 2 for one weight type (see quant_jobs).
using quant_jobs_fn = void (*)(const compute_params& p, const quant::plan& pl, const tensor& a, tensor& dst,
                               std::byte* qb, std::byte* panels, isa level) noexcept;

/// Step 2 for q4_1, q5_0, q5_1, iq4_nl and mxfp4; null until fast/quant_types.hpp is part
/// of the program.
inline std::atomic<quant_jobs_fn> quant_more_jobs{nullptr};

/// Step 2 for weights of type T: thread p.ith's share of the jobs of plan pl, b quantized
/// in qb (as quantize_b leaves it), its AVX-512 panel scratch at panels + p.ith *
/// pl.panel_bytes.
template <elem_type T>
inline void quant_type_jobs(const compute_params& p, const quant::plan& pl, const tensor& a, tensor& dst,
                            std::byte* qb, std::byte* panels, isa level) noexcept {
    const quant::job_grid grid = quant::make_grid(pl, p.nth, quant::tile_width(level, pl.N));
    const auto [j0, j1] = split_work(grid.jobs(pl), p);
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
            quant::gemv_job_avx512<T>(pl, a, dst, qb, run);
            if (p.epilogue != nullptr) p.epilogue->fn(*p.epilogue, run.bi, run.m0, run.m1, run.n0, run.n1);
        }
        return;
    }
#endif
    for (auto j = j0; j < j1; ++j) {
        const quant::job jb = quant::job_at(pl, grid, j);
        [&] {
#if BACKPLANE_HAS_X86_KERNELS
            if (level == isa::avx512)
                return quant::job_avx512<T>(pl, a, dst, qb, panels + static_cast<std::size_t>(p.ith) * pl.panel_bytes, jb);
            if (level == isa::avx2) return quant::job_avx2<T>(pl, a, dst, qb, jb);
#endif
            (void)panels;
            quant::job_portable(pl, a, dst, qb, jb);
        }();
        if (p.epilogue != nullptr) p.epilogue->fn(*p.epilogue, jb.bi, jb.m0, jb.m1, jb.n0, jb.n1);
    }
}

/// Step 2 for a weight type, or null when the program lacks its kernels.
template <class = void> inline quant_jobs_fn quant_jobs_for(elem_type t) noexcept {
    if (t == elem_type::q8_0) return &quant_type_jobs<elem_type::q8_0>;
    if (t == elem_type::q4_0) return &quant_type_jobs<elem_type::q4_0>;
    return quant_more_jobs.load(std::memory_order_acquire);
}

/// True for mul_mat with a weight of quant/weights.hpp whose kernels the program has (rows
/// contiguous), b f32 / f16 / bf16 in any layout, and dst f32 with unit stride along its
/// rows.
inline bool quant_applies(const tensor& dst) noexcept {
    return quant::make_plan(dst, nullptr) && quant_jobs_for(dst.src[0]->type) != nullptr;
}

/// Quantized b plus, where the AVX-512 kernels are compiled, one panel scratch per thread.
inline std::size_t quant_work_size(const tensor& dst, int nth) noexcept {
    quant::plan pl;
    return quant::make_plan(dst, &pl) && quant_jobs_for(pl.wtype) != nullptr ? quant::work_bytes(pl, nth) : 0;
}

/// Step 2 alone: thread p.ith's share of the jobs of plan pl (quant_applies true for its
/// node), b quantized in qb (as quantize_b leaves it), its AVX-512 panel scratch at
/// panels + p.ith * pl.panel_bytes. Also the fast mul_mat_id's, which quantizes b its own
/// way (fast/mul_mat_id.hpp).
template <class = void>
inline void quant_jobs(const compute_params& p, const quant::plan& pl, const tensor& a, tensor& dst, std::byte* qb,
                       std::byte* panels, isa level) noexcept {
    if (const quant_jobs_fn run = quant_jobs_for(pl.wtype); run != nullptr) run(p, pl, a, dst, qb, panels, level);
}

/// Thread p.ith's share of the node (see the header comment). Returns not_supported when
/// quant_applies(dst) is false, and invalid_argument when p.wdata is missing or smaller
/// than quant_work_size(dst, p.nth) or several threads have no barrier; every thread then
/// returns the same, before the barrier.
template <class = void>
inline errc quant_mul_mat(const compute_params& p, tensor& dst) noexcept {
    quant::plan pl;
    if (!quant::make_plan(dst, &pl) || quant_jobs_for(pl.wtype) == nullptr) return errc::not_supported;
    if (p.wdata == nullptr || p.wsize < quant::work_bytes(pl, p.nth) || p.ith < 0 || p.ith >= p.nth ||
        (p.nth > 1 && p.barrier_fn == nullptr))
        return errc::invalid_argument;
    const isa level = quant::effective_level(p.level);
    auto* qb = static_cast<std::byte*>(p.wdata);

    if (!p.b_ready) {
        quant::quantize_b(p, pl, *dst.src[1], qb, level);
        p.barrier();
    }
    quant_jobs(p, pl, *dst.src[0], dst, qb, qb + pl.b_bytes, level);
    return errc::ok;
}

} // namespace backplane::cpu::fast
