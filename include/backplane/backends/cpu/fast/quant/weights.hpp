#pragma once
// The weight types of the quantized mul_mat as its kernels read them. Every type has
// blocks of 32 values (ggml's layouts, core/quants.hpp) and one constexpr description
// (format_of), from which generic decoders make each block's 32 unsigned codes u, in
// value order, with
//
//   offset types (c > 0):   value = d * (u - c)   q8_0 (u = q + 128, c = 128), q4_0 (8),
//                                                 q5_0 (16), iq4_nl (u = table + 128),
//                                                 mxfp4 (u = table + 12)
//   minimum types (c = 0):  value = d * u + m     q4_1, q5_1
//
// where d is the block's f16 scale, or for mxfp4 2^(e - 128) from its E8M0 byte (core's
// e8m0_to_f32_half; the table holds twice the E2M1 values). u is the unsigned operand of
// the kernels' u8 x s8 byte products; b's record carries what turns their sums into the
// signed ones (plan.hpp): corr = -c * sum(b) for offset types, s = d_b * sum(b) for the
// minimum types' m * s.
//
// Decoders: scalar (portable kernel), one block into a 256-bit vector (AVX2 kernel,
// AVX-512 panel packing), four blocks into two 512-bit vectors of their low and high
// halves and their scales (and minima) spread to the lanes of their sums (AVX-512
// mat-vec), and 16 blocks' scales from 16 gathered dwords (panel packing).

#include <backplane/backends/cpu/fast/jobs.hpp>
#include <backplane/backends/cpu/isa.hpp>
#include <backplane/core/quants.hpp>
#include <backplane/core/types.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#if BACKPLANE_HAS_X86_KERNELS
#include <backplane/backends/cpu/detail/x86_intrinsics.hpp>
#endif

namespace backplane::cpu::fast::quant {

using i64 = std::int64_t;

/// Where a block keeps its parts and how its codes become u (see the header comment).
struct weight_format {
    int bytes = 0;     ///< block bytes (0: not a type of these kernels)
    int qs = 0;        ///< offset of the codes: 32 int8 (bits 8) or 16 bytes of nibbles
    int bits = 4;      ///< 8 (q8_0), 4, or 5 (the fifth bits at qh)
    int qh = 0;        ///< offset of the fifth bits, a little-endian u32 (bits 5)
    int min = -1;      ///< offset of the f16 minimum m, -1: none
    int c = 0;         ///< the offset of u; 0 for the minimum types
    bool e8m0 = false; ///< the scale is an E8M0 byte at offset 0 (else an f16 at offset 0)
    const std::int8_t* table = nullptr; ///< code -> value (then u = value + c)

    /// Whether codes go through table: a flag, for GCC with -fsanitize=undefined does
    /// not take a test of the pointer as a constant expression.
    bool has_table = false;

    [[nodiscard]] constexpr bool has_min() const noexcept { return min >= 0; }
};

constexpr weight_format format_of(elem_type t) noexcept {
    switch (t) {
    case elem_type::q8_0: return {.bytes = 34, .qs = 2, .bits = 8, .c = 128};
    case elem_type::q4_0: return {.bytes = 18, .qs = 2, .c = 8};
    case elem_type::q4_1: return {.bytes = 20, .qs = 4, .min = 2};
    case elem_type::q5_0: return {.bytes = 22, .qs = 6, .bits = 5, .qh = 2, .c = 16};
    case elem_type::q5_1: return {.bytes = 24, .qs = 8, .bits = 5, .qh = 4, .min = 2};
    case elem_type::iq4_nl: return {.bytes = 18, .qs = 2, .c = 128, .table = iq4nl_values, .has_table = true};
    case elem_type::mxfp4: return {.bytes = 17, .qs = 1, .c = 12, .e8m0 = true, .table = mxfp4_values, .has_table = true};
    default: return {};
    }
}

/// True for the weight types of these kernels.
constexpr bool is_weight_type(elem_type t) noexcept { return format_of(t).bytes != 0; }

/// Calls f(std::integral_constant<elem_type, T>{}) for t (a weight type).
template <class F> void with_weight_type(elem_type t, F&& f) {
    switch (t) {
    case elem_type::q8_0: return f(std::integral_constant<elem_type, elem_type::q8_0>{});
    case elem_type::q4_0: return f(std::integral_constant<elem_type, elem_type::q4_0>{});
    case elem_type::q4_1: return f(std::integral_constant<elem_type, elem_type::q4_1>{});
    case elem_type::q5_0: return f(std::integral_constant<elem_type, elem_type::q5_0>{});
    case elem_type::q5_1: return f(std::integral_constant<elem_type, elem_type::q5_1>{});
    case elem_type::iq4_nl: return f(std::integral_constant<elem_type, elem_type::iq4_nl>{});
    default: return f(std::integral_constant<elem_type, elem_type::mxfp4>{});
    }
}

// ---------------------------------------------------------------------------------------
// Scalar

/// The block's scale d.
inline float block_scale(const weight_format& f, const std::byte* blk) noexcept {
    return f.e8m0 ? e8m0_to_f32_half(static_cast<std::uint8_t>(blk[0])) : f16_to_f32(jobs::load_f16(blk));
}
/// The block's minimum m (minimum types).
inline float block_min(const weight_format& f, const std::byte* blk) noexcept {
    return f16_to_f32(jobs::load_f16(blk + f.min));
}

/// The block's 32 codes u.
inline void block_codes(const weight_format& f, const std::byte* blk, std::uint8_t u[32]) noexcept {
    if (f.bits == 8) {
        for (int j = 0; j < 32; ++j) u[j] = static_cast<std::uint8_t>(static_cast<std::uint8_t>(blk[f.qs + j]) ^ 0x80u);
        return;
    }
    const std::uint32_t high = f.bits == 5 ? static_cast<std::uint32_t>(jobs::load_i32(blk + f.qh)) : 0u;
    for (int j = 0; j < 32; ++j) {
        const auto byte = static_cast<unsigned>(blk[f.qs + j % 16]);
        const unsigned code = (j < 16 ? byte & 0x0fu : byte >> 4) | ((high >> j) & 1u) << 4;
        u[j] = static_cast<std::uint8_t>(f.has_table ? f.table[code] + f.c : static_cast<int>(code));
    }
}

#if BACKPLANE_HAS_X86_KERNELS
BACKPLANE_X86_KERNELS_BEGIN

// ---------------------------------------------------------------------------------------
// One block per 256-bit vector (AVX2)

/// The table's 16 codes u = value + c, for vpshufb.
template <elem_type T> BACKPLANE_TARGET_AVX2 inline __m128i table_u() noexcept {
    constexpr weight_format f = format_of(T);
    return _mm_add_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(f.table)),
                        _mm_set1_epi8(static_cast<char>(f.c)));
}

/// The block's scale d.
template <elem_type T> BACKPLANE_TARGET_AVX2 inline float scale_avx2(const std::byte* blk) noexcept {
    if constexpr (format_of(T).e8m0)
        return e8m0_to_f32_half(static_cast<std::uint8_t>(blk[0]));
    else
        return _cvtsh_ss(jobs::load_f16(blk).bits);
}

/// The block's 32 codes u in value order.
template <elem_type T> BACKPLANE_TARGET_AVX2 inline __m256i codes_avx2(const std::byte* blk) noexcept {
    constexpr weight_format f = format_of(T);
    if constexpr (f.bits == 8) {
        return _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + f.qs)),
                                _mm256_set1_epi8(static_cast<char>(0x80)));
    } else {
        const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + f.qs));
        __m256i u = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(x, 4), x), _mm256_set1_epi8(0x0f));
        if constexpr (f.bits == 5) {
            // byte j takes byte j / 8 of the fifth bits, then tests its bit j % 8
            const __m256i sel = _mm256_setr_epi64x(0, 0x0101010101010101, 0x0202020202020202, 0x0303030303030303);
            const __m256i bit = _mm256_set1_epi64x(0x8040201008040201);
            const __m256i h = _mm256_shuffle_epi8(_mm256_set1_epi32(jobs::load_i32(blk + f.qh)), sel);
            u = _mm256_or_si256(u, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(h, bit), bit),
                                                    _mm256_set1_epi8(0x10)));
        }
        if constexpr (f.has_table) u = _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(table_u<T>()), u);
        return u;
    }
}

// ---------------------------------------------------------------------------------------
// AVX-512

/// The scales d of 16 blocks from the dwords at their starts.
template <elem_type T> BACKPLANE_TARGET_AVX512 inline __m512 scales16(__m512i w) noexcept {
    if constexpr (format_of(T).e8m0) { // 2^(e - 128): the float (e - 1) << 23, or a denormal for e < 2
        const __m512i e = _mm512_and_si512(w, _mm512_set1_epi32(0xff));
        const __mmask16 small = _mm512_cmplt_epi32_mask(e, _mm512_set1_epi32(2));
        const __m512i normal = _mm512_slli_epi32(_mm512_sub_epi32(e, _mm512_set1_epi32(1)), 23);
        return _mm512_castsi512_ps(
            _mm512_mask_blend_epi32(small, normal, _mm512_sllv_epi32(_mm512_set1_epi32(0x00200000), e)));
    } else {
        return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(w));
    }
}
/// The minima m of 16 blocks (minimum types: the f16 after d) from the same dwords.
BACKPLANE_TARGET_AVX512 inline __m512 mins16(__m512i w) noexcept {
    return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(w, 16)));
}

/// Four consecutive blocks of wb bytes (17 <= wb <= 24) are read as two 64-byte sources:
/// from o1 = wb % 2 bytes after block 0's start, and from o2 = 4 wb - 64, ending at block
/// 3's end. four_block_words<wb, at> is the word permutation index that puts the 16 bytes
/// at offset `at` of block g into 16-byte lane g, from the source where they lie wholly
/// and at an even offset (for odd wb, every other block's bytes start at an odd offset).
template <int wb> inline constexpr int source1_at = wb % 2;
template <int wb> inline constexpr int source2_at = 4 * wb - 64;
template <int wb, int at> inline constexpr std::array<std::uint16_t, 32> four_block_words = [] {
    std::array<std::uint16_t, 32> w{};
    for (int g = 0; g < 4; ++g) {
        const int off = g * wb + at;
        const int in1 = off - source1_at<wb>;
        const bool first = in1 >= 0 && in1 % 2 == 0 && in1 + 16 <= 64;
        const int word = first ? in1 / 2 : 32 + (off - source2_at<wb>) / 2;
        for (int i = 0; i < 8; ++i) w[static_cast<std::size_t>(8 * g + i)] = static_cast<std::uint16_t>(word + i);
    }
    return w;
}();

/// The two sources of nq <= 4 blocks from blk (see four_block_words); bytes past the nq
/// blocks are not read (zeros).
template <elem_type T, bool Full>
BACKPLANE_TARGET_AVX512 inline void four_block_sources(const std::byte* blk, i64 nq, __m512i& s1,
                                                       __m512i& s2) noexcept {
    constexpr int wb = format_of(T).bytes;
    constexpr i64 at1 = source1_at<wb>, at2 = source2_at<wb>;
    static_assert(wb >= 17 && wb <= 24, "four blocks span 65 to 96 bytes");
    if constexpr (Full) {
        s1 = _mm512_loadu_si512(blk + at1);
        s2 = _mm512_loadu_si512(blk + at2);
    } else {
        const auto low = [](i64 n) { return n >= 64 ? ~0ull : (1ull << n) - 1ull; };
        const i64 bytes = nq * wb; // > at1
        s1 = _mm512_maskz_loadu_epi8(low(bytes - at1), blk + at1);
        s2 = bytes > at2 ? _mm512_maskz_loadu_epi8(low(bytes - at2), blk + at2) : _mm512_setzero_si512();
    }
}

/// Codes of the blocks whose sources four_block_sources read (Full: four blocks), as lo
/// (block g's codes 0-15 in bytes 16g..16g+15) and hi (its codes 16-31). Lanes past the
/// blocks read hold codes of zeros (their b is zero).
template <elem_type T>
BACKPLANE_TARGET_AVX512 inline void codes4_avx512(__m512i s1, __m512i s2, __m512i& lo, __m512i& hi) noexcept {
    constexpr weight_format f = format_of(T);
    static_assert(f.bits != 8, "q8_0 has its own mat-vec");
    const __m512i x = _mm512_permutex2var_epi16(s1, _mm512_loadu_si512(four_block_words<f.bytes, f.qs>.data()), s2);
    const __m512i low4 = _mm512_set1_epi8(0x0f);
    lo = _mm512_and_si512(x, low4);
    hi = _mm512_and_si512(_mm512_srli_epi16(x, 4), low4);
    if constexpr (f.bits == 5) {
        // lane g: block g's fifth bits in bytes 0-3; byte j of lo tests bit j % 8 of byte
        // j / 8 (codes 0-15), of hi bit j % 8 of byte 2 + j / 8 (codes 16-31)
        const __m512i q = _mm512_permutex2var_epi16(s1, _mm512_loadu_si512(four_block_words<f.bytes, f.qh>.data()), s2);
        const __m512i bit = _mm512_set1_epi64(static_cast<long long>(0x8040201008040201ull));
        const __m512i sel_lo = _mm512_set_epi64(0x0101010101010101, 0, 0x0101010101010101, 0, 0x0101010101010101, 0,
                                                0x0101010101010101, 0);
        const __m512i sel_hi = _mm512_add_epi8(sel_lo, _mm512_set1_epi8(2));
        const __m512i b4 = _mm512_set1_epi8(0x10);
        lo = _mm512_mask_add_epi8(lo, _mm512_test_epi8_mask(_mm512_shuffle_epi8(q, sel_lo), bit), lo, b4);
        hi = _mm512_mask_add_epi8(hi, _mm512_test_epi8_mask(_mm512_shuffle_epi8(q, sel_hi), bit), hi, b4);
    }
    if constexpr (f.has_table) {
        const __m512i t = _mm512_broadcast_i32x4(table_u<T>());
        lo = _mm512_shuffle_epi8(t, lo);
        hi = _mm512_shuffle_epi8(t, hi);
    }
}

/// Dword i of a register to lanes 4i .. 4i + 3 (i < 4): four blocks' values to the lanes
/// of their dot products in the mat-vec.
BACKPLANE_TARGET_AVX512 inline __m512i spread4_idx() noexcept {
    return _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
}

/// The f16 types: the word permutation of four_block_sources' two sources that puts
/// block g's scale in words 4g..4g+3 and its minimum (minimum types; else the scale
/// again) in words 16 + 4g .. 16 + 4g + 3.
template <elem_type T> inline constexpr std::array<std::uint16_t, 32> four_block_scale_words = [] {
    constexpr weight_format f = format_of(T);
    constexpr int wb = f.bytes;
    static_assert(wb % 2 == 0, "f16 fields at even offsets of both sources");
    std::array<std::uint16_t, 32> w{};
    for (int g = 0; g < 4; ++g)
        for (int part = 0; part < 2; ++part) {
            const int off = g * wb + (part == 1 && f.has_min() ? f.min : 0);
            const bool first = off + 2 <= 64;
            const int word = first ? off / 2 : 32 + (off - source2_at<wb>) / 2;
            for (int i = 0; i < 4; ++i) w[static_cast<std::size_t>(16 * part + 4 * g + i)] = static_cast<std::uint16_t>(word);
        }
    return w;
}();

/// The scales d of the nq <= 4 blocks at blk (Full: nq = 4) whose sources are s1, s2,
/// block g's in lanes 4g..4g+3 (zero, or for mxfp4 a tiny value, past nq); for the
/// minimum types their minima m likewise in *m. The f16 types: one word permutation of
/// the sources. mxfp4: its first E8M0 byte lies before them, so the blocks are loaded
/// once more from their start; blocks 0-3 begin at bytes 0, 17, 34, 51, byte g of 128-bit
/// lane g, which one vpshufb spreads to the lane's dwords.
template <elem_type T, bool Full>
BACKPLANE_TARGET_AVX512 inline __m512 four_block_scales(const std::byte* blk, i64 nq, __m512i s1, __m512i s2,
                                                        __m512* m) noexcept {
    constexpr weight_format f = format_of(T);
    if constexpr (f.e8m0) {
        static_assert(f.bytes == 17, "E8M0 bytes at 17 g = 16 g + g");
        (void)s1;
        (void)s2;
        (void)m;
        const __m512i s0 = Full ? _mm512_loadu_si512(blk) : _mm512_maskz_loadu_epi8((1ull << (nq * f.bytes)) - 1ull, blk);
        // per dword of lane g: byte g, then three indices with the top bit set (zeros):
        // 0xffffff00 + g = -256 + g
        const __m512i pick = _mm512_setr_epi32(-256, -256, -256, -256, -255, -255, -255, -255, -254, -254, -254, -254,
                                               -253, -253, -253, -253);
        return scales16<T>(_mm512_shuffle_epi8(s0, pick));
    } else {
        (void)blk;
        (void)nq;
        const __m512i x = _mm512_permutex2var_epi16(s1, _mm512_loadu_si512(four_block_scale_words<T>.data()), s2);
        if constexpr (f.has_min()) *m = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(x, 1));
        else (void)m;
        return _mm512_cvtph_ps(_mm512_castsi512_si256(x));
    }
}

BACKPLANE_X86_KERNELS_END
#endif // BACKPLANE_HAS_X86_KERNELS

} // namespace backplane::cpu::fast::quant
