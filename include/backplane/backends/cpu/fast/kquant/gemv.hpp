#pragma once
// Step 2, AVX2 register tiles (mat-vec and few columns; every N at this level): R weight
// rows x C columns of b over all super-blocks, the vector lanes along K. Each weight
// super-block is decoded in registers once (decode_avx2.hpp) and used for the tile's C
// columns; each b record is loaded once for the R rows.
//
// Per 32 values of a row and column: vpmaddubsw (unsigned codes x b's signed q8_K codes,
// pairs summed to 16 bits: at most 2 * 63 * 127, no saturation), then the sub-block
// scales per word pair (vpmaddwd + vpaddd) into an int32 accumulator for the super-block
// (the AVX-512 level has its own 512-bit tiles, gemv_avx512.hpp). Per super-block: the
// offset term (q3_K, q6_K: -c * sc[j] * bsum[j], one more word multiply-add, still
// exact), one conversion and an FMA with d * d_b; the minimum types subtract dmin * m[j] *
// (d_b * bsum[j]) with one or two f32 FMAs against b's ex[].
//
// Rows come from a contiguous range, R adjacent rows per tile; each super-block step
// prefetches R blocks' bytes of the rows a tile or more further on, in address order
// (prefetch_distance), so that the weights stream from memory ahead of use.

#include <backplane/core/detail/unroll.hpp>
#include <backplane/backends/cpu/fast/kquant/decode_avx2.hpp>
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

BACKPLANE_TARGET_AVX2 inline float hsum8(__m256 v) noexcept {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/// Prefetches the lines of [p, p + n) (an address as an integer: it may lie past the
/// tensor, where a prefetch does not fault), one prefetch every `stride` bytes.
BACKPLANE_TARGET_AVX2 inline void prefetch_lines(std::uintptr_t p, std::size_t n, std::size_t stride = 64) noexcept {
    for (std::size_t o = 0; o < n; o += stride) _mm_prefetch(reinterpret_cast<const char*>(p + o), _MM_HINT_T0);
}

/// How far ahead of row 0 a tile of R adjacent rows (row_stride bytes apart) prefetches:
/// whole tiles, at least 16 KiB. Per super-block step the tile prefetches R blocks' bytes
/// of that region in address order, one stream, rather than a line of each of its R
/// rows: R strided streams, a tile apart, keep far fewer DRAM reads in flight (q6_K ran
/// at half the read bandwidth that way).
inline std::size_t prefetch_distance(int R, std::size_t row_stride) noexcept {
    const std::size_t tile = static_cast<std::size_t>(R) * row_stride;
    constexpr std::size_t min_bytes = std::size_t{16} << 10;
    return tile == 0 ? min_bytes : (min_bytes + tile - 1) / tile * tile;
}

/// The end of a super-block for one (row, column): the offset term, the scales, the
/// minimums. acc: the scaled integer sum of the super-block.
template <elem_type T>
BACKPLANE_TARGET_AVX2 inline __m256 finish_block(__m256i acc, const row_scales& rs, const std::byte* rec,
                                                 __m256 f) noexcept {
    if constexpr (has_offset<T>)
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(rs.scm, load32(rec + rec_bsum)));
    f = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc), _mm256_set1_ps(rs.d * load_f32(rec + rec_d)), f);
    if constexpr (!has_offset<T>) {
        const auto* ex = reinterpret_cast<const float*>(rec + rec_ex);
        f = _mm256_fnmadd_ps(rs.mf[0], _mm256_loadu_ps(ex), f);
        if constexpr (dec<T>::sub == 16) f = _mm256_fnmadd_ps(rs.mf[1], _mm256_loadu_ps(ex + 8), f);
    }
    return f;
}

/// AVX2: R rows x C columns over nblk super-blocks; out[r * C + c]. Prefetches pf bytes
/// ahead of row 0 (prefetch_lines).
template <elem_type T, int R, int C>
BACKPLANE_TARGET_AVX2 inline void tile_avx2(const std::byte* const* arow, const std::byte* const* bcol, i64 nblk,
                                            std::size_t wb, std::size_t pf, float* out) noexcept {
    using D = dec<T>;
    __m256 f[R][C];
BACKPLANE_UNROLL(8)
    for (int r = 0; r < R; ++r)
BACKPLANE_UNROLL(8)
        for (int c = 0; c < C; ++c) f[r][c] = _mm256_setzero_ps();
    for (i64 kb = 0; kb < nblk; ++kb) {
        const std::byte* blk[R];
        row_scales rs[R];
        prefetch_lines(reinterpret_cast<std::uintptr_t>(arow[0]) + pf + static_cast<std::size_t>(kb) * R * wb, R * wb);
BACKPLANE_UNROLL(8)
        for (int r = 0; r < R; ++r) {
            blk[r] = arow[r] + static_cast<std::size_t>(kb) * wb;
            D::scales(blk[r], rs[r]);
        }
        __m256i acc[R][C];
BACKPLANE_UNROLL(8)
        for (int r = 0; r < R; ++r)
BACKPLANE_UNROLL(8)
            for (int c = 0; c < C; ++c) acc[r][c] = _mm256_setzero_si256();
BACKPLANE_UNROLL(8)
        for (int i = 0; i < 8; ++i) {
            __m256i bv[C];
BACKPLANE_UNROLL(8)
            for (int c = 0; c < C; ++c) bv[c] = load32(bcol[c] + kb * rec_bytes + 32 * i);
BACKPLANE_UNROLL(8)
            for (int r = 0; r < R; ++r) {
                const __m256i w = D::codes(blk[r], i);
                const __m256i s = step_scale<D::sub>(rs[r], i);
BACKPLANE_UNROLL(8)
                for (int c = 0; c < C; ++c)
                    acc[r][c] = _mm256_add_epi32(acc[r][c], _mm256_madd_epi16(_mm256_maddubs_epi16(w, bv[c]), s));
            }
        }
BACKPLANE_UNROLL(8)
        for (int r = 0; r < R; ++r)
BACKPLANE_UNROLL(8)
            for (int c = 0; c < C; ++c) f[r][c] = finish_block<T>(acc[r][c], rs[r], bcol[c] + kb * rec_bytes, f[r][c]);
    }
BACKPLANE_UNROLL(8)
    for (int r = 0; r < R; ++r)
BACKPLANE_UNROLL(8)
        for (int c = 0; c < C; ++c) out[r * C + c] = hsum8(f[r][c]);
}

/// Rows per tile for C columns: about 4 accumulators.
constexpr int tile_rows(int C) noexcept { return std::max(1, 4 / C); }

/// Rows [m0, m1) x columns [n0, n0 + C) of a job, tiles of R adjacent rows (the last one
/// repeats its last row; only real rows are stored).
template <elem_type T, int C>
inline void rows_gemv(const plan& pl, const tensor& a, tensor& dst, const std::byte* qb, const job& jb,
                      i64 n0) noexcept {
    constexpr int R = tile_rows(C);
    const std::byte* bcol[C];
BACKPLANE_UNROLL(8)
    for (int c = 0; c < C; ++c) bcol[c] = pl.column(qb, jb.bi, std::min(n0 + c, jb.n1 - 1));
    const int nc = static_cast<int>(std::min<i64>(C, jb.n1 - n0));
    const std::size_t pf = prefetch_distance(R, a.nb[1]);
    float out[R * C];
    for (i64 m = jb.m0; m < jb.m1; m += R) {
        const int nrow = static_cast<int>(std::min<i64>(R, jb.m1 - m));
        const std::byte* arow[R];
BACKPLANE_UNROLL(8)
        for (int r = 0; r < R; ++r) arow[r] = weight_row(a, pl, jb.bi, m + std::min(r, nrow - 1));
        tile_avx2<T, R, C>(arow, bcol, pl.nblk, pl.wbytes, pf, out);
        for (int r = 0; r < nrow; ++r)
            for (int c = 0; c < nc; ++c) store_f32(dst_at(dst, pl, jb.bi, m + r, n0 + c), out[r * C + c]);
    }
}

/// One job (or a run of consecutive jobs) with the register tiles: columns in groups of
/// up to 4 (a narrower last group runs the narrower tile).
template <elem_type T>
inline void job_gemv_t(const plan& pl, const tensor& a, tensor& dst, const std::byte* qb, const job& whole) noexcept {
    // a panel of rows at a time, so that the column groups after the first find its
    // weights in cache (run_jobs hands over runs of panels as one job)
    for (i64 m0 = whole.m0; m0 < whole.m1; m0 += panel_rows) {
        job jb = whole;
        jb.m0 = m0;
        jb.m1 = std::min(whole.m1, m0 + panel_rows);
        for (i64 n = jb.n0; n < jb.n1;) {
            const i64 left = jb.n1 - n;
            if (left >= 4) {
                rows_gemv<T, 4>(pl, a, dst, qb, jb, n);
                n += 4;
            } else if (left >= 2) {
                rows_gemv<T, 2>(pl, a, dst, qb, jb, n);
                n += 2;
            } else {
                rows_gemv<T, 1>(pl, a, dst, qb, jb, n);
                n += 1;
            }
        }
    }
}

inline void job_gemv(const plan& pl, const tensor& a, tensor& dst, const std::byte* qb, const job& jb) noexcept {
    switch (pl.wtype) {
    case elem_type::q2_K: return job_gemv_t<elem_type::q2_K>(pl, a, dst, qb, jb);
    case elem_type::q3_K: return job_gemv_t<elem_type::q3_K>(pl, a, dst, qb, jb);
    case elem_type::q4_K: return job_gemv_t<elem_type::q4_K>(pl, a, dst, qb, jb);
    case elem_type::q5_K: return job_gemv_t<elem_type::q5_K>(pl, a, dst, qb, jb);
    default: return job_gemv_t<elem_type::q6_K>(pl, a, dst, qb, jb);
    }
}

} // namespace backplane::cpu::fast::kquant

BACKPLANE_X86_KERNELS_END

#endif // BACKPLANE_HAS_X86_KERNELS
