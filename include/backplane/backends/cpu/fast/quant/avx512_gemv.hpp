#pragma once
// Step 2, AVX-512 VNNI level, mat-vec (N <= gemv_max_cols, i.e. N = 1): the weights are
// streamed once, straight from the tensor, with no repacking (from N = 2 on, the packed
// microkernel of avx512.hpp is faster even counting its packing). Vector lanes run along
// K; a tile is 4 weight rows, which share each b block and keep 4 independent chains of
// multiply-adds in flight.
//
//  * The weight is the unsigned operand of vpdpbusd, its code u (weights.hpp): q8_0
//    bytes flipped to q + 128 (one xor), the other types' nibbles (plus fifth bits, or
//    through a table: u = value + c); b's corr = -c * sum(b) undoes the offset, or for
//    the minimum types (q4_1, q5_1) m * corr adds the minimum term, corr = d_b * sum(b).
//  * Scales are formed 8 or 16 blocks at a time, one group ahead of their use (double
//    buffer, so the gathers' latency stays off the critical path): a gather of the dword
//    at each block start (the f16 scale, and minimum; mxfp4's E8M0 byte), one
//    conversion, a multiply by b's consecutive f32 scales, into a small stack array that
//    the block loop reads.
//  * q8_0 uses 256-bit operations only (a 512-bit one would take the third vector port
//    from the loop): per block and row an xor, a vpdpbusd (starting from corr in lane 0),
//    a conversion and an FMA with the block's scale as an embedded broadcast.
//  * The 4- and 5-bit types need two more operations per block to split the nibbles,
//    which would leave the 256-bit loop bound by the two ports that shift, multiply-add
//    and convert; they work on four blocks per 512-bit operation instead (see
//    gemv_nib_avx512): two 64-byte loads and one word permutation gather 4 blocks' codes
//    (for mxfp4's odd 17-byte blocks the first load starts one byte in, so that every
//    block's codes start at an even offset of one of them), q5_0 / q5_1 pick their fifth
//    bits from the same loads (a second permutation, two vpshufb and two vptestmb make
//    byte masks, two masked adds put the 16s in), iq4_nl and mxfp4 codes go through one
//    vpshufb of their table.
//  * Streams (gemv_rows_avx512): a job's rows are cut into 4 contiguous parts and a tile
//    takes row t of each, so the weights are read as 4 sequential streams, like
//    ref/read_bandwidth, rather than as one front of 4 adjacent short rows. Each row
//    prefetches (T0), block by block, the next row of its part, the job's last tile the
//    parts of the job after it (the next 32 rows, which this thread computes next in the
//    one-thread case): without that, every job would start its 4 streams cold. The
//    hardware prefetchers alone reach only ~0.65-0.8 of the read loop here.
//
// Measured on the 2-core AVX-512 VM (4096 x 4096, weights streamed from DRAM, 1 thread,
// ratio to ref/read_bandwidth of the same run): q8_0 0.87 (backplane_bench) to 0.91 (the
// kernel alone), q4_0 0.84 to 0.88 (before the streams and the cross-job prefetch: 0.82
// and 0.73). In L1 the loops run at ~2.1x (q8_0) and ~1.3x (q4_0) the DRAM rate; about a
// third of the compute time stays exposed, which is q4_0's remaining gap. Jobs of more
// than 32 rows (longer streams) measured 0.91 for both in the kernel alone. The other
// types, backplane_bench, 1 thread (q4_0 0.78 in the same runs): q4_1 0.84, q5_1 0.78,
// iq4_nl 0.70, mxfp4 0.69, q5_0 0.68; 2 threads: q4_1 0.99, q5_0 0.98. The fifth bits
// (7 more operations per 4 blocks and row) and the table lookups (2 more) add compute
// that one thread cannot hide behind its stream; two threads can.

#include <backplane/core/detail/unroll.hpp>
#include <backplane/backends/cpu/fast/quant/plan.hpp>
#include <backplane/backends/cpu/fast/quant/weights.hpp>
#include <backplane/backends/cpu/isa.hpp>
#include <backplane/core/tensor.hpp>
#include <backplane/core/types.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#if BACKPLANE_HAS_X86_KERNELS
#include <immintrin.h>

BACKPLANE_X86_KERNELS_BEGIN

namespace backplane::cpu::fast::quant {

inline constexpr int gemv_rows = 4; ///< weight rows per mat-vec tile

/// A prefetch of an address held as an integer: it may lie past the tensor (a prefetch
/// never faults, but pointer arithmetic there would be undefined).
BACKPLANE_TARGET_AVX512 inline void prefetch_at(std::uintptr_t p) noexcept {
    _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T0);
}

/// Group g's 16 block scales of R q8_0 rows times b's scales, into s[g & 1] (functions,
/// not lambdas, here and below: nvcc's front end drops a lambda's target attribute from
/// the host code it hands on).
template <int R>
BACKPLANE_TARGET_AVX512 inline void q8_scales(const std::byte* const* arow, const std::byte* bd, i64 nblk, i64 g,
                                              float (&s)[2][R][16]) noexcept {
    constexpr i64 wb = static_cast<i64>(sizeof(block_q8_0));
    constexpr i64 group = 16;
    const __m256i widx = _mm256_setr_epi32(0, wb, 2 * wb, 3 * wb, 4 * wb, 5 * wb, 6 * wb, 7 * wb);
    const i64 g0 = g * group;
    const i64 nb = std::min(group, nblk - g0);
    for (int half = 0; half < 2; ++half) {
        const i64 h0 = g0 + 8 * half;
        const i64 n8 = std::clamp<i64>(nb - 8 * half, 0, 8);
        const auto mk = static_cast<__mmask8>((1u << n8) - 1u);
        const __m256 db = _mm256_maskz_loadu_ps(mk, bd + h0 * 4);
        for (int r = 0; r < R; ++r) {
            const __m256i d16 = _mm256_mmask_i32gather_epi32(_mm256_setzero_si256(), mk, widx, arow[r] + h0 * wb, 1);
            _mm256_store_ps(&s[g & 1][r][8 * half], _mm256_mul_ps(_mm256_cvtph_ps(_mm256_cvtepi32_epi16(d16)), db));
        }
    }
}

/// q8_0: R rows times one b column (tile-width-1 arrangement: qs[nblk][32] | d[nblk] |
/// corr[nblk]) over all blocks; out[r] = dst value of row r. Row r's block kb prefetches
/// the line at prow[r] + kb * 34 (prow: see gemv_rows_avx512).
template <int R>
BACKPLANE_TARGET_AVX512 inline void gemv_q8_avx512(const std::byte* const* arow, const std::byte* bcol, i64 nblk,
                                                   const std::uintptr_t* prow, float* out) noexcept {
    constexpr i64 wb = static_cast<i64>(sizeof(block_q8_0));
    constexpr i64 group = 16;
    const std::byte* bd = bcol + nblk * qk;       // b's f32 scales
    const std::byte* bc = bcol + nblk * (qk + 4); // b's corr
    const __m256i bias = _mm256_set1_epi8(static_cast<char>(0x80));
    alignas(64) float s[2][R][group];
    __m256 f[R];
BACKPLANE_UNROLL(8)
    for (int r = 0; r < R; ++r) f[r] = _mm256_setzero_ps();

    const i64 ngroups = (nblk + group - 1) / group;
    q8_scales<R>(arow, bd, nblk, 0, s);
    for (i64 g = 0; g < ngroups; ++g) {
        if (g + 1 < ngroups) q8_scales<R>(arow, bd, nblk, g + 1, s);
        const i64 g0 = g * group;
        const i64 g1 = std::min(nblk, g0 + group);
        const auto& sg = s[g & 1];
        for (i64 kb = g0; kb < g1; ++kb) {
            const __m256i bq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bcol + kb * qk));
            const __m256i corr = _mm256_zextsi128_si256(_mm_cvtsi32_si128(load_i32(bc + kb * 4)));
BACKPLANE_UNROLL(8)
            for (int r = 0; r < R; ++r) {
                const std::byte* blk = arow[r] + kb * wb + 2;
                prefetch_at(prow[r] + static_cast<std::uintptr_t>(kb * wb));
                const __m256i ua = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk)), bias);
                const __m256i dot = _mm256_dpbusd_epi32(corr, ua, bq);
                f[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_set1_ps(sg[r][kb - g0]), f[r]);
            }
        }
    }
BACKPLANE_UNROLL(8)
    for (int r = 0; r < R; ++r) {
        __m128 t = _mm_add_ps(_mm256_castps256_ps128(f[r]), _mm256_extractf128_ps(f[r], 1));
        t = _mm_add_ps(t, _mm_movehl_ps(t, t));
        out[r] = _mm_cvtss_f32(_mm_add_ss(t, _mm_movehdup_ps(t)));
    }
}

/// One step of gemv_nib_avx512: nq <= 4 blocks from block kb (Full: nq = 4) of R rows,
/// their scales at sc[r * 16 ...], accumulated into f[r].
template <elem_type T, int R, bool Full>
BACKPLANE_TARGET_AVX512 inline void gemv_nib_step(const std::byte* const* arow, const std::byte* bcol, i64 kb, i64 nq,
                                                  const float* sc, const std::uintptr_t* prow, __m512* f) noexcept {
    constexpr i64 wb = format_of(T).bytes;
    const __m512i spread = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    // b's codes of the 4 blocks, split into low halves (values 0-15) and high halves
    __m512i b01, b23;
    if constexpr (Full) {
        b01 = _mm512_loadu_si512(bcol + kb * qk);
        b23 = _mm512_loadu_si512(bcol + kb * qk + 64);
    } else {
        b01 = _mm512_maskz_loadu_epi32(static_cast<__mmask16>(nq >= 2 ? 0xffff : 0x00ff), bcol + kb * qk);
        b23 = _mm512_maskz_loadu_epi32(static_cast<__mmask16>(nq == 3 ? 0x00ff : 0), bcol + kb * qk + 64);
    }
    const __m512i blo = _mm512_shuffle_i64x2(b01, b23, 0x88); // 128-bit lanes 0, 2 of each
    const __m512i bhi = _mm512_shuffle_i64x2(b01, b23, 0xdd); // lanes 1, 3
BACKPLANE_UNROLL(8)
    for (int r = 0; r < R; ++r) {
        const std::byte* blk = arow[r] + kb * wb;
        if constexpr (Full) {
            const std::uintptr_t pa = prow[r] + static_cast<std::uintptr_t>(kb * wb);
            prefetch_at(pa); // a step reads 4 blocks, at most 96 bytes: two lines per step
            prefetch_at(pa + 64); // leave no line of the row between them unprefetched
        }
        __m512i lo, hi;
        codes4_avx512<T, Full>(blk, nq, lo, hi);
        const __m512i dot = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, blo), hi, bhi);
        const __m512 s4 = _mm512_permutexvar_ps(spread, _mm512_castps128_ps512(_mm_loadu_ps(sc + r * 16)));
        f[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), s4, f[r]);
    }
}

/// Group g's 16 block scales of R rows times b's scales, into s[g & 1]; b's corr terms
/// (offset types: da * db * corr; minimum types: m * corr, corr = d_b * sum(b)) added to fc.
template <elem_type T, int R>
BACKPLANE_TARGET_AVX512 inline void nib_scales(const std::byte* const* arow, const std::byte* bd, const std::byte* bc,
                                               __m512i widx, i64 nblk, i64 g, float (&s)[2][R][16],
                                               __m512* fc) noexcept {
    constexpr weight_format fm = format_of(T);
    constexpr i64 group = 16;
    const i64 g0 = g * group;
    const i64 nb = std::min(group, nblk - g0);
    const __mmask16 mk = nb >= group ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << nb) - 1u);
    const __m512 db = _mm512_maskz_loadu_ps(mk, bd + g0 * 4);
    const __m512i corr = _mm512_maskz_loadu_epi32(mk, bc + g0 * 4);
    for (int r = 0; r < R; ++r) {
        const __m512i w = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), mk, widx, arow[r] + g0 * fm.bytes, 1);
        const __m512 sr = _mm512_mul_ps(scales16<T>(w), db); // 0 past the end
        _mm512_store_ps(s[g & 1][r], sr);
        if constexpr (fm.has_min())
            fc[r] = _mm512_fmadd_ps(mins16(w), _mm512_castsi512_ps(corr), fc[r]);
        else
            fc[r] = _mm512_fmadd_ps(sr, _mm512_cvtepi32_ps(corr), fc[r]);
    }
}

/// The 4- and 5-bit types: R rows times one b column over all blocks (see
/// gemv_q8_avx512), four blocks per 512-bit operation: codes4_avx512 leaves the 4 x 16
/// low-half codes of blocks j..j+3 in one vector and their high halves in another; two
/// vpdpbusd against b's low and high halves of the same 4 blocks leave block j + g's sum
/// in lanes 4g..4g+3; one FMA with the 4 scales spread to match adds them. b's corr
/// enters once per group, in f32.
template <elem_type T, int R>
BACKPLANE_TARGET_AVX512 inline void gemv_nib_avx512(const std::byte* const* arow, const std::byte* bcol, i64 nblk,
                                                    const std::uintptr_t* prow, float* out) noexcept {
    constexpr i64 group = 16;
    static_assert(group % 4 == 0);
    const std::byte* bd = bcol + nblk * qk;
    const std::byte* bc = bcol + nblk * (qk + 4);
    const __m512i widx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                            _mm512_set1_epi32(format_of(T).bytes));
    alignas(64) float s[2][R][group];
    __m512 f[R], fc[R]; // block sums, corr terms
BACKPLANE_UNROLL(8)
    for (int r = 0; r < R; ++r) f[r] = fc[r] = _mm512_setzero_ps();

    const i64 ngroups = (nblk + group - 1) / group;
    nib_scales<T, R>(arow, bd, bc, widx, nblk, 0, s, fc);
    for (i64 g = 0; g < ngroups; ++g) {
        if (g + 1 < ngroups) nib_scales<T, R>(arow, bd, bc, widx, nblk, g + 1, s, fc);
        const i64 g0 = g * group;
        const i64 nb = std::min(group, nblk - g0);
        i64 j = 0;
        for (; j + 4 <= nb; j += 4) gemv_nib_step<T, R, true>(arow, bcol, g0 + j, 4, &s[g & 1][0][j], prow, f);
        if (j < nb) gemv_nib_step<T, R, false>(arow, bcol, g0 + j, nb - j, &s[g & 1][0][j], prow, f);
    }
BACKPLANE_UNROLL(8)
    for (int r = 0; r < R; ++r) out[r] = _mm512_reduce_add_ps(_mm512_add_ps(f[r], fc[r]));
}

/// R rows of type T times one b column.
template <elem_type T, int R>
BACKPLANE_TARGET_AVX512 inline void gemv_tile(const std::byte* const* arow, const std::byte* bcol, i64 nblk,
                                              const std::uintptr_t* prow, float* o) noexcept {
    if constexpr (T == elem_type::q8_0)
        gemv_q8_avx512<R>(arow, bcol, nblk, prow, o);
    else
        gemv_nib_avx512<T, R>(arow, bcol, nblk, prow, o);
}

/// Rows [0, nrow) of a (lda bytes apart) times one b column into the floats at out (any
/// alignment): the rows
/// are cut into R contiguous parts read side by side; each row prefetches the row after
/// it in its part, the last tile the parts of the next nrow rows.
template <elem_type T>
BACKPLANE_TARGET_AVX512 inline void gemv_rows_avx512(const std::byte* a, std::size_t lda, i64 nrow, const std::byte* bcol,
                                                    i64 nblk, std::byte* out) noexcept {
    constexpr int R = gemv_rows;
    const auto put = [out](i64 m, float v) { std::memcpy(out + static_cast<std::size_t>(m) * sizeof(float), &v, sizeof v); };
    const i64 q = nrow / R;
    const auto base = reinterpret_cast<std::uintptr_t>(a);
    const auto row_at = [&](i64 m) { return base + static_cast<std::uintptr_t>(m) * lda; };
    float o[R];
    for (i64 t = 0; t < q; ++t) {
        const std::byte* arow[R];
        std::uintptr_t prow[R];
        for (int r = 0; r < R; ++r) {
            arow[r] = a + static_cast<std::size_t>(t + r * q) * lda;
            prow[r] = t + 1 < q ? row_at(t + 1 + r * q) : row_at(nrow + r * q);
        }
        gemv_tile<T, R>(arow, bcol, nblk, prow, o);
        for (int r = 0; r < R; ++r) put(t + r * q, o[r]);
    }
    const i64 rest = nrow - R * q;
    if (rest > 0) {
        const std::byte* arow[R];
        std::uintptr_t prow[R];
        for (int r = 0; r < R; ++r) {
            arow[r] = a + static_cast<std::size_t>(R * q + std::min<i64>(r, rest - 1)) * lda;
            prow[r] = row_at(nrow + r);
        }
        gemv_tile<T, R>(arow, bcol, nblk, prow, o);
        for (int r = 0; r < rest; ++r) put(R * q + r, o[r]);
    }
}

/// A run of rows (matrix bi, columns [n0, n1), rows [m0, m1): the caller merges a
/// thread's consecutive jobs into one, so its rows stream as 4 long sequential parts)
/// with b in the tile-width-1 layout. dst's rows are consecutive floats (make_plan checks
/// dst.nb[0]), so the results go straight to dst.
template <elem_type T>
BACKPLANE_TARGET_AVX512 inline void gemv_job_avx512(const plan& pl, const tensor& a, tensor& dst, const std::byte* qb,
                                                    const job& jb) noexcept {
    const std::byte* am = weight_row(a, pl, jb.bi, jb.m0);
    for (i64 n = jb.n0; n < jb.n1; ++n)
        gemv_rows_avx512<T>(am, a.nb[1], jb.m1 - jb.m0, pl.tile(qb, jb.bi, n, 1), pl.nblk,
                            dst_at(dst, pl, jb.bi, jb.m0, n));
}

} // namespace backplane::cpu::fast::quant

BACKPLANE_X86_KERNELS_END

#endif // BACKPLANE_HAS_X86_KERNELS
