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
//  * q8_0's scales are formed 8 or 16 blocks at a time, one group ahead of their use
//    (double buffer, so the gathers' latency stays off the critical path): a 256-bit
//    gather of the dword at each block start, one conversion, a multiply by b's
//    consecutive f32 scales, into a small stack array that the block loop reads.
//  * q8_0 uses 256-bit operations only: per block and row an xor, a vpdpbusd (starting
//    from corr in lane 0), a conversion and an FMA with the block's scale as an embedded
//    broadcast. A 512-bit variant (two blocks per operation from two loads of the pair's
//    68 bytes, codes and both scales by word permutations, no gathers) ran at 62-68 GB/s
//    of weights in L2 against this loop's 40-42, yet read DRAM slower (34 against 37.6
//    GB/s, one thread, Zen 5) at every prefetch distance and count tried: the gathers'
//    demand loads 16 blocks ahead draw the stream better than software prefetches alone.
//    Written again with a demand load of each row 16 blocks ahead per pair, as the
//    gathers make, it still read DRAM slower (32.2 against 37.2 GB/s; 63.7 against 44.2
//    in L2; alternating runs). Scales put together without gathers (from scalar loads of
//    the 8 blocks' words, or from 64-byte loads and vpermt2w) and a 512-bit loop over row
//    pairs were 5-15% faster in L2 and no faster, or slower, from DRAM.
//  * The 4- and 5-bit types need two more operations per block to split the nibbles,
//    which would leave the 256-bit loop bound by the two ports that shift, multiply-add
//    and convert; they work on four blocks per 512-bit operation instead (see
//    gemv_nib_avx512): two 64-byte loads and one word permutation gather 4 blocks' codes
//    (for mxfp4's odd 17-byte blocks the first load starts one byte in, so that every
//    block's codes start at an even offset of one of them), q5_0 / q5_1 pick their fifth
//    bits from the same loads (a second permutation, two vpshufb and two vptestmb make
//    byte masks, two masked adds put the 16s in), iq4_nl and mxfp4 codes go through one
//    vpshufb of their table.
//    Their scales (and minima) come from the same two loads: one more word permutation
//    puts block g's f16 scale in the words of lanes 4g..4g+3, where its sum lands, and
//    its minimum in the upper half (mxfp4: a third load from the first block's E8M0 byte
//    and one vpshufb). b's corr starts the dot product (an int32 in lane 4g), or for the
//    minimum types meets the spread minima in one FMA. A 16-lane gather of the scales per
//    16 blocks, which this replaced, cost about as much as the rest of the loop on Zen 5
//    (q4_0 in L2: 32 GB/s with it, 58-60 without).
//  * Streams (gemv_rows_avx512): a job's rows are cut into 4 contiguous parts and a tile
//    takes row t of each, so the weights are read as 4 sequential streams, like
//    ref/read_bandwidth, rather than as one front of 4 adjacent short rows. Each row
//    prefetches (T0), block by block, a row of its part at least 2304 bytes further on
//    (prefetch.hpp: the next row, or two of a short matrix), the job's last tiles
//    the parts of the job after it (the rows this thread computes next in the one-thread
//    case): without that, every job would start its 4 streams cold. Without
//    the software prefetches (the hardware prefetchers alone) q8_0 and q4_0 read ~17-19
//    GB/s from DRAM here.
//
// Measured on the 2-core AVX-512 VM (Zen 5, 4.3 GHz; 4096 x 4096, one thread, through the
// backend): in L2, q8_0 40-45 GB/s of weights, q4_0 58-60, q5_0 47, mxfp4 44; from DRAM
// (one stream read ~39-42 GB/s): q8_0 38, q4_0 38.5, q4_1 38.7, q5_0 37.6, q5_1 39.3,
// iq4_nl 40.0, mxfp4 36.6 (before the scales came from the code loads: q4_0 33.7,
// q5_0 28.9, iq4_nl 30.8, mxfp4 30.5).

#include <backplane/core/detail/unroll.hpp>
#include <backplane/backends/cpu/fast/prefetch.hpp>
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
#include <backplane/backends/cpu/detail/x86_intrinsics.hpp>

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

/// b's part of one step of gemv_nib_avx512: the codes of nq <= 4 blocks from block kb
/// (Full: nq = 4) split into low halves (codes 0-15 of each block) and high halves, their
/// scales spread to the blocks' lanes, and their corr: for the offset types the int32
/// -c * sum(b) in lane 4g of block g (the start of the dot product), for the minimum
/// types d_b * sum(b) likewise in f32.
struct nib_b {
    __m512i lo, hi;
    __m512 d;
    __m512i corr;
};

template <bool Full>
BACKPLANE_TARGET_AVX512 inline nib_b nib_b_step(const std::byte* bcol, i64 nblk, i64 kb, i64 nq) noexcept {
    __m512i b01, b23;
    if constexpr (Full) {
        b01 = _mm512_loadu_si512(bcol + kb * qk);
        b23 = _mm512_loadu_si512(bcol + kb * qk + 64);
    } else {
        b01 = _mm512_maskz_loadu_epi32(static_cast<__mmask16>(nq >= 2 ? 0xffff : 0x00ff), bcol + kb * qk);
        b23 = _mm512_maskz_loadu_epi32(static_cast<__mmask16>(nq == 3 ? 0x00ff : 0), bcol + kb * qk + 64);
    }
    const auto k4 = static_cast<__mmask8>(Full ? 0x0f : (1u << nq) - 1u);
    const __m512i idx = spread4_idx();
    const __m512 d = _mm512_castps128_ps512(_mm_maskz_loadu_ps(k4, bcol + nblk * qk + kb * 4));
    const __m512i c = _mm512_castsi128_si512(_mm_maskz_loadu_epi32(k4, bcol + nblk * (qk + 4) + kb * 4));
    return {_mm512_shuffle_i64x2(b01, b23, 0x88), // 128-bit lanes 0, 2 of each
            _mm512_shuffle_i64x2(b01, b23, 0xdd), // lanes 1, 3
            _mm512_permutexvar_ps(idx, d), _mm512_maskz_permutexvar_epi32(0x1111, idx, c)};
}

/// One step of gemv_nib_avx512: nq <= 4 blocks from block kb (Full: nq = 4) of R rows
/// against b's part bs, accumulated into f[r].
template <elem_type T, int R, bool Full>
BACKPLANE_TARGET_AVX512 inline void gemv_nib_step(const std::byte* const* arow, const nib_b& bs, i64 kb, i64 nq,
                                                  const std::uintptr_t* prow, __m512* f) noexcept {
    constexpr weight_format fm = format_of(T);
    constexpr i64 wb = fm.bytes;
BACKPLANE_UNROLL(8)
    for (int r = 0; r < R; ++r) {
        const std::byte* blk = arow[r] + kb * wb;
        if constexpr (Full) {
            const std::uintptr_t pa = prow[r] + static_cast<std::uintptr_t>(kb * wb);
            prefetch_at(pa); // a step reads 4 blocks, at most 96 bytes: two lines per step
            prefetch_at(pa + 64); // leave no line of the row between them unprefetched
        }
        __m512i s1, s2, lo, hi;
        four_block_sources<T, Full>(blk, nq, s1, s2);
        codes4_avx512<T>(s1, s2, lo, hi);
        __m512 m;
        const __m512 d = _mm512_mul_ps(four_block_scales<T, Full>(blk, nq, s1, s2, &m), bs.d);
        const __m512i start = fm.has_min() ? _mm512_setzero_si512() : bs.corr;
        const __m512i dot = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(start, lo, bs.lo), hi, bs.hi);
        f[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), d, f[r]);
        if constexpr (fm.has_min()) f[r] = _mm512_fmadd_ps(m, _mm512_castsi512_ps(bs.corr), f[r]);
    }
}

/// The 4- and 5-bit types: R rows times one b column over all blocks (see
/// gemv_q8_avx512), four blocks per 512-bit operation: codes4_avx512 leaves the 4 x 16
/// low-half codes of blocks j..j+3 in one vector and their high halves in another; two
/// vpdpbusd against b's low and high halves of the same 4 blocks, started from b's
/// integer corr, leave block j + g's sum in lanes 4g..4g+3; one FMA with the blocks'
/// scales (times b's) spread to match adds them, one more the minimum terms. The scales
/// come from the same two loads as the codes (four_block_scales).
template <elem_type T, int R>
BACKPLANE_TARGET_AVX512 inline void gemv_nib_avx512(const std::byte* const* arow, const std::byte* bcol, i64 nblk,
                                                    const std::uintptr_t* prow, float* out) noexcept {
    __m512 f[R];
BACKPLANE_UNROLL(8)
    for (int r = 0; r < R; ++r) f[r] = _mm512_setzero_ps();
    i64 kb = 0;
    for (; kb + 4 <= nblk; kb += 4)
        gemv_nib_step<T, R, true>(arow, nib_b_step<true>(bcol, nblk, kb, 4), kb, 4, prow, f);
    if (kb < nblk) gemv_nib_step<T, R, false>(arow, nib_b_step<false>(bcol, nblk, kb, nblk - kb), kb, nblk - kb, prow, f);
BACKPLANE_UNROLL(8)
    for (int r = 0; r < R; ++r) out[r] = _mm512_reduce_add_ps(f[r]);
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
/// alignment): the rows are cut into R contiguous parts read side by side; each row
/// prefetches the row stream_prefetch_rows after it in its part (prefetch.hpp), the last
/// tiles the first rows of the parts of the next nrow rows.
template <elem_type T>
BACKPLANE_TARGET_AVX512 inline void gemv_rows_avx512(const std::byte* a, std::size_t lda, i64 nrow, const std::byte* bcol,
                                                    i64 nblk, std::byte* out) noexcept {
    constexpr int R = gemv_rows;
    const auto put = [out](i64 m, float v) { std::memcpy(out + static_cast<std::size_t>(m) * sizeof(float), &v, sizeof v); };
    const i64 q = nrow / R;
    const auto base = reinterpret_cast<std::uintptr_t>(a);
    const auto row_at = [&](i64 m) { return base + static_cast<std::uintptr_t>(m) * lda; };
    const auto ahead = static_cast<i64>(stream_prefetch_rows(lda));
    float o[R];
    for (i64 t = 0; t < q; ++t) {
        const std::byte* arow[R];
        std::uintptr_t prow[R];
        for (int r = 0; r < R; ++r) {
            arow[r] = a + static_cast<std::size_t>(t + r * q) * lda;
            prow[r] = t + ahead < q ? row_at(t + ahead + r * q) : row_at(nrow + r * q + (t + ahead - q));
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
