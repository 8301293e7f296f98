#pragma once
// Element types and their storage.
//
// Float types are stored element by element; quantized types in blocks (32 values, or
// super-blocks of 256 for the K-quants, the i-quants but iq4_nl and the ternary types),
// bit-compatible with ggml's types of the same name
// so that weights from GGUF files are used as they are. Row sizes of quantized tensors are
// therefore counted in blocks: a row of n values needs n / block_size blocks, and n must be
// a multiple of the block size. The block layouts beyond q8_0 and q4_0 and their
// quantizers are in quants.hpp, kquants.hpp and iquants.hpp; row conversions of every type in
// convert.hpp.

#include <backplane/core/detail/unfused.hpp>

#include <array>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

namespace backplane {

/// Element types. i32 is the index type (get_rows indices, rope positions, argmax); i64
/// holds 64-bit indices (set_rows' row numbers, as ggml's I64). The weight types after i64
/// are ggml's of the same names; q8_K is the activation type of the K-quants' dot products.
enum class elem_type : std::uint8_t {
    f32,
    f16,
    bf16,
    q8_0,
    q4_0,
    i32,
    i64,
    q4_1,
    q5_0,
    q5_1,
    q2_K,
    q3_K,
    q4_K,
    q5_K,
    q6_K,
    q8_K,
    iq4_nl,
    mxfp4,
    iq4_xs,
    iq3_xxs,
    iq3_s,
    iq2_xxs,
    iq2_xs,
    iq2_s,
    iq1_s,
    iq1_m,
    tq1_0,
    tq2_0,
};

inline constexpr std::size_t elem_type_count = 28;
inline constexpr std::array<elem_type, elem_type_count> all_elem_types = {
    elem_type::f32,    elem_type::f16,     elem_type::bf16,  elem_type::q8_0,    elem_type::q4_0,
    elem_type::i32,    elem_type::i64,     elem_type::q4_1,  elem_type::q5_0,    elem_type::q5_1,
    elem_type::q2_K,   elem_type::q3_K,    elem_type::q4_K,  elem_type::q5_K,    elem_type::q6_K,
    elem_type::q8_K,   elem_type::iq4_nl,  elem_type::mxfp4, elem_type::iq4_xs,  elem_type::iq3_xxs,
    elem_type::iq3_s,  elem_type::iq2_xxs, elem_type::iq2_xs, elem_type::iq2_s,  elem_type::iq1_s,
    elem_type::iq1_m,  elem_type::tq1_0,   elem_type::tq2_0};

/// 16-bit IEEE half and bfloat16 as distinct storage types (no arithmetic on purpose:
/// convert to float, compute, convert back).
struct f16_t {
    std::uint16_t bits;
    friend constexpr bool operator==(f16_t, f16_t) = default;
};
struct bf16_t {
    std::uint16_t bits;
    friend constexpr bool operator==(bf16_t, bf16_t) = default;
};

inline constexpr int qk8_0 = 32; ///< values per q8_0 block
inline constexpr int qk4_0 = 32; ///< values per q4_0 block

/// q8_0: 32 signed bytes and one f16 scale; value = d * qs[i].
struct block_q8_0 {
    f16_t d;
    std::int8_t qs[qk8_0];
};
/// q4_0: 32 4-bit values and one f16 scale; byte j holds value j in its low nibble and
/// value j + 16 in its high nibble; value = d * (nibble - 8).
struct block_q4_0 {
    f16_t d;
    std::uint8_t qs[qk4_0 / 2];
};
static_assert(sizeof(block_q8_0) == 34, "q8_0 block must match ggml's layout");
static_assert(sizeof(block_q4_0) == 18, "q4_0 block must match ggml's layout");

/// Static facts about an element type.
struct type_traits {
    std::string_view name;
    std::int64_t block_size;  ///< values per block (1 for non-quantized types)
    std::size_t type_size;    ///< bytes per block
    bool is_quantized;
    bool is_float;            ///< holds real numbers (f32, f16, bf16, quantized)
    /// f32 rows convert into it (from_float_row): what cpy and set_rows may write. As
    /// ggml's CPU (its from_float), every type but the i-quants of the lattice grids
    /// (iq3_xxs ... iq1_m), whose quantizers are searches for model files only.
    bool from_float = true;
};

namespace detail {
/// The traits of each elem_type, indexed by its value (a load, not a branch: these are
/// asked per tensor by the shape checks).
inline constexpr std::array<type_traits, elem_type_count + 1> type_table = {{
    {"f32", 1, 4, false, true},
    {"f16", 1, 2, false, true},
    {"bf16", 1, 2, false, true},
    {"q8_0", qk8_0, sizeof(block_q8_0), true, true},
    {"q4_0", qk4_0, sizeof(block_q4_0), true, true},
    {"i32", 1, 4, false, false},
    {"i64", 1, 8, false, false},
    {"q4_1", 32, 20, true, true},
    {"q5_0", 32, 22, true, true},
    {"q5_1", 32, 24, true, true},
    {"q2_K", 256, 84, true, true},
    {"q3_K", 256, 110, true, true},
    {"q4_K", 256, 144, true, true},
    {"q5_K", 256, 176, true, true},
    {"q6_K", 256, 210, true, true},
    {"q8_K", 256, 292, true, true},
    {"iq4_nl", 32, 18, true, true},
    {"mxfp4", 32, 17, true, true},
    {"iq4_xs", 256, 136, true, true},
    {"iq3_xxs", 256, 98, true, true, false},
    {"iq3_s", 256, 110, true, true, false},
    {"iq2_xxs", 256, 66, true, true, false},
    {"iq2_xs", 256, 74, true, true, false},
    {"iq2_s", 256, 82, true, true, false},
    {"iq1_s", 256, 50, true, true, false},
    {"iq1_m", 256, 56, true, true, false},
    {"tq1_0", 256, 54, true, true},
    {"tq2_0", 256, 66, true, true},
    {"?", 1, 0, false, false, false}, // any other value
}};
static_assert(static_cast<std::size_t>(elem_type::tq2_0) + 1 == elem_type_count, "type_table follows elem_type");
} // namespace detail

/// The most values and bytes a block of any type holds (the K-quants' super-blocks; q8_K).
inline constexpr std::int64_t max_block_size = 256;
inline constexpr std::size_t max_type_size = 292;

constexpr const type_traits& traits(elem_type t) noexcept {
    const auto i = static_cast<std::size_t>(t);
    return detail::type_table[i < elem_type_count ? i : elem_type_count];
}

/// True for the values elem_type names (a value cast from a wider integer may not be).
constexpr bool is_valid(elem_type t) noexcept { return static_cast<std::size_t>(t) < elem_type_count; }

constexpr std::string_view to_string(elem_type t) noexcept { return traits(t).name; }
constexpr std::int64_t block_size(elem_type t) noexcept { return traits(t).block_size; }
constexpr std::size_t type_size(elem_type t) noexcept { return traits(t).type_size; }
constexpr bool is_quantized(elem_type t) noexcept { return traits(t).is_quantized; }
/// Whether f32 rows convert into t (type_traits::from_float).
constexpr bool converts_from_float(elem_type t) noexcept { return traits(t).from_float; }

/// Bytes of a row of n values (n must be a multiple of the block size).
constexpr std::size_t row_size(elem_type t, std::int64_t n) noexcept {
    return type_size(t) * static_cast<std::size_t>(n / block_size(t));
}

/// Parses a type name ("f32", "q4_0", ...).
constexpr std::optional<elem_type> parse_elem_type(std::string_view s) noexcept {
    for (auto t : all_elem_types)
        if (to_string(t) == s) return t;
    return std::nullopt;
}

// ---------------------------------------------------------------------------------------
// Scalar conversions. Round to nearest, ties to even, like the hardware instructions
// (F16C, AVX512-BF16), so that every backend produces the same bits.

constexpr float f16_to_f32(f16_t h) noexcept {
    const std::uint32_t sign = static_cast<std::uint32_t>(h.bits & 0x8000u) << 16;
    std::uint32_t exp = (h.bits >> 10) & 0x1fu;
    std::uint32_t mant = h.bits & 0x3ffu;
    std::uint32_t bits;
    if (exp == 0x1f) { // inf / nan (a nan comes out quiet, as F16C's conversion does)
        bits = sign | 0x7f800000u | (mant << 13) | (mant != 0 ? 0x400000u : 0u);
    } else if (exp == 0) {
        if (mant == 0) {
            bits = sign;
        } else { // subnormal half: normalise
            int e = -1;
            do {
                ++e;
                mant <<= 1;
            } while ((mant & 0x400u) == 0);
            bits = sign | (static_cast<std::uint32_t>(127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13);
        }
    } else {
        bits = sign | ((exp + (127 - 15)) << 23) | (mant << 13);
    }
    return std::bit_cast<float>(bits);
}

constexpr f16_t f32_to_f16(float f) noexcept {
    const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
    const std::uint16_t sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
    const std::uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) { // inf or nan (keep nan quiet and non-zero)
        return {static_cast<std::uint16_t>(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u | ((ax >> 13) & 0x3ffu) : 0u))};
    }
    if (ax >= 0x477ff000u) return {static_cast<std::uint16_t>(sign | 0x7c00u)}; // rounds to inf
    if (ax < 0x38800000u) { // result is subnormal or zero: round at the subnormal step
        if (ax < 0x33000000u) return {sign}; // below half of the smallest subnormal
        const std::uint32_t e = ax >> 23;
        const std::uint32_t m = (ax & 0x7fffffu) | 0x800000u;
        const std::uint32_t shift = 126u - e; // 14 + (113 - e)
        std::uint32_t q = m >> shift;
        const std::uint32_t rem = m & ((1u << shift) - 1u);
        const std::uint32_t half = 1u << (shift - 1u);
        if (rem > half || (rem == half && (q & 1u))) ++q;
        return {static_cast<std::uint16_t>(sign | q)};
    }
    // normal: rebias exponent, round mantissa to 10 bits (a carry into the exponent is right)
    std::uint32_t r = ax - 0x38000000u; // exponent 127 -> 15
    const std::uint32_t rem = r & 0x1fffu;
    r >>= 13;
    if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) ++r;
    return {static_cast<std::uint16_t>(sign | r)};
}

constexpr float bf16_to_f32(bf16_t h) noexcept {
    return std::bit_cast<float>(static_cast<std::uint32_t>(h.bits) << 16);
}

constexpr bf16_t f32_to_bf16(float f) noexcept {
    const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) // nan: keep it a quiet nan
        return {static_cast<std::uint16_t>((x >> 16) | 0x40u)};
    const std::uint32_t rounded = x + 0x7fffu + ((x >> 16) & 1u);
    return {static_cast<std::uint16_t>(rounded >> 16)};
}

// ---------------------------------------------------------------------------------------
// q8_0 and q4_0. n is the number of values, a multiple of 32 (callers validate; these
// functions do not check on the hot path).

namespace detail {
/// The value of largest magnitude among x[0..n), the first of equals, its sign kept (0 when
/// none is larger than 0): what ggml's quantizers scale by.
inline float signed_max(const float* x, std::int64_t n) noexcept {
    float amax = 0.0f, vmax = 0.0f;
    for (std::int64_t j = 0; j < n; ++j)
        if (std::fabs(x[j]) > amax) {
            amax = std::fabs(x[j]);
            vmax = x[j];
        }
    return vmax;
}
} // namespace detail

namespace detail {
/// q8_0: d = max |x| / 127, codes round(x / d) by `round` (a function of a float).
template <class Round> void quantize_row_q8_0_by(const float* x, block_q8_0* y, std::int64_t n, Round round) noexcept {
    for (std::int64_t b = 0; b < n / qk8_0; ++b) {
        const float* xb = x + b * qk8_0;
        float amax = 0.0f;
        for (int j = 0; j < qk8_0; ++j) amax = std::fmax(amax, std::fabs(xb[j]));
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = f32_to_f16(d);
        for (int j = 0; j < qk8_0; ++j) y[b].qs[j] = static_cast<std::int8_t>(round(xb[j] * id));
    }
}
} // namespace detail

/// q8_0, a tie rounded to even, as ggml's vectorised CPU quantizer (cpy, set_rows) rounds.
inline void quantize_row_q8_0(const float* x, block_q8_0* y, std::int64_t n) noexcept {
    detail::quantize_row_q8_0_by(x, y, n, [](float v) { return std::nearbyint(v); });
}

/// q8_0, a tie rounded away from zero, as ggml's reference quantizer (quantize_row_q8_0_ref)
/// rounds, which is what llama-quantize writes; otherwise quantize_row_q8_0's bytes.
inline void quantize_row_q8_0_ties_away(const float* x, block_q8_0* y, std::int64_t n) noexcept {
    detail::quantize_row_q8_0_by(x, y, n, [](float v) { return std::round(v); });
}

inline void dequantize_row_q8_0(const block_q8_0* x, float* y, std::int64_t n) noexcept {
    for (std::int64_t b = 0; b < n / qk8_0; ++b) {
        const float d = f16_to_f32(x[b].d);
        for (int j = 0; j < qk8_0; ++j) y[b * qk8_0 + j] = d * static_cast<float>(x[b].qs[j]);
    }
}

inline void quantize_row_q4_0(const float* x, block_q4_0* y, std::int64_t n) noexcept {
    for (std::int64_t b = 0; b < n / qk4_0; ++b) {
        const float* xb = x + b * qk4_0;
        // the value of largest magnitude maps to -8, so its sign is kept exactly
        const float d = detail::signed_max(xb, qk4_0) / -8.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = f32_to_f16(d);
        float p[qk4_0]; // the products, rounded before 8.5 is added (no FMA)
        for (int j = 0; j < qk4_0; ++j) p[j] = xb[j] * id;
        detail::unfused(p);
        for (int j = 0; j < qk4_0 / 2; ++j) {
            const float v0 = p[j] + 8.5f;
            const float v1 = p[j + qk4_0 / 2] + 8.5f;
            const auto q0 = static_cast<std::uint8_t>(v0 < 15.0f ? static_cast<int>(v0) : 15);
            const auto q1 = static_cast<std::uint8_t>(v1 < 15.0f ? static_cast<int>(v1) : 15);
            y[b].qs[j] = static_cast<std::uint8_t>(q0 | (q1 << 4));
        }
    }
}

inline void dequantize_row_q4_0(const block_q4_0* x, float* y, std::int64_t n) noexcept {
    for (std::int64_t b = 0; b < n / qk4_0; ++b) {
        const float d = f16_to_f32(x[b].d);
        for (int j = 0; j < qk4_0 / 2; ++j) {
            y[b * qk4_0 + j] = d * static_cast<float>((x[b].qs[j] & 0x0f) - 8);
            y[b * qk4_0 + j + qk4_0 / 2] = d * static_cast<float>((x[b].qs[j] >> 4) - 8);
        }
    }
}

} // namespace backplane
