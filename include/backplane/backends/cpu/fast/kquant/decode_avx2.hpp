#pragma once
// The weight super-blocks of each K-quant type decoded in AVX2 registers (shared by the
// AVX2 and the AVX-512 register-tile kernels, gemv.hpp): dec<T>::codes(blk, i) gives the
// unsigned codes of values 32i .. 32i+31 as 32 bytes, in value order, so that they meet
// b's q8_K codes as stored; dec<T>::scales(blk) the sub-block scales in the forms the
// kernels multiply with:
//
//   sw[0], sw[1]  the integer scales of sub-blocks 0-7 and 8-15, each as a dword holding
//                 the scale twice (two 16-bit words), for vpmaddwd / vpdpwssd;
//   scm           offset types: the 16 words -c * sc[j] (one per 16 values), met with
//                 b's 16 sums of 16 codes;
//   mf[0], mf[1]  minimum types: dmin * m[j] in f32 (8 per register), met with b's
//                 ex[] = d_b * (sum of the sub-block's codes);
//   d             the super-block's f32 scale.
//
// Bit fields are moved with 16-bit shifts whose bits leaking across byte boundaries
// always land outside the mask that follows (each case is noted).

#include <backplane/backends/cpu/fast/kquant/plan.hpp>
#include <backplane/backends/cpu/isa.hpp>
#include <backplane/core/kquants.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>

#if BACKPLANE_HAS_X86_KERNELS
#include <backplane/backends/cpu/detail/x86_intrinsics.hpp>

BACKPLANE_X86_KERNELS_BEGIN

namespace backplane::cpu::fast::kquant {

struct row_scales {
    __m256i sw[2];
    __m256i scm;
    __m256 mf[2];
    float d;
};

template <elem_type T> struct dec;

BACKPLANE_TARGET_AVX2 inline __m256i load32(const std::byte* p) noexcept {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}
BACKPLANE_TARGET_AVX2 inline float f16_at(const std::byte* p) noexcept {
    std::uint16_t h;
    std::memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}
/// 16 signed 16-bit scales (words) -> sw[0], sw[1]: each word twice in a dword.
BACKPLANE_TARGET_AVX2 inline void dup_words(__m256i w, row_scales& rs) noexcept {
    const __m256i lo = _mm256_unpacklo_epi16(w, w); // words 0-3 | 8-11
    const __m256i hi = _mm256_unpackhi_epi16(w, w); // words 4-7 | 12-15
    rs.sw[0] = _mm256_permute2x128_si256(lo, hi, 0x20);
    rs.sw[1] = _mm256_permute2x128_si256(lo, hi, 0x31);
}
/// 8 unsigned byte minimums (low 8 bytes of m) times dmin, in f32.
BACKPLANE_TARGET_AVX2 inline __m256 mins_f32(__m128i m, float dmin) noexcept {
    return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(m)), _mm256_set1_ps(dmin));
}

/// The scale of step i (values 32i .. 32i+31) per word: sub-block i (32-value types), or
/// sub-blocks 2i (low 128 bits) and 2i+1 (high) for the 16-value types.
template <int Sub>
BACKPLANE_TARGET_AVX2 inline __m256i step_scale(const row_scales& rs, int i) noexcept {
    if constexpr (Sub == 32) {
        return _mm256_permutevar8x32_epi32(rs.sw[0], _mm256_set1_epi32(i));
    } else {
        const int j = (2 * i) % 8;
        return _mm256_permutevar8x32_epi32(rs.sw[i / 4], _mm256_setr_epi32(j, j, j, j, j + 1, j + 1, j + 1, j + 1));
    }
}

// q2_K: scales[16] @0 (scale low nibble, minimum high), qs[64] @16, d @80, dmin @82.
template <> struct dec<elem_type::q2_K> {
    static constexpr int sub = 16;
    BACKPLANE_TARGET_AVX2 static __m256i codes(const std::byte* blk, int i) noexcept {
        // 2-bit field 2 * (i % 4): the shift leaks into bits >= 10 - 6 = 2 of a byte, masked
        return _mm256_and_si256(_mm256_srli_epi16(load32(blk + 16 + 32 * (i / 4)), 2 * (i % 4)), _mm256_set1_epi8(3));
    }
    BACKPLANE_TARGET_AVX2 static void scales(const std::byte* blk, row_scales& rs) noexcept {
        const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk));
        const __m128i low4 = _mm_set1_epi8(0x0f);
        dup_words(_mm256_cvtepu8_epi16(_mm_and_si128(v, low4)), rs);
        const __m128i m = _mm_and_si128(_mm_srli_epi16(v, 4), low4);
        const float dmin = f16_at(blk + 82);
        rs.mf[0] = mins_f32(m, dmin);
        rs.mf[1] = mins_f32(_mm_srli_si128(m, 8), dmin);
        rs.d = f16_at(blk + 80);
    }
};

// q3_K: hmask[32] @0, qs[64] @32, scales[12] @96, d @108.
template <> struct dec<elem_type::q3_K> {
    static constexpr int sub = 16;
    static constexpr int offset = 4;
    BACKPLANE_TARGET_AVX2 static __m256i codes(const std::byte* blk, int i) noexcept {
        const __m256i low2 =
            _mm256_and_si256(_mm256_srli_epi16(load32(blk + 32 + 32 * (i / 4)), 2 * (i % 4)), _mm256_set1_epi8(3));
        // the third bit: bit i of hmask to bit 2 (a left shift of <= 2 leaks into bits < 2,
        // a right one of s into bits >= 8 - s >= 3)
        const __m256i h = load32(blk);
        const __m256i hs = i <= 2 ? _mm256_slli_epi16(h, 2 - i) : _mm256_srli_epi16(h, i - 2);
        return _mm256_or_si256(low2, _mm256_and_si256(hs, _mm256_set1_epi8(4)));
    }
    /// The 16 signed 6-bit scales (sc - 32) as bytes.
    BACKPLANE_TARGET_AVX2 static __m128i scale_bytes(const std::byte* blk) noexcept {
        std::uint64_t s0;
        std::uint32_t s1;
        std::memcpy(&s0, blk + 96, 8);
        std::memcpy(&s1, blk + 104, 4);
        constexpr std::uint64_t m4 = 0x0f0f0f0f0f0f0f0full;
        constexpr std::uint32_t m2 = 0x03030303u;
        // scale j: low 4 bits from byte j % 8 (low nibble for j < 8), high 2 bits from
        // byte 8 + j % 4 at bit 2 * (j / 4)
        const std::uint64_t hi_lo = (s1 & m2) | static_cast<std::uint64_t>((s1 >> 2) & m2) << 32;
        const std::uint64_t hi_hi = ((s1 >> 4) & m2) | static_cast<std::uint64_t>((s1 >> 6) & m2) << 32;
        const std::uint64_t lo = (s0 & m4) | (hi_lo << 4);
        const std::uint64_t hi = ((s0 >> 4) & m4) | (hi_hi << 4);
        return _mm_sub_epi8(_mm_set_epi64x(static_cast<long long>(hi), static_cast<long long>(lo)), _mm_set1_epi8(32));
    }
    BACKPLANE_TARGET_AVX2 static void scales(const std::byte* blk, row_scales& rs) noexcept {
        const __m256i w = _mm256_cvtepi8_epi16(scale_bytes(blk));
        dup_words(w, rs);
        rs.scm = _mm256_mullo_epi16(w, _mm256_set1_epi16(-offset));
        rs.d = f16_at(blk + 108);
    }
};

/// q4_K and q5_K: d @0, dmin @2, scales[12] @4; the 8 6-bit scales and minimums as the
/// bytes [sc0..7, m0..7].
BACKPLANE_TARGET_AVX2 inline __m128i scale_min_bytes(const std::byte* blk) noexcept {
    std::uint64_t a;
    std::uint32_t c;
    std::memcpy(&a, blk + 4, 8);
    std::memcpy(&c, blk + 12, 4);
    // bytes [sc0-3, m0-3] and [sc4-7, m4-7]: sub-blocks 4-7 take their low 4 bits from
    // bytes 8-11 (scale low nibble, minimum high) and their high 2 bits from the top of
    // bytes 0-3 (scales) and 4-7 (minimums)
    const std::uint64_t lo = a & 0x3f3f3f3f3f3f3f3full;
    const std::uint64_t hi = (c & 0x0f0f0f0fu) | static_cast<std::uint64_t>((c >> 4) & 0x0f0f0f0fu) << 32 |
                             ((a >> 2) & 0x3030303030303030ull);
    return _mm_shuffle_epi8(_mm_set_epi64x(static_cast<long long>(hi), static_cast<long long>(lo)),
                            _mm_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 12, 13, 14, 15));
}
BACKPLANE_TARGET_AVX2 inline void scales_q4q5(const std::byte* blk, row_scales& rs) noexcept {
    const __m128i v = scale_min_bytes(blk);
    dup_words(_mm256_cvtepu8_epi16(v), rs); // sw[0]: the 8 scales (sw[1]: minimums, unused)
    rs.mf[0] = mins_f32(_mm_srli_si128(v, 8), f16_at(blk + 2));
    rs.d = f16_at(blk);
}

// q4_K: qs[128] @16; sub-block j in the low (j even) or high nibbles of qs[32 * (j / 2)].
template <> struct dec<elem_type::q4_K> {
    static constexpr int sub = 32;
    BACKPLANE_TARGET_AVX2 static __m256i codes(const std::byte* blk, int i) noexcept {
        const __m256i x = load32(blk + 16 + 32 * (i / 2));
        return _mm256_and_si256(i % 2 ? _mm256_srli_epi16(x, 4) : x, _mm256_set1_epi8(0x0f));
    }
    BACKPLANE_TARGET_AVX2 static void scales(const std::byte* blk, row_scales& rs) noexcept { scales_q4q5(blk, rs); }
};

// q5_K: qh[32] @16 (fifth bit of sub-block j: bit j), qs[128] @48.
template <> struct dec<elem_type::q5_K> {
    static constexpr int sub = 32;
    BACKPLANE_TARGET_AVX2 static __m256i codes(const std::byte* blk, int i) noexcept {
        const __m256i x = load32(blk + 48 + 32 * (i / 2));
        const __m256i lo = _mm256_and_si256(i % 2 ? _mm256_srli_epi16(x, 4) : x, _mm256_set1_epi8(0x0f));
        // bit i to bit 4 (a left shift of <= 4 leaks into bits < 4, a right one of s into
        // bits >= 8 - s >= 5)
        const __m256i h = load32(blk + 16);
        const __m256i hs = i <= 4 ? _mm256_slli_epi16(h, 4 - i) : _mm256_srli_epi16(h, i - 4);
        return _mm256_or_si256(lo, _mm256_and_si256(hs, _mm256_set1_epi8(0x10)));
    }
    BACKPLANE_TARGET_AVX2 static void scales(const std::byte* blk, row_scales& rs) noexcept { scales_q4q5(blk, rs); }
};

// q6_K: ql[128] @0, qh[64] @128, scales[16] @192 (int8), d @208. Values 128h + 32p + l:
// low 4 bits in ql[64h + 32(p % 2) + l] (low nibble for p < 2), high 2 bits at bit 2p of
// qh[32h + l].
template <> struct dec<elem_type::q6_K> {
    static constexpr int sub = 16;
    static constexpr int offset = 32;
    BACKPLANE_TARGET_AVX2 static __m256i codes(const std::byte* blk, int i) noexcept {
        const int h = i / 4, p = i % 4;
        const __m256i x = load32(blk + 64 * h + 32 * (p % 2));
        const __m256i lo = _mm256_and_si256(p < 2 ? x : _mm256_srli_epi16(x, 4), _mm256_set1_epi8(0x0f));
        // bits 2p, 2p + 1 to bits 4, 5 (a left shift of <= 4 leaks into bits < 4, a right
        // one of 2 into bits 6, 7)
        const __m256i q = load32(blk + 128 + 32 * h);
        const __m256i hs = p < 2 ? _mm256_slli_epi16(q, 4 - 2 * p) : p == 2 ? q : _mm256_srli_epi16(q, 2);
        return _mm256_or_si256(lo, _mm256_and_si256(hs, _mm256_set1_epi8(0x30)));
    }
    BACKPLANE_TARGET_AVX2 static void scales(const std::byte* blk, row_scales& rs) noexcept {
        const __m256i w = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 192)));
        dup_words(w, rs);
        rs.scm = _mm256_mullo_epi16(w, _mm256_set1_epi16(-offset));
        rs.d = f16_at(blk + 208);
    }
};

/// Whether the type has an offset (q3_K, q6_K) rather than minimums.
template <elem_type T> constexpr bool has_offset = T == elem_type::q3_K || T == elem_type::q6_K;

} // namespace backplane::cpu::fast::kquant

BACKPLANE_X86_KERNELS_END

#endif // BACKPLANE_HAS_X86_KERNELS
