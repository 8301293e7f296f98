#pragma once
// The loops around the kernels of the fast float mul_mat, written once for every kernel
// set (portable, avx2, avx512): blocking, packing, the division among threads and the
// barriers (see gemm/plan.hpp for the scheme). A kernel set Kr provides mr, nr and
//   convert(type, src, n, out)                   n values to f32
//   pack_a(type, a, lda, rows, k0, kc, out)      rows of a into micro-panels of mr rows
//   pack_b(type, b, ldb, cols, k0, kc, out)      one micro-panel of cols <= nr columns
//   tile(kc, a_panel, rows, b_panel, cols, c, ldc, accumulate)   one micro-tile of dst
//   matvec(type, a, lda, rows, K, b, ldb, ncols, d, ldd)         rows of dst, N small
// These loops are not hot (one call per micro-tile or per row block), so they are plain
// C++ and only the kernels carry target attributes.

#include <backplane/backends/cpu/compute_params.hpp>
#include <backplane/backends/cpu/fast/gemm/plan.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace backplane::cpu::fast::gemm_detail {

/// Micro-panels [p0, p1) of the column block [jc, jc + ncur) of matrix bm, for all of K,
/// into bt: the panel p of the K block starting at pc lies at
/// bt + pc * round_up(ncur, nr) + p * nr * kcur.
template <class Kr>
void pack_b_block(const problem& pr, const plan& pl, const std::byte* bm, i64 jc, i64 ncur, i64 p0, i64 p1,
                  float* bt) noexcept {
    const i64 ncr = round_up(ncur, Kr::nr);
    for (i64 pc = 0; pc < pr.K; pc += pl.kc) {
        const i64 kcur = std::min(pl.kc, pr.K - pc);
        for (i64 p = p0; p < p1; ++p) {
            const i64 j = jc + p * Kr::nr;
            const i64 cols = std::min(Kr::nr, jc + ncur - j);
            Kr::pack_b(pr.b.type, bm + static_cast<std::size_t>(j) * pr.b.nb1, pr.b.nb1, cols, pc, kcur,
                       bt + pc * ncr + p * Kr::nr * kcur);
        }
    }
}

/// dst rows [m0, m1) x b micro-panels [p0, p1) of the column block at jc (packed in bt):
/// for each K block, packs a by mc rows into at, then runs the micro-kernel over every
/// (b panel, a panel) pair, b's panel staying in L1 while a's panels stream from L2.
template <class Kr>
void compute_block(const problem& pr, const plan& pl, const std::byte* am, std::byte* dm, i64 m0, i64 m1, i64 jc,
                   i64 ncur, i64 p0, i64 p1, const float* bt, float* at) noexcept {
    if (m0 >= m1 || p0 >= p1) return;
    const i64 ncr = round_up(ncur, Kr::nr);
    for (i64 pc = 0; pc < pr.K; pc += pl.kc) {
        const i64 kcur = std::min(pl.kc, pr.K - pc);
        for (i64 ic = m0; ic < m1; ic += pl.mc) {
            const i64 mcur = std::min(pl.mc, m1 - ic);
            Kr::pack_a(pr.a.type, am + static_cast<std::size_t>(ic) * pr.a.nb1, pr.a.nb1, mcur, pc, kcur, at);
            for (i64 p = p0; p < p1; ++p) {
                const i64 j = jc + p * Kr::nr;
                const i64 cols = std::min(Kr::nr, jc + ncur - j);
                const float* bp = bt + pc * ncr + p * Kr::nr * kcur;
                std::byte* cj =
                    dm + static_cast<std::size_t>(j) * pr.dnb1 + static_cast<std::size_t>(ic) * sizeof(float);
                for (i64 ir = 0; ir < mcur; ir += Kr::mr)
                    Kr::tile(kcur, at + ir * kcur, std::min(Kr::mr, mcur - ir), bp, cols,
                             cj + static_cast<std::size_t>(ir) * sizeof(float), pr.dnb1, pc > 0);
            }
        }
    }
}

struct range {
    i64 begin, end;
};

/// [begin, end) of n items for part i of parts (contiguous, sizes differing by at most 1).
constexpr range split_even(i64 n, i64 i, i64 parts) noexcept {
    const i64 q = n / parts;
    const i64 r = n % parts;
    const i64 b = i * q + std::min(i, r);
    return {b, b + q + (i < r ? 1 : 0)};
}

/// The packed GEMM path (N > matvec_max_n).
template <class Kr>
void run_gemm(const problem& pr, const plan& pl, const compute_params& p, float* base) noexcept {
    const i64 nmat = pr.batches();
    float* at = pl.thread_area(base, p.ith);
    if (pl.kind == path::whole_matrices) {
        // whole matrices per thread, private blocks, no barrier
        float* bt = at + pl.a_block;
        const auto [q0, q1] = split_even(nmat, p.ith, p.nth);
        for (i64 q = q0; q < q1; ++q) {
            const std::byte* am = pr.a_matrix(q);
            const std::byte* bm = pr.b_matrix(q);
            std::byte* dm = pr.d_matrix(q);
            for (i64 jc = 0; jc < pr.N; jc += pl.nc) {
                const i64 ncur = std::min(pl.nc, pr.N - jc);
                const i64 np = ceil_div(ncur, Kr::nr);
                pack_b_block<Kr>(pr, pl, bm, jc, ncur, 0, np, bt);
                compute_block<Kr>(pr, pl, am, dm, 0, pr.M, jc, ncur, 0, np, bt, at);
            }
        }
        return;
    }
    // shared: every thread walks the same (matrix, column block) steps, one barrier each
    const i64 im = p.ith % pl.tm;
    const i64 in = p.ith / pl.tm;
    const auto [u0, u1] = split_even(ceil_div(pr.M, m_unit), im, pl.tm);
    const i64 m0 = std::min(u0 * m_unit, pr.M);
    const i64 m1 = std::min(u1 * m_unit, pr.M);
    i64 step = 0;
    for (i64 q = 0; q < nmat; ++q) {
        const std::byte* am = pr.a_matrix(q);
        const std::byte* bm = pr.b_matrix(q);
        std::byte* dm = pr.d_matrix(q);
        for (i64 jc = 0; jc < pr.N; jc += pl.nc, ++step) {
            const i64 ncur = std::min(pl.nc, pr.N - jc);
            const i64 np = ceil_div(ncur, Kr::nr);
            float* bt = pl.shared_b(base, step);
            const auto [b0, b1] = split_even(np, p.ith, p.nth);
            pack_b_block<Kr>(pr, pl, bm, jc, ncur, b0, b1, bt);
            p.barrier();
            const auto [c0, c1] = split_even(np, in, pl.tn);
            compute_block<Kr>(pr, pl, am, dm, m0, m1, jc, ncur, c0, c1, bt, at);
        }
    }
}

/// The mat-vec path (N <= matvec_max_n): the rows of all matrices split among threads,
/// a streamed once; b's columns used in place when they are aligned f32, else converted
/// into this thread's scratch.
template <class Kr>
void run_matvec(const problem& pr, const plan& pl, const compute_params& p, float* base) noexcept {
    const i64 total = pr.batches() * pr.M;
    const auto [r0, r1] = split_even(total, p.ith, p.nth);
    float* scratch = pl.thread_area(base, p.ith);
    const bool in_place = pr.b.type == elem_type::f32 &&
                          reinterpret_cast<std::uintptr_t>(pr.b.data) % alignof(float) == 0 &&
                          pr.b.nb1 % sizeof(float) == 0 && pr.b.nb2 % sizeof(float) == 0 &&
                          pr.b.nb3 % sizeof(float) == 0;
    i64 converted = -1; // the matrix whose columns scratch holds
    for (i64 r = r0; r < r1;) {
        const i64 q = r / pr.M;
        const i64 m = r % pr.M;
        const i64 rows = std::min(pr.M - m, r1 - r);
        const std::byte* bm = pr.b_matrix(q);
        const float* bcols = scratch;
        i64 ldb = pr.K;
        if (in_place) {
            bcols = reinterpret_cast<const float*>(bm);
            ldb = static_cast<i64>(pr.b.nb1 / sizeof(float));
        } else if (converted != q) {
            for (i64 n = 0; n < pr.N; ++n)
                Kr::convert(pr.b.type, bm + static_cast<std::size_t>(n) * pr.b.nb1, pr.K, scratch + n * pr.K);
            converted = q;
        }
        Kr::matvec(pr.a.type, pr.a_matrix(q) + static_cast<std::size_t>(m) * pr.a.nb1, pr.a.nb1, rows, pr.K, bcols,
                   ldb, pr.N, pr.d_matrix(q) + static_cast<std::size_t>(m) * sizeof(float), pr.dnb1);
        r += rows;
    }
}

/// K == 0: dst is all zeros (the sum of nothing); rows split among threads.
inline void zero_dst(const problem& pr, const compute_params& p) noexcept {
    const i64 total = pr.batches() * pr.N;
    const auto [r0, r1] = split_even(total, p.ith, p.nth);
    for (i64 r = r0; r < r1; ++r) {
        std::byte* row = pr.d_matrix(r / pr.N) + static_cast<std::size_t>(r % pr.N) * pr.dnb1;
        std::fill_n(row, static_cast<std::size_t>(pr.M) * sizeof(float), std::byte{0});
    }
}

/// Thread p.ith's share of the node with kernel set Kr.
template <class Kr>
void run(const problem& pr, const plan& pl, const compute_params& p, float* base) noexcept {
    if (pl.kind == path::matvec)
        run_matvec<Kr>(pr, pl, p, base);
    else
        run_gemm<Kr>(pr, pl, p, base);
}

} // namespace backplane::cpu::fast::gemm_detail
