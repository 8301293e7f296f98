#pragma once
// q4_K, q5_K and q6_K super-blocks decoded in 512-bit registers, 64 codes per step (the
// AVX-512 mat-vec tiles, gemv_avx512.hpp). zdec<T>::codes(blk, k) gives the unsigned codes
// of step k (k = 0..3) as 64 bytes; zdec<T>::scale(zs, k) the integer scale of each of
// their 16-bit word pairs, for vpdpwssd.
//
// The steps follow the weights' storage, not value order, so that each is one load and a
// few bit operations; b's codes are stored in the same order (plan.hpp, b_order):
//
//   q4_K, q5_K: step k = sub-blocks (a, a + 2), a = 4 (k / 2) + k % 2: the low (k even)
//               or high nibbles of 64 bytes of qs; b's records swap the middle 32-byte
//               quarters of each 128 values (b_order::pairs);
//   q2_K, q3_K, q6_K: step k = values 64k .. 64k + 63 (sub-blocks 4k .. 4k + 3 of 16
//               values, one per 128-bit lane), value order.
//
// Scales come from one register per row and super-block: q4_K / q5_K the 16 bytes
// [sc0..7, m0..7] in every 128-bit lane, spread to words by vpshufb; q2_K, q3_K and q6_K
// the 16 scales as words, spread by vpermw (zscale_lanes). q2_K's minimums dmin * m[j]
// are 16 floats per row (zrow_scales::mf), met with b's ex[] where the row's super-block
// ends. Bit fields move with 16-bit shifts whose bits leaking
// across byte boundaries land outside the mask that follows (noted per case).

#include <backplane/core/detail/unroll.hpp>
#include <backplane/backends/cpu/fast/kquant/decode_avx2.hpp>
#include <backplane/backends/cpu/fast/kquant/plan.hpp>
#include <backplane/backends/cpu/isa.hpp>
#include <backplane/core/kquants.hpp>

#include <cstddef>
#include <cstdint>

#if BACKPLANE_HAS_X86_KERNELS
#include <backplane/backends/cpu/detail/x86_intrinsics.hpp>

BACKPLANE_X86_KERNELS_BEGIN

namespace backplane::cpu::fast::kquant {

/// A row's super-block scales in the forms the 512-bit tiles use.
struct zrow_scales {
    __m512i src;  ///< what scale() spreads (see the header comment)
    __m256i scm;  ///< offset types: c * sc[j] per 16 values, met with b's bsum[] (subtracted)
    __m512 mf;    ///< q2_K: dmin * m[j] per 16 values, met with b's ex[] (subtracted)
    __m512 d;     ///< the super-block's scale in every lane (q4_K / q5_K: zmins::d)
};

/// q4_K / q5_K's per-row values of a 4-row tile in f32, row r's in 128-bit lane r:
/// dmin * m[j] for j = 0..3 (lo) and 4..7 (hi), met with b's ex[] for all rows at once,
/// and d in every float of the lane.
struct zmins {
    __m512 lo, hi;
    __m512 d;
};

template <elem_type T> struct zdec;

BACKPLANE_TARGET_AVX512 inline __m512i load64(const std::byte* p) noexcept { return _mm512_loadu_si512(p); }
/// 32 bytes at p in both 256-bit halves.
BACKPLANE_TARGET_AVX512 inline __m512i load32x2(const std::byte* p) noexcept {
    return _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
/// Words 16-bit shift counts: lo in the low 256 bits, hi in the high ones.
BACKPLANE_TARGET_AVX512 inline __m512i halves16(short lo, short hi) noexcept {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi16(lo)), _mm256_set1_epi16(hi), 1);
}
/// A vpshufb index taking byte a as a zero-extended word in the low 256 bits, byte b in
/// the high ones.
BACKPLANE_TARGET_AVX512 inline __m512i spread_idx(int a, int b) noexcept {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi16(static_cast<short>(0x8000 | a))),
                              _mm256_set1_epi16(static_cast<short>(0x8000 | b)), 1);
}

BACKPLANE_TARGET_AVX512 inline __m128i load16(const std::byte* p) noexcept {
    return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}
/// A 16-byte pattern in every 128-bit lane.
BACKPLANE_TARGET_AVX512 inline __m512i lanes16(__m128i v) noexcept { return _mm512_broadcast_i32x4(v); }
/// Dword indices 4l .. 4l + 3 in every lane: lane l of a register, broadcast.
BACKPLANE_TARGET_AVX512 inline __m512i lane_idx(int l) noexcept {
    return _mm512_add_epi32(_mm512_set1_epi32(4 * l), lanes16(_mm_setr_epi32(0, 1, 2, 3)));
}

/// q4_K and q5_K, R = 4 rows at once (super-blocks blk[r]; tile_zmm_min's tile): the
/// 16-byte heads [d, dmin, scales[12]] side by side in the 128-bit lanes of one register,
/// unpacked there into [sc0..7, m0..7] per lane (decode_avx2.hpp's scale_min_bytes, in
/// vector form), the f16 scales widened together; then each row's lane is spread.
template <int R>
BACKPLANE_TARGET_AVX512 inline void zscales_q4q5(const std::byte* const* blk, zrow_scales* zs, zmins& zm) noexcept {
    static_assert(R == 4, "q4_K / q5_K tiles have 4 rows");
    __m512i h = _mm512_castsi128_si512(load16(blk[0]));
    h = _mm512_inserti32x4(h, load16(blk[1]), 1);
    h = _mm512_inserti32x4(h, load16(blk[2]), 2);
    h = _mm512_inserti32x4(h, load16(blk[3]), 3);
    // scales[i] is byte 4 + i of a lane. sc0-3 = s0-3 & 63, m0-3 = s4-7 & 63; sc4-7 = s8-11
    // & 15 | (s0-3 >> 6) << 4, m4-7 = s8-11 >> 4 | (s4-7 >> 6) << 4. The 16-bit shifts leak
    // bits of the neighbouring byte outside each mask.
    const __m512i x = _mm512_shuffle_epi8(h, lanes16(_mm_setr_epi8(4, 5, 6, 7, 12, 13, 14, 15, 8, 9, 10, 11, 12, 13, 14, 15)));
    const __m512i y = _mm512_shuffle_epi8(h, lanes16(_mm_setr_epi8(-1, -1, -1, -1, 4, 5, 6, 7, -1, -1, -1, -1, 8, 9, 10, 11)));
    const __m512i low = _mm512_and_si512(x, lanes16(_mm_setr_epi8(63, 63, 63, 63, 15, 15, 15, 15, 63, 63, 63, 63, 0, 0, 0, 0)));
    const __m512i nib = _mm512_and_si512(_mm512_srli_epi16(x, 4), lanes16(_mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 15, 15, 15, 15)));
    const __m512i top = _mm512_and_si512(_mm512_srli_epi16(y, 2), lanes16(_mm_setr_epi8(0, 0, 0, 0, 48, 48, 48, 48, 0, 0, 0, 0, 48, 48, 48, 48)));
    const __m512i v = _mm512_or_si512(_mm512_or_si512(low, nib), top);
    // f16 d (bytes 0-1) and dmin (2-3) of each lane to f32, float i holding lane i / 4's:
    // the word in all 4 dwords' low halves, then vpmovqd keeps a dword per qword
    const __m512 d = _mm512_cvtph_ps(_mm512_cvtepi64_epi32(
        _mm512_shuffle_epi8(h, lanes16(_mm_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1)))));
    const __m512 dmin = _mm512_cvtph_ps(_mm512_cvtepi64_epi32(
        _mm512_shuffle_epi8(h, lanes16(_mm_setr_epi8(2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3)))));
    // minimums 0-3 and 4-7 of each lane as dwords, times dmin
    zm.lo = _mm512_mul_ps(dmin, _mm512_cvtepi32_ps(_mm512_shuffle_epi8(
        v, lanes16(_mm_setr_epi8(8, -1, -1, -1, 9, -1, -1, -1, 10, -1, -1, -1, 11, -1, -1, -1)))));
    zm.hi = _mm512_mul_ps(dmin, _mm512_cvtepi32_ps(_mm512_shuffle_epi8(
        v, lanes16(_mm_setr_epi8(12, -1, -1, -1, 13, -1, -1, -1, 14, -1, -1, -1, 15, -1, -1, -1)))));
    zm.d = d;
BACKPLANE_UNROLL(4)
    for (int r = 0; r < R; ++r) zs[r].src = _mm512_permutexvar_epi32(lane_idx(r), v);
}
/// Step k's sub-blocks (a, a + 2), a = 4 (k / 2) + k % 2: each scale as a word.
BACKPLANE_TARGET_AVX512 inline __m512i zscale_pairs(const zrow_scales& zs, int k) noexcept {
    const int a = 4 * (k / 2) + k % 2;
    return _mm512_shuffle_epi8(zs.src, spread_idx(a, a + 2));
}

// q4_K: qs[128] @16.
template <> struct zdec<elem_type::q4_K> {
    BACKPLANE_TARGET_AVX512 static __m512i codes(const std::byte* blk, int k) noexcept {
        const __m512i x = load64(blk + 16 + 64 * (k / 2));
        return _mm512_and_si512(k % 2 ? _mm512_srli_epi16(x, 4) : x, _mm512_set1_epi8(0x0f));
    }
    template <int R>
    BACKPLANE_TARGET_AVX512 static void scales(const std::byte* const* blk, zrow_scales* zs, zmins& zm) noexcept {
        zscales_q4q5<R>(blk, zs, zm);
    }
    BACKPLANE_TARGET_AVX512 static __m512i scale(const zrow_scales& zs, int k) noexcept { return zscale_pairs(zs, k); }
};

// q5_K: qh[32] @16 (fifth bit of sub-block j: bit j), qs[128] @48.
template <> struct zdec<elem_type::q5_K> {
    BACKPLANE_TARGET_AVX512 static __m512i codes(const std::byte* blk, int k) noexcept {
        const __m512i x = load64(blk + 48 + 64 * (k / 2));
        const __m512i lo = _mm512_and_si512(k % 2 ? _mm512_srli_epi16(x, 4) : x, _mm512_set1_epi8(0x0f));
        // bits a and a + 2 to bit 4: qh in the low 256 bits and qh >> 2 in the high ones
        // (the same for every step), then bit a of that to bit 4, a = 0, 1, 4, 5 (16-bit
        // shifts: the bits leaking across bytes land outside bit 4)
        const __m512i h = _mm512_srlv_epi16(load32x2(blk + 16), halves16(0, 2));
        const __m512i hs = k == 0 ? _mm512_slli_epi16(h, 4)
                         : k == 1 ? _mm512_slli_epi16(h, 3)
                         : k == 2 ? h
                                  : _mm512_srli_epi16(h, 1);
        return _mm512_ternarylogic_epi32(lo, hs, _mm512_set1_epi8(0x10), 0xf8); // lo | (hs & 0x10)
    }
    template <int R>
    BACKPLANE_TARGET_AVX512 static void scales(const std::byte* const* blk, zrow_scales* zs, zmins& zm) noexcept {
        zscales_q4q5<R>(blk, zs, zm);
    }
    BACKPLANE_TARGET_AVX512 static __m512i scale(const zrow_scales& zs, int k) noexcept { return zscale_pairs(zs, k); }
};

/// The 16-value types: step k's sub-blocks 4k .. 4k + 3 (one per 128-bit lane), each
/// scale (a word of zs.src) in every word of its lane.
BACKPLANE_TARGET_AVX512 inline __m512i zscale_lanes(const zrow_scales& zs, int k) noexcept {
    const short j = static_cast<short>(4 * k);
    const __m512i idx = _mm512_inserti64x4(
        _mm512_castsi256_si512(_mm256_setr_m128i(_mm_set1_epi16(j), _mm_set1_epi16(static_cast<short>(j + 1)))),
        _mm256_setr_m128i(_mm_set1_epi16(static_cast<short>(j + 2)), _mm_set1_epi16(static_cast<short>(j + 3))), 1);
    return _mm512_permutexvar_epi16(idx, zs.src);
}

/// 2-bit codes of values 64k .. 64k + 63 from the 64 bytes of q2_K / q3_K's qs at qs:
/// code j is bits 2 ((j % 128) / 32) of byte 32 (j / 128) + j % 32 (the 16-bit shifts
/// leak into bits >= 2 of a byte, masked).
BACKPLANE_TARGET_AVX512 inline __m512i zcodes_2bit(const std::byte* qs, int k) noexcept {
    const __m512i x = load32x2(qs + 32 * (k / 2));
    const auto sh = static_cast<short>(4 * (k % 2));
    return _mm512_and_si512(_mm512_srlv_epi16(x, halves16(sh, static_cast<short>(sh + 2))), _mm512_set1_epi8(3));
}

/// The offset types (q3_K, q6_K): a row's 16 signed scales w (words) for zscale_lanes,
/// c * w for the offset term (traits_of(T).offset = c), and d.
template <elem_type T>
BACKPLANE_TARGET_AVX512 inline void zoffset_scales(zrow_scales& zs, __m256i w, float d) noexcept {
    zs.src = _mm512_castsi256_si512(w);
    zs.scm = _mm256_mullo_epi16(w, _mm256_set1_epi16(static_cast<short>(traits_of(T).offset)));
    zs.d = _mm512_set1_ps(d);
}

// q2_K: scales[16] @0 (scale low nibble, minimum high), qs[64] @16, d @80, dmin @82.
template <> struct zdec<elem_type::q2_K> {
    BACKPLANE_TARGET_AVX512 static __m512i codes(const std::byte* blk, int k) noexcept { return zcodes_2bit(blk + 16, k); }
    template <int R>
    BACKPLANE_TARGET_AVX512 static void scales(const std::byte* const* blk, zrow_scales* zs, zmins&) noexcept {
BACKPLANE_UNROLL(4)
        for (int r = 0; r < R; ++r) {
            const __m128i v = load16(blk[r]);
            const __m128i low4 = _mm_set1_epi8(0x0f);
            zs[r].src = _mm512_castsi256_si512(_mm256_cvtepu8_epi16(_mm_and_si128(v, low4)));
            const __m512 m = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_and_si128(_mm_srli_epi16(v, 4), low4)));
            zs[r].mf = _mm512_mul_ps(m, _mm512_set1_ps(f16_at(blk[r] + 82)));
            zs[r].d = _mm512_set1_ps(f16_at(blk[r] + 80));
        }
    }
    BACKPLANE_TARGET_AVX512 static __m512i scale(const zrow_scales& zs, int k) noexcept { return zscale_lanes(zs, k); }
};

// q3_K: hmask[32] @0, qs[64] @32, scales[12] @96, d @108; codes offset by 4.
template <> struct zdec<elem_type::q3_K> {
    BACKPLANE_TARGET_AVX512 static __m512i codes(const std::byte* blk, int k) noexcept {
        // the third bit: bit 2k (low 256 bits) or 2k + 1 (high) of hmask[j % 32] to bit 2;
        // left by 2 or 1 for k = 0 (leaking into bits < 2), right by 2k - 2 and 2k - 1
        // otherwise (leaking into bits >= 8 - 5 = 3)
        const __m512i h = load32x2(blk);
        const __m512i hs = k == 0 ? _mm512_sllv_epi16(h, halves16(2, 1))
                                  : _mm512_srlv_epi16(h, halves16(static_cast<short>(2 * k - 2), static_cast<short>(2 * k - 1)));
        return _mm512_ternarylogic_epi32(zcodes_2bit(blk + 32, k), hs, _mm512_set1_epi8(0x04), 0xf8); // lo | (hs & 4)
    }
    template <int R>
    BACKPLANE_TARGET_AVX512 static void scales(const std::byte* const* blk, zrow_scales* zs, zmins&) noexcept {
BACKPLANE_UNROLL(4)
        for (int r = 0; r < R; ++r)
            zoffset_scales<elem_type::q3_K>(zs[r], _mm256_cvtepi8_epi16(dec<elem_type::q3_K>::scale_bytes(blk[r])),
                                            f16_at(blk[r] + 108));
    }
    BACKPLANE_TARGET_AVX512 static __m512i scale(const zrow_scales& zs, int k) noexcept { return zscale_lanes(zs, k); }
};

// q6_K: ql[128] @0, qh[64] @128, scales[16] @192, d @208 (layout in decode_avx2.hpp).
// Step k = (h, nibble) = (k / 2, k % 2): low 4 bits from the nibble of ql[64h .. 64h + 63],
// high 2 bits from qh[32h .. 32h + 31] at bits 2p, p = 2 (k % 2) + (upper 256 bits).
template <> struct zdec<elem_type::q6_K> {
    BACKPLANE_TARGET_AVX512 static __m512i codes(const std::byte* blk, int k) noexcept {
        const int h = k / 2;
        const __m512i x = load64(blk + 64 * h);
        const __m512i lo = _mm512_and_si512(k % 2 ? _mm512_srli_epi16(x, 4) : x, _mm512_set1_epi8(0x0f));
        // bits 2p, 2p + 1 to 4, 5: left by 4, 2 (leaking into bits < 4) or right by 0, 2
        // (leaking into bits 6, 7)
        const __m512i q = load32x2(blk + 128 + 32 * h);
        const __m512i hs = k % 2 ? _mm512_srlv_epi16(q, halves16(0, 2)) : _mm512_sllv_epi16(q, halves16(4, 2));
        return _mm512_ternarylogic_epi32(lo, hs, _mm512_set1_epi8(0x30), 0xf8); // lo | (hs & 0x30)
    }
    template <int R>
    BACKPLANE_TARGET_AVX512 static void scales(const std::byte* const* blk, zrow_scales* zs, zmins&) noexcept {
BACKPLANE_UNROLL(4)
        for (int r = 0; r < R; ++r)
            zoffset_scales<elem_type::q6_K>(zs[r], _mm256_cvtepi8_epi16(load16(blk[r] + 192)), f16_at(blk[r] + 208));
    }
    BACKPLANE_TARGET_AVX512 static __m512i scale(const zrow_scales& zs, int k) noexcept { return zscale_lanes(zs, k); }
};

/// The types whose minimum terms the tiles sum for all rows at once (zmins).
template <elem_type T> constexpr bool has_zmins = T == elem_type::q4_K || T == elem_type::q5_K;

} // namespace backplane::cpu::fast::kquant

BACKPLANE_X86_KERNELS_END

#endif // BACKPLANE_HAS_X86_KERNELS
