#pragma once
// Step 2, AVX-512 register tiles for every K-quant type (mat-vec and few columns): as
// gemv.hpp's, but each weight super-block decoded 64 codes per 512-bit register
// (decode_avx512.hpp), so that a super-block costs 4 steps of vpmaddubsw + vpdpwssd per
// column instead of 8, and its scales take one vpshufb or vpermw per step.
//
// Per tile and super-block: the rows' scales (q4_K / q5_K: unpacked for the tile's rows
// together, the minimums in f32), 4 decoded steps per row; per (row, column): 4
// vpmaddubsw + 4 vpdpwssd into an int32 accumulator (zproducts). Then, tile_zmm (q2_K,
// q3_K, q6_K), per (row, column): the offset term (q3_K, q6_K: -c * sc[j] * bsum[j],
// exact), one conversion, a multiply by d and an FMA with d_b, and for q2_K one FMA of its
// 16 minimum terms dmin * m[j] * ex[j]. tile_zmm_min (q4_K, q5_K) keeps the rows side by
// side in the 128-bit lanes of one register per column (row r's in lane r): the
// accumulators are summed into those lanes, and the conversion, d, d_b and the minimum
// terms (two FMAs) serve all the tile's rows at once.
// b's records are in the step order of the type (plan.hpp's b_order). In cache (L2), one
// thread, 4.2 GHz Zen 5 (cpu/mat_vec_cached), a mat-vec reads about 49 GB/s of q4_K
// weights (about 12 cycles per row and super-block), 42 of q5_K and 47 of q6_K; the DRAM
// read rate of one core is 36-42 GB/s, so a mat-vec from DRAM is bound by both.
//
// Rows are read as 4 long streams (job_zmm_t): the hardware prefetchers follow those,
// where they lose 4 adjacent rows of a few KiB each, and each row prefetches its block
// at least 2304 bytes further on in its stream, in whole rows (prefetch.hpp; measured on
// Zen 5, q4_K 4096 wide from DRAM, one thread: 1 row ahead 36-37 GB/s, 2 rows 34-35,
// 1/2 row 33, none 33).

#include <backplane/core/detail/unroll.hpp>
#include <backplane/backends/cpu/fast/kquant/decode_avx512.hpp>
#include <backplane/backends/cpu/fast/prefetch.hpp>
#include <backplane/backends/cpu/fast/kquant/gemv.hpp>
#include <backplane/backends/cpu/fast/kquant/plan.hpp>
#include <backplane/backends/cpu/isa.hpp>
#include <backplane/core/tensor.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#if BACKPLANE_HAS_X86_KERNELS
#include <backplane/backends/cpu/detail/x86_intrinsics.hpp>

BACKPLANE_X86_KERNELS_BEGIN

namespace backplane::cpu::fast::kquant {

/// The end of a super-block for one (row, column): see the header comment.
template <elem_type T>
BACKPLANE_TARGET_AVX512 inline __m512 zfinish_block(__m512i acc, const zrow_scales& zs, const std::byte* rec,
                                                    __m512 f) noexcept {
    if constexpr (has_offset<T>)
        acc = _mm512_sub_epi32(acc, _mm512_zextsi256_si512(_mm256_madd_epi16(zs.scm, load32(rec + rec_bsum))));
    f = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(acc), zs.d), _mm512_set1_ps(load_f32(rec + rec_d)), f);
    if constexpr (T == elem_type::q2_K) // its 16 minimum terms, per row
        f = _mm512_fnmadd_ps(zs.mf, _mm512_loadu_ps(reinterpret_cast<const float*>(rec + rec_ex)), f);
    return f;
}

/// The minimum types: a super-block's minimum terms of all the tile's rows for one column
/// (b's record rec), added to g (lane r of it: row r's).
BACKPLANE_TARGET_AVX512 inline __m512 zmin_terms(const zmins& zm, const std::byte* rec, __m512 g) noexcept {
    const auto* ex = reinterpret_cast<const float*>(rec + rec_ex);
    g = _mm512_fmadd_ps(zm.lo, _mm512_broadcast_f32x4(_mm_loadu_ps(ex)), g);
    return _mm512_fmadd_ps(zm.hi, _mm512_broadcast_f32x4(_mm_loadu_ps(ex + 4)), g);
}

/// Bytes between a row's software prefetches of a super-block: more than one per line
/// pays where the kernel has compute to spare (a repeated prefetch of a line still in
/// flight gets it requested sooner here). Measured on Zen 5 from DRAM, one thread, GB/s
/// at a stride of 64 / 32 / 16: q6_K 33.5 / 35 / 37.5, q5_K 33.7 / 34.7 / 31.6; q4_K,
/// bound by its compute, is best at 64.
template <elem_type T>
inline constexpr std::size_t zprefetch_stride = T == elem_type::q6_K ? 16 : T == elem_type::q5_K ? 32 : 64;

/// [x.l0 + x.l1, x.l2 + x.l3, y.l0 + y.l1, y.l2 + y.l3] (l: 128-bit lanes).
BACKPLANE_TARGET_AVX512 inline __m512i lane_pairs(__m512i x, __m512i y) noexcept {
    return _mm512_add_epi32(_mm512_shuffle_i32x4(x, y, 0x88), _mm512_shuffle_i32x4(x, y, 0xdd));
}

/// 4 accumulators a[r] summed so that 128-bit lane r of the result holds row r's sum as 4
/// partial sums.
BACKPLANE_TARGET_AVX512 inline __m512i rows_to_lanes(const __m512i* a) noexcept {
    return lane_pairs(lane_pairs(a[0], a[1]), lane_pairs(a[2], a[3]));
}

/// The 4 steps of one super-block: acc[r][c] = sum over steps of row r's codes times
/// column c's (b's record rec[c]), each word pair times its sub-block scale.
template <elem_type T, int R, int C>
BACKPLANE_TARGET_AVX512 inline void zproducts(const std::byte* const* blk, const zrow_scales* zs,
                                              const std::byte* const* rec, __m512i (&acc)[R][C]) noexcept {
    using D = zdec<T>;
BACKPLANE_UNROLL(8)
    for (int r = 0; r < R; ++r)
BACKPLANE_UNROLL(8)
        for (int c = 0; c < C; ++c) acc[r][c] = _mm512_setzero_si512();
BACKPLANE_UNROLL(4)
    for (int k = 0; k < 4; ++k) {
        __m512i bv[C];
BACKPLANE_UNROLL(8)
        for (int c = 0; c < C; ++c) bv[c] = load64(rec[c] + 64 * k);
BACKPLANE_UNROLL(8)
        for (int r = 0; r < R; ++r) {
            const __m512i w = D::codes(blk[r], k);
            const __m512i s = D::scale(zs[r], k);
BACKPLANE_UNROLL(8)
            for (int c = 0; c < C; ++c) acc[r][c] = _mm512_dpwssd_epi32(acc[r][c], _mm512_maddubs_epi16(w, bv[c]), s);
        }
    }
}

/// The rows of super-block kb and, where pf != 0, their prefetches pf bytes ahead.
template <elem_type T, int R>
BACKPLANE_TARGET_AVX512 inline void zblocks(const std::byte* const* arow, i64 kb, std::size_t pf,
                                            const std::byte** blk) noexcept {
BACKPLANE_UNROLL(8)
    for (int r = 0; r < R; ++r) {
        blk[r] = arow[r] + static_cast<std::size_t>(kb) * type_size(T);
        if (pf != 0) prefetch_lines(reinterpret_cast<std::uintptr_t>(blk[r]) + pf, type_size(T), zprefetch_stride<T>);
    }
}

/// b's records of super-block kb, one per column.
template <int C>
BACKPLANE_TARGET_AVX512 inline void zrecords(const std::byte* const* bcol, i64 kb, const std::byte** rec) noexcept {
BACKPLANE_UNROLL(8)
    for (int c = 0; c < C; ++c) rec[c] = bcol[c] + kb * rec_bytes;
}

/// q2_K, q3_K, q6_K: R rows x C columns over nblk super-blocks; out[r * C + c]. Each row
/// prefetches its super-block pf bytes ahead.
template <elem_type T, int R, int C>
BACKPLANE_TARGET_AVX512 inline void tile_zmm(const std::byte* const* arow, const std::byte* const* bcol, i64 nblk,
                                             std::size_t pf, float* out) noexcept {
    __m512 f[R][C];
BACKPLANE_UNROLL(8)
    for (int r = 0; r < R; ++r)
BACKPLANE_UNROLL(8)
        for (int c = 0; c < C; ++c) f[r][c] = _mm512_setzero_ps();
    for (i64 kb = 0; kb < nblk; ++kb) {
        const std::byte* blk[R];
        zblocks<T, R>(arow, kb, pf, blk);
        zrow_scales zs[R];
        zmins unused;
        zdec<T>::template scales<R>(blk, zs, unused);
        const std::byte* rec[C];
        zrecords<C>(bcol, kb, rec);
        __m512i acc[R][C];
        zproducts<T, R, C>(blk, zs, rec, acc);
BACKPLANE_UNROLL(8)
        for (int r = 0; r < R; ++r)
BACKPLANE_UNROLL(8)
            for (int c = 0; c < C; ++c) f[r][c] = zfinish_block<T>(acc[r][c], zs[r], rec[c], f[r][c]);
    }
BACKPLANE_UNROLL(8)
    for (int r = 0; r < R; ++r)
BACKPLANE_UNROLL(8)
        for (int c = 0; c < C; ++c) out[r * C + c] = _mm512_reduce_add_ps(f[r][c]);
}

/// q4_K, q5_K: as tile_zmm, with the tile's 4 rows side by side in the 128-bit lanes of
/// one register per column: each super-block's products of column c are summed into row
/// lanes (rows_to_lanes), converted, and scaled by the rows' d (zmins::d) at once, and
/// the minimum terms of all rows meet the column in two FMAs (zmin_terms). For q4_K up to
/// 2 columns, the scales of super-block kb + 1 are decoded while kb's products run: their
/// chain of shuffles otherwise stalls each block's first products. L2-resident, one
/// thread, GB/s of weights times columns, against the per-row finish of tile_zmm (with 2
/// x 4 tiles at 4 columns): q4_K 1 column 43.8 -> 49.2, 2: 62.6 -> 66.9, 4: 68.4 -> 75.2;
/// q5_K 1 column 44.8 -> 45.3, 2: 62.7 -> 66.0, 4: 74.9 -> 83.2. For q4_K either change
/// alone gained nothing at one column.
template <elem_type T, int R, int C>
BACKPLANE_TARGET_AVX512 inline void tile_zmm_min(const std::byte* const* arow, const std::byte* const* bcol,
                                                 i64 nblk, std::size_t pf, float* out) noexcept {
    static_assert(R == 4, "rows_to_lanes takes 4 rows");
    __m512 f[C], g[C]; // row r's products and minimum terms in lane r
BACKPLANE_UNROLL(8)
    for (int c = 0; c < C; ++c) f[c] = g[c] = _mm512_setzero_ps();
    // the next block's decoded scales kept in registers: for q5_K, whose codes need more
    // registers, they spill (3% slower in L2 than decoding them in turn)
    constexpr bool ahead = C <= 2 && T == elem_type::q4_K;
    zrow_scales zs[R];
    zmins zm;
    if constexpr (ahead) zdec<T>::template scales<R>(arow, zs, zm);
    for (i64 kb = 0; kb < nblk; ++kb) {
        const std::byte* blk[R];
        zblocks<T, R>(arow, kb, pf, blk);
        zrow_scales zs_k[R];
        zmins zm_k;
        if constexpr (ahead) {
BACKPLANE_UNROLL(4)
            for (int r = 0; r < R; ++r) zs_k[r] = zs[r];
            zm_k = zm;
            const std::byte* next[R];
            zblocks<T, R>(arow, std::min(kb + 1, nblk - 1), 0, next); // the last block again at the end
            zdec<T>::template scales<R>(next, zs, zm);
        } else {
            zdec<T>::template scales<R>(blk, zs_k, zm_k);
        }
        const std::byte* rec[C];
        zrecords<C>(bcol, kb, rec);
        __m512i acc[R][C];
        zproducts<T, R, C>(blk, zs_k, rec, acc);
BACKPLANE_UNROLL(8)
        for (int c = 0; c < C; ++c) {
            __m512i a[R];
BACKPLANE_UNROLL(4)
            for (int r = 0; r < R; ++r) a[r] = acc[r][c];
            const __m512 s = _mm512_mul_ps(_mm512_cvtepi32_ps(rows_to_lanes(a)), zm_k.d);
            f[c] = _mm512_fmadd_ps(s, _mm512_set1_ps(load_f32(rec[c] + rec_d)), f[c]);
            g[c] = zmin_terms(zm_k, rec[c], g[c]);
        }
    }
    alignas(64) float lanes[C][16];
BACKPLANE_UNROLL(8)
    for (int c = 0; c < C; ++c) _mm512_store_ps(lanes[c], _mm512_sub_ps(f[c], g[c]));
BACKPLANE_UNROLL(8)
    for (int r = 0; r < R; ++r)
BACKPLANE_UNROLL(8)
        for (int c = 0; c < C; ++c) {
            const float* v = &lanes[c][4 * r];
            out[r * C + c] = (v[0] + v[1]) + (v[2] + v[3]);
        }
}

/// 4 rows x C columns (C = 1, 2 or 4) of type T; out[r * C + c]. q4_K / q5_K: one
/// tile_zmm_min. The others: one tile_zmm, or at 4 columns two of 2 rows (4 x 4
/// accumulators and the offset types' scales would not fit in registers).
template <elem_type T, int C>
BACKPLANE_TARGET_AVX512 inline void zmm_rows4(const std::byte* const* arow, const std::byte* const* bcol, i64 nblk,
                                              std::size_t pf, float* out) noexcept {
    if constexpr (has_zmins<T>) {
        tile_zmm_min<T, 4, C>(arow, bcol, nblk, pf, out);
    } else if constexpr (C == 4) {
        tile_zmm<T, 2, 4>(arow, bcol, nblk, pf, out);
        tile_zmm<T, 2, 4>(arow + 2, bcol, nblk, pf, out + 8);
    } else {
        tile_zmm<T, 4, C>(arow, bcol, nblk, pf, out);
    }
}

/// One job as R = 4 row streams: its rows split into 4 contiguous quarters, tile t takes
/// row t of each quarter (a quarter's rows lie one after the other in memory). Each tile
/// meets the job's columns in groups of up to 4 while its rows are in L1.
template <elem_type T>
inline void job_zmm_t(const plan& pl, const tensor& a, tensor& dst, const std::byte* qb, const job& jb) noexcept {
    constexpr int R = 4;
    const i64 tiles = (jb.m1 - jb.m0 + R - 1) / R;
    const std::size_t pf = stream_prefetch_rows(a.nb[1]) * a.nb[1]; // prefetch.hpp
    float out[R * 4];
    for (i64 t = 0; t < tiles; ++t) {
        const std::byte* arow[R];
        i64 m[R];
BACKPLANE_UNROLL(4)
        for (int r = 0; r < R; ++r) {
            m[r] = jb.m0 + r * tiles + t;
            arow[r] = weight_row(a, pl, jb.bi, std::min(m[r], jb.m1 - 1));
        }
        bool first = true;
        for (i64 n = jb.n0; n < jb.n1;) {
            const std::byte* bcol[4];
            const int nc = static_cast<int>(std::min<i64>(4, jb.n1 - n));
            for (int c = 0; c < 4; ++c) bcol[c] = pl.column(qb, jb.bi, n + std::min(c, nc - 1));
            const std::size_t p = first ? pf : 0;
            int C = 1;
            if (nc == 4) {
                C = 4;
                zmm_rows4<T, 4>(arow, bcol, pl.nblk, p, out);
            } else if (nc >= 2) {
                C = 2;
                zmm_rows4<T, 2>(arow, bcol, pl.nblk, p, out);
            } else {
                zmm_rows4<T, 1>(arow, bcol, pl.nblk, p, out);
            }
            const int used = std::min(C, nc);
            for (int r = 0; r < R; ++r)
                if (m[r] < jb.m1)
                    for (int c = 0; c < used; ++c) store_f32(dst_at(dst, pl, jb.bi, m[r], n + c), out[r * C + c]);
            n += used;
            first = false;
        }
    }
}

/// One job at the AVX-512 level: the 512-bit tiles (b in b_order_for(type, isa::avx512)).
inline void job_avx512(const plan& pl, const tensor& a, tensor& dst, const std::byte* qb, const job& jb) noexcept {
    switch (pl.wtype) {
    case elem_type::q2_K: return job_zmm_t<elem_type::q2_K>(pl, a, dst, qb, jb);
    case elem_type::q3_K: return job_zmm_t<elem_type::q3_K>(pl, a, dst, qb, jb);
    case elem_type::q4_K: return job_zmm_t<elem_type::q4_K>(pl, a, dst, qb, jb);
    case elem_type::q5_K: return job_zmm_t<elem_type::q5_K>(pl, a, dst, qb, jb);
    default: return job_zmm_t<elem_type::q6_K>(pl, a, dst, qb, jb);
    }
}

} // namespace backplane::cpu::fast::kquant

BACKPLANE_X86_KERNELS_END

#endif // BACKPLANE_HAS_X86_KERNELS
