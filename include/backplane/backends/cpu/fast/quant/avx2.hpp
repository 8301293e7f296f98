#pragma once
// Step 2, AVX2 level: tiles of up to 2 weight rows x 4 columns of b, the vector lanes
// running along K (ggml's layout): per block pair one 32-byte unsigned-by-signed
// multiply (vpmaddubsw), a pairwise widening add (vpmaddwd), a conversion and one FMA
// with the product of the two scales. A decoded weight block (its codes u, weights.hpp)
// is reused for the 4 columns, a loaded b block for the 2 rows.
//
//  * c = 128 (q8_0, iq4_nl): the sign trick, |a| (unsigned) times b with a's sign moved
//    onto it, a = u - 128; |a| <= 128 and |b| <= 127 (b comes from our quantizer), so the
//    16-bit pair sums cannot saturate.
//  * other offset types (q4_0, q5_0, mxfp4; u <= 31): u is the unsigned operand as it
//    is; b's record holds corr = -c * sum(b), added to the block's integer sum.
//  * minimum types (q4_1, q5_1): u as it is; m * (d_b * sum(b)) is summed apart, in f32.
//
// Float sums run per lane over the blocks and are reduced once per output.

#include <backplane/backends/cpu/fast/quant/plan.hpp>
#include <backplane/backends/cpu/isa.hpp>
#include <backplane/core/tensor.hpp>
#include <backplane/core/types.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#if BACKPLANE_HAS_X86_KERNELS
#include <backplane/backends/cpu/detail/x86_intrinsics.hpp>

BACKPLANE_X86_KERNELS_BEGIN

namespace backplane::cpu::fast::quant {

BACKPLANE_TARGET_AVX2 inline float hsum_avx2(__m256 v) noexcept {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

BACKPLANE_TARGET_AVX2 inline float f16_load_avx2(const std::byte* p) noexcept {
    return _cvtsh_ss(load_f16(p).bits);
}

/// R rows x C columns over all blocks; out[r * C + c] = dst value of (row r, column c).
template <elem_type T, int R, int C>
BACKPLANE_TARGET_AVX2 inline void tile_avx2(const std::byte* const* arow, const std::byte* const* bcol, i64 nblk,
                                            float* out) noexcept {
    constexpr weight_format f = format_of(T);
    constexpr bool sign_trick = f.c == 128;
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[R][C];
    float mins[R][C] = {}; // minimum types: sum of m * d_b * sum(b)
    for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c) acc[r][c] = _mm256_setzero_ps();
    for (i64 kb = 0; kb < nblk; ++kb) {
        __m256i ua[R]; // unsigned operand: |a| (sign trick) or u
        __m256i sa[R]; // sign trick: a itself, whose signs go onto b
        float da[R], ma[R];
        for (int r = 0; r < R; ++r) {
            const std::byte* blk = arow[r] + kb * f.bytes;
            da[r] = scale_avx2<T>(blk);
            ma[r] = f.has_min() ? f16_load_avx2(blk + f.min) : 0.0f;
            ua[r] = codes_avx2<T>(blk);
            if constexpr (sign_trick) {
                sa[r] = _mm256_xor_si256(ua[r], _mm256_set1_epi8(static_cast<char>(0x80)));
                ua[r] = _mm256_sign_epi8(sa[r], sa[r]);
            }
        }
        for (int c = 0; c < C; ++c) {
            // column layout: qs[nblk][32] | d[nblk] | corr[nblk]
            const __m256i bv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bcol[c] + kb * qk));
            const float db = load_f32(bcol[c] + nblk * qk + kb * 4);
            const std::byte* corr = bcol[c] + nblk * (qk + 4) + kb * 4;
            for (int r = 0; r < R; ++r) {
                __m256i p;
                if constexpr (sign_trick) {
                    p = _mm256_madd_epi16(_mm256_maddubs_epi16(ua[r], _mm256_sign_epi8(bv, sa[r])), ones);
                } else if constexpr (f.has_min()) {
                    p = _mm256_madd_epi16(_mm256_maddubs_epi16(ua[r], bv), ones);
                    mins[r][c] += ma[r] * load_f32(corr);
                } else {
                    p = _mm256_madd_epi16(_mm256_maddubs_epi16(ua[r], bv), ones);
                    p = _mm256_add_epi32(p, _mm256_setr_epi32(load_i32(corr), 0, 0, 0, 0, 0, 0, 0));
                }
                acc[r][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(da[r] * db), acc[r][c]);
            }
        }
    }
    for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c) out[r * C + c] = hsum_avx2(acc[r][c]) + mins[r][c];
}

/// One job (matrix bi, columns [n0, n1), rows [m0, m1)) at the AVX2 level: tiles of 2 rows
/// x 4, 2 or 1 columns; a partial tile repeats its last row (and 3 columns take a 4-column
/// tile that repeats its last one): three tile shapes per weight type keep the
/// instantiations, and the headers' parse cost, small.
template <elem_type T>
BACKPLANE_TARGET_AVX2 inline void job_avx2(const plan& pl, const tensor& a, tensor& dst, const std::byte* qb,
                                           const job& jb) noexcept {
    float out[2 * 4];
    for (i64 m = jb.m0; m < jb.m1; m += 2) {
        const int nrow = static_cast<int>(std::min<i64>(2, jb.m1 - m));
        const std::byte* arow[2] = {weight_row(a, pl, jb.bi, m), weight_row(a, pl, jb.bi, m + nrow - 1)};
        for (i64 n = jb.n0; n < jb.n1; n += 4) {
            const int nc = static_cast<int>(std::min<i64>(4, jb.n1 - n));
            const int w = nc == 3 ? 4 : nc;
            const std::byte* bcol[4];
            for (int c = 0; c < 4; ++c) bcol[c] = pl.tile(qb, jb.bi, n + std::min(c, nc - 1), 1);
            if (w == 1)
                tile_avx2<T, 2, 1>(arow, bcol, pl.nblk, out);
            else if (w == 2)
                tile_avx2<T, 2, 2>(arow, bcol, pl.nblk, out);
            else
                tile_avx2<T, 2, 4>(arow, bcol, pl.nblk, out);
            for (int r = 0; r < nrow; ++r)
                for (int c = 0; c < nc; ++c) store_f32(dst_at(dst, pl, jb.bi, m + r, n + c), out[r * w + c]);
        }
    }
}

} // namespace backplane::cpu::fast::quant

BACKPLANE_X86_KERNELS_END

#endif // BACKPLANE_HAS_X86_KERNELS
