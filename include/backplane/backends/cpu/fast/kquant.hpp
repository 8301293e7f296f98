#pragma once
// Fast mul_mat for K-quant weights (a q2_K, q3_K, q4_K, q5_K or q6_K; b f32 / f16 / bf16,
// quantized to q8_K on the fly), as ggml does it: per pair of super-blocks, integer dot
// products of the codes with b's codes per sub-block, weighted by the sub-blocks' integer
// scales, the minimums (or the code offsets) through b's sums of 16 codes, then the f32
// scales.
//
// Contract (the same as quant.hpp's; fast/mul_mat.hpp and fast/mul_mat_id.hpp reach these
// functions through the table of kquant_entry.hpp, which this header fills):
//  * kquant_applies(dst): true when kquant_mul_mat() handles this node (types, layouts).
//    A pure function of the node, so every thread of the node takes the same path.
//  * kquant_work_size(dst, nth): bytes of the work buffer shared by the node's nth threads.
//  * kquant_mul_mat(p, dst): computes thread p.ith's share; fills p.wdata cooperatively
//    and calls p.barrier() once (every thread of the node must call it).
//
// The two steps (kquant/plan.hpp describes the work buffer and the job grid):
//  1. each thread quantizes its share of b's columns into p.wdata (kquant/quantize.hpp;
//     AVX-512: a vector quantizer with core's bits), the codes in the order the chosen
//     kernels read them (kquant/plan.hpp's b_order);
//  2. after the barrier, each thread computes its share of the (matrix, column chunk,
//     32-row panel) jobs, a run of panels of one chunk as one job, with the kernels of
//     p.level:
//       AVX-512:  q4_K, q5_K, q6_K with N >= 8: a panel kernel, 32 weight rows unpacked
//                 once per column chunk and a vpdpbusd microkernel over 4-column tiles
//                 (kquant/panel_avx512.hpp); with fewer columns, register tiles decoding
//                 the weights 64 codes per register, scales applied with VNNI's vpdpwssd
//                 (kquant/gemv_avx512.hpp); b's codes in the kernels' order. q2_K, q3_K:
//                 256-bit register tiles (kquant/gemv.hpp);
//       AVX2:     256-bit register tiles with vpmaddwd (kquant/gemv.hpp);
//       portable: kquant/portable.hpp.
//
// The result differs from the exact product only by b's quantization (and the order of
// f32 operations), like ggml's.

#include <backplane/backends/cpu/compute_params.hpp>
#include <backplane/backends/cpu/fast/kquant_entry.hpp>
#include <backplane/backends/cpu/fast/kquant/gemv.hpp>
#include <backplane/backends/cpu/fast/kquant/gemv_avx512.hpp>
#include <backplane/backends/cpu/fast/kquant/panel_avx512.hpp>
#include <backplane/backends/cpu/fast/kquant/plan.hpp>
#include <backplane/backends/cpu/fast/kquant/portable.hpp>
#include <backplane/backends/cpu/fast/kquant/quantize.hpp>
#include <backplane/core/error.hpp>
#include <backplane/core/tensor.hpp>

#include <cstddef>

namespace backplane::cpu::fast {

/// True for mul_mat with a K-quant weight (rows contiguous), b f32 / f16 / bf16 in any
/// layout, and dst f32 with unit stride along its rows.
inline bool kquant_applies(const tensor& dst) noexcept { return kquant::make_plan(dst, nullptr); }

/// The quantized b, plus a 22 KiB packing area per thread where the panel kernel may run.
inline std::size_t kquant_work_size(const tensor& dst, int nth) noexcept {
    kquant::plan pl;
    return kquant::make_plan(dst, &pl) ? kquant::work_bytes(pl, nth) : 0;
}

namespace kquant {

/// Thread p.ith's share of the jobs: b quantized at qb (as quantize_b leaves it, codes in
/// pl.order), its packing area at panels + p.ith * kpanel_bytes where the panel kernel
/// runs. Also the fast mul_mat_id's, which quantizes b its own way (fast/mul_mat_id.hpp).
template <class = void>
inline void run_jobs(const compute_params& p, const plan& pl, const tensor& a, tensor& dst, const std::byte* qb,
                     std::byte* panels, isa level) noexcept {
    const job_grid grid = make_grid(pl, p.nth, 1);
    const auto [j0, j1] = split_work(grid.jobs(pl), p);
    for (auto j = j0; j < j1;) {
        // the thread's consecutive panels of one (matrix, column chunk) as one job: the
        // tiles then stream long row ranges
        job jb = job_at(pl, grid, j);
        for (++j; j < j1; ++j) {
            const job next = job_at(pl, grid, j);
            if (next.bi != jb.bi || next.n0 != jb.n0) break;
            jb.m1 = next.m1;
        }
        [&] {
#if BACKPLANE_HAS_X86_KERNELS
            if (level == isa::avx512) {
                if (kpanel_candidate(pl))
                    return job_kpanel(pl, a, dst, qb, jb, panels + static_cast<std::size_t>(p.ith) * kpanel_bytes);
                return job_avx512(pl, a, dst, qb, jb);
            }
            if (level == isa::avx2) return job_gemv(pl, a, dst, qb, jb);
#endif
            (void)level;
            (void)panels;
            job_portable(pl, a, dst, qb, jb);
        }();
        if (p.epilogue != nullptr) p.epilogue->fn(*p.epilogue, jb.bi, jb.m0, jb.m1, jb.n0, jb.n1);
    }
}

} // namespace kquant

/// Thread p.ith's share of the node (see the header comment). Returns not_supported when
/// kquant_applies(dst) is false, and invalid_argument when p.wdata is missing or smaller
/// than kquant_work_size(dst, p.nth) or several threads have no barrier; every thread then
/// returns the same, before the barrier.
template <class = void>
inline errc kquant_mul_mat(const compute_params& p, tensor& dst) noexcept {
    kquant::plan pl;
    if (!kquant::make_plan(dst, &pl)) return errc::not_supported;
    if (p.wdata == nullptr || p.wsize < kquant::work_bytes(pl, p.nth) || p.ith < 0 || p.ith >= p.nth ||
        (p.nth > 1 && p.barrier_fn == nullptr))
        return errc::invalid_argument;
    const isa level = kquant::effective_level(p.level);
    pl.order = kquant::b_order_for(pl.wtype, level);
    auto* qb = static_cast<std::byte*>(p.wdata);

    if (!p.b_ready) {
        kquant::quantize_b(p, pl, *dst.src[1], qb, level);
        p.barrier();
    }
    kquant::run_jobs(p, pl, *dst.src[0], dst, qb, qb + pl.b_bytes, level);
    return errc::ok;
}

namespace kquant {

/// mul_mat_id's experts: the panel kernel's packing area per thread when a product of
/// dst's columns may take it.
inline std::size_t expert_work_size(const tensor& dst, int nth) noexcept {
    plan pl;
    return make_plan(dst, &pl) && kpanel_candidate(pl) ? static_cast<std::size_t>(nth) * kpanel_bytes : 0;
}

/// mul_mat_id's experts: blocks super-blocks at x as records at out, as the kernels of
/// level read them for wtype weights.
inline void quantize_records(elem_type wtype, isa level, const float* x, i64 blocks, std::byte* out) noexcept {
    const type_traits tt = traits_of(wtype);
    const b_order order = b_order_for(wtype, level);
    for (i64 i = 0; i < blocks; ++i) quantize_record(tt, order, x + i * qk, out + i * rec_bytes, level);
}

/// mul_mat_id's experts: thread p.ith's share of dst = a x b, b's columns quantized at qb
/// by quantize_records, the packing areas at work.
template <class = void>
inline errc multiply(const compute_params& p, const tensor& a, tensor& dst, const std::byte* qb, std::byte* work,
                     isa level) noexcept {
    plan pl;
    if (!make_plan(dst, &pl)) return errc::not_supported;
    pl.order = b_order_for(pl.wtype, level);
    run_jobs(p, pl, a, dst, qb, work, level);
    return errc::ok;
}

inline constexpr kquant_entry_points entry_points{
    &kquant_applies, &kquant_work_size, &kquant_mul_mat<>, &expert_work_size, &quantize_records, &multiply<>,
};

/// Fills the CPU backend's table (kquant_entry.hpp) once per program, before main.
inline const bool entry_points_published =
    (kquant_kernels.store(&entry_points, std::memory_order_release), true);

} // namespace kquant

} // namespace backplane::cpu::fast
