#pragma once
// Block formats of GGUF weight types beyond q8_0 and q4_0, with their reference
// quantizers and dequantizers: q4_1, q5_0, q5_1, iq4_nl and mxfp4 (32 values per block).
// Layouts are byte for byte ggml's types of the same name, so a GGUF file's bytes are
// used as they are. The quantizers compute what ggml's reference row quantizers
// (quantize_row_<type>_ref) compute, bit for bit on the same input; where ggml reads
// memory it never wrote or converts out of range, the difference is noted at the function.
//
// The nibble layout of every format here: byte j of qs holds value j in its low nibble and
// value j + 16 in its high nibble. For the 5-bit formats, bit j of qh is the fifth bit of
// value j and bit j + 16 that of value j + 16.
//
// n (values per row) must be a multiple of 32; callers validate.

#include <backplane/core/detail/unfused.hpp>
#include <backplane/core/types.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace backplane {

inline constexpr int qk_small = 32; ///< values per block of every format here

/// q4_1: 4-bit values with a scale and a minimum; value = d * q + m.
struct block_q4_1 {
    f16_t d, m;
    std::uint8_t qs[qk_small / 2];
};
/// q5_0: 5-bit values with a scale; value = d * (q - 16).
struct block_q5_0 {
    f16_t d;
    std::uint8_t qh[4]; ///< the fifth bits, a little-endian u32
    std::uint8_t qs[qk_small / 2];
};
/// q5_1: 5-bit values with a scale and a minimum; value = d * q + m.
struct block_q5_1 {
    f16_t d, m;
    std::uint8_t qh[4];
    std::uint8_t qs[qk_small / 2];
};
/// iq4_nl: 4-bit indices into a fixed non-linear table; value = d * iq4nl_values[q].
struct block_iq4_nl {
    f16_t d;
    std::uint8_t qs[qk_small / 2];
};
/// mxfp4: 4-bit E2M1 values sharing a power-of-two scale (E8M0 exponent e);
/// value = mxfp4_values[q] * 2^(e - 128) (the table holds twice the E2M1 values).
struct block_mxfp4 {
    std::uint8_t e;
    std::uint8_t qs[qk_small / 2];
};
static_assert(sizeof(block_q4_1) == 20 && sizeof(block_q5_0) == 22 && sizeof(block_q5_1) == 24,
              "q4_1, q5_0 and q5_1 blocks must match ggml's layouts");
static_assert(sizeof(block_iq4_nl) == 18 && sizeof(block_mxfp4) == 17, "iq4_nl and mxfp4 blocks must match ggml's layouts");

/// iq4_nl's 16 values, ascending.
inline constexpr std::int8_t iq4nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                                 1,    13,   25,  38,  53,  69,  89,  113};
/// mxfp4's 16 values: twice E2M1's (codes 8-15 are the negatives of 0-7, 8 a negative zero).
inline constexpr std::int8_t mxfp4_values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

/// 2^(e - 128): half of the E8M0 exponent e's value (mxfp4's table is doubled); e 0 and 1
/// are the denormals 2^-128 and 2^-127.
constexpr float e8m0_to_f32_half(std::uint8_t e) noexcept {
    const std::uint32_t bits = e < 2 ? std::uint32_t{0x00200000u} << e : static_cast<std::uint32_t>(e - 1) << 23;
    return std::bit_cast<float>(bits);
}

namespace detail {

/// Minimum and maximum of a block.
inline void min_max(const float* x, float& lo, float& hi) noexcept {
    lo = std::numeric_limits<float>::max();
    hi = -std::numeric_limits<float>::max();
    for (int j = 0; j < qk_small; ++j) {
        if (x[j] < lo) lo = x[j];
        if (x[j] > hi) hi = x[j];
    }
}

/// Packs 32 codes of up to 5 bits: low nibbles into qs, fifth bits into qh (when given).
inline void pack_codes(const std::uint8_t* q, std::uint8_t* qs, std::uint8_t* qh) noexcept {
    std::uint32_t high = 0;
    for (int j = 0; j < qk_small / 2; ++j) {
        const std::uint8_t lo = q[j], hi = q[j + qk_small / 2];
        qs[j] = static_cast<std::uint8_t>((lo & 0x0fu) | ((hi & 0x0fu) << 4));
        high |= static_cast<std::uint32_t>((lo >> 4) & 1u) << j;
        high |= static_cast<std::uint32_t>((hi >> 4) & 1u) << (j + qk_small / 2);
    }
    if (qh != nullptr) std::memcpy(qh, &high, sizeof high);
}

/// The fifth bits of a block's 32 codes (qh as a little-endian u32).
inline std::uint32_t fifth_bits(const std::uint8_t* qh) noexcept {
    std::uint32_t high;
    std::memcpy(&high, qh, sizeof high);
    return high;
}

/// Code j (0..31) of a block: its nibble, plus bit j of `high` as its fifth bit.
inline int code(const std::uint8_t* qs, std::uint32_t high, int j) noexcept {
    const int half = qk_small / 2;
    const int q = j < half ? (qs[j] & 0x0f) : (qs[j - half] >> 4);
    return q | static_cast<int>((high >> j) & 1u) << 4;
}

/// The index of iq4nl_values nearest to x (a tie takes the upper one), as ggml's
/// best_index_int8. x is a product (an inverse scale times a value): it is rounded before
/// the distances subtract from it (unfused.hpp).
inline int nearest_iq4nl(float x) noexcept {
    x = unfused(x);
    const std::int8_t* v = iq4nl_values;
    if (x <= v[0]) return 0;
    if (x >= v[15]) return 15;
    int lo = 0, hi = 15;
    while (hi - lo > 1) {
        const int mid = (lo + hi) / 2;
        (x < v[mid] ? hi : lo) = mid;
    }
    return x - v[hi - 1] < v[hi] - x ? hi - 1 : hi;
}

/// The weighted fit of iq4_nl codes to a block at inverse scale id, in ggml's order of
/// operations: each value's nearest table index to id * x (stored in q when given), and
/// the sums sum w v x and sum w v^2 over the table values v, weights w = x^2.
struct iq4nl_fit {
    float sumqx = 0.0f, sumq2 = 0.0f;

    iq4nl_fit(const float* x, float id, std::uint8_t* q = nullptr) noexcept {
        for (int j = 0; j < qk_small; ++j) {
            const int l = nearest_iq4nl(id * x[j]);
            if (q != nullptr) q[j] = static_cast<std::uint8_t>(l);
            const float v = static_cast<float>(iq4nl_values[l]);
            const float w = x[j] * x[j];
            sumqx += unfused(w * v * x[j]);
            sumq2 += unfused(w * v * v);
        }
    }
    /// The least-squares scale of these codes (0 when they are all zero-weighted).
    [[nodiscard]] float scale() const noexcept { return sumq2 > 0.0f ? sumqx / sumq2 : 0.0f; }
};

/// ggml's scale search of iq4_nl's codes for a block of 32 without importance weights:
/// the fit of the first scale, which maps the value of largest magnitude to the table's
/// top (+127), then 15 more inverse scales (k - 127) / max for k in [-7, 7]; the refit
/// d = sum(w q x) / sum(w q^2) (w = x^2) of the codes with the largest
/// (sum w q x)^2 / sum(w q^2), the first of equals. 0 for a block of magnitudes below
/// 1e-15. (quantize_row_iq4_nl_search's scale, and iq4_xs's of each sub-block.)
inline float iq4nl_searched_scale(const float* xb) noexcept {
    const float vmax = signed_max(xb, qk_small);
    if (std::fabs(vmax) < 1e-15f) return 0.0f;
    const float top = -static_cast<float>(iq4nl_values[0]);
    const iq4nl_fit first(xb, 1.0f / (vmax / top));
    float d = first.scale();
    float best = d * first.sumqx;
    for (int k = -7; k <= 7; ++k) {
        const iq4nl_fit f(xb, static_cast<float>(k + iq4nl_values[0]) / vmax);
        if (f.sumq2 > 0.0f && f.sumqx * f.sumqx > best * f.sumq2) {
            d = f.sumqx / f.sumq2;
            best = d * f.sumqx;
        }
    }
    return d;
}

/// The index of mxfp4_values whose value times d is nearest to x (a tie takes the lower).
/// d is a power of two, so each value times d is exact: fused into the subtraction or not,
/// the distances are the same.
inline int nearest_mxfp4(float x, float d) noexcept {
    int best = 0;
    float best_err = std::fabs(static_cast<float>(mxfp4_values[0]) * d - x);
    for (int i = 1; i < 16; ++i) {
        const float err = std::fabs(static_cast<float>(mxfp4_values[i]) * d - x);
        if (err < best_err) {
            best = i;
            best_err = err;
        }
    }
    return best;
}

} // namespace detail

// ---------------------------------------------------------------------------------------
// Quantizers

namespace detail {
/// q4_1 and q5_1: d = (max - min) / levels, m = min, codes (x - min) / d rounded half up,
/// at most `levels` (ggml's q5_1 does not clamp, and its codes never pass 31 either).
template <int levels, class Block> void quantize_row_min_step(const float* x, Block* y, std::int64_t n) noexcept {
    for (std::int64_t b = 0; b < n / qk_small; ++b) {
        const float* xb = x + b * qk_small;
        float lo, hi;
        min_max(xb, lo, hi);
        const float d = (hi - lo) / static_cast<float>(levels);
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = f32_to_f16(d);
        y[b].m = f32_to_f16(lo);
        float p[qk_small]; // the products, rounded before 0.5 is added (no FMA)
        for (int j = 0; j < qk_small; ++j) p[j] = (xb[j] - lo) * id;
        unfused(p);
        std::uint8_t q[qk_small];
        for (int j = 0; j < qk_small; ++j) {
            const int v = static_cast<std::int8_t>(p[j] + 0.5f);
            q[j] = static_cast<std::uint8_t>(v < levels ? v : levels);
        }
        if constexpr (requires { y[b].qh; })
            pack_codes(q, y[b].qs, y[b].qh);
        else
            pack_codes(q, y[b].qs, nullptr);
    }
}
} // namespace detail

inline void quantize_row_q4_1(const float* x, block_q4_1* y, std::int64_t n) noexcept {
    detail::quantize_row_min_step<15>(x, y, n);
}

inline void quantize_row_q5_1(const float* x, block_q5_1* y, std::int64_t n) noexcept {
    detail::quantize_row_min_step<31>(x, y, n);
}

inline void quantize_row_q5_0(const float* x, block_q5_0* y, std::int64_t n) noexcept {
    for (std::int64_t b = 0; b < n / qk_small; ++b) {
        const float* xb = x + b * qk_small;
        const float d = detail::signed_max(xb, qk_small) / -16.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = f32_to_f16(d);
        float p[qk_small]; // the products, rounded before 16.5 is added (no FMA)
        for (int j = 0; j < qk_small; ++j) p[j] = xb[j] * id;
        detail::unfused(p);
        std::uint8_t q[qk_small];
        for (int j = 0; j < qk_small; ++j) {
            const int v = static_cast<std::int8_t>(p[j] + 16.5f);
            q[j] = static_cast<std::uint8_t>(v < 31 ? v : 31);
        }
        detail::pack_codes(q, y[b].qs, y[b].qh);
    }
}

/// ggml's reference iq4_nl quantizer (quantize_row_iq4_nl_ref: no importance weights, no
/// scale search), what ggml's CPU cpy and set_rows write: the scale maps the value of
/// largest magnitude to the table's end (-127), the refit d = sum(w q x) / sum(w q^2) with
/// w = x^2 is stored, and each value takes the table entry nearest to x / (first scale). A
/// block of magnitudes below 1e-15 stores d = 0 and index 0 everywhere (ggml leaves those
/// nibbles as whatever the previous block left).
inline void quantize_row_iq4_nl(const float* x, block_iq4_nl* y, std::int64_t n) noexcept {
    for (std::int64_t b = 0; b < n / qk_small; ++b) {
        const float* xb = x + b * qk_small;
        std::uint8_t q[qk_small] = {};
        const float vmax = detail::signed_max(xb, qk_small);
        float d = 0.0f;
        if (std::fabs(vmax) >= 1e-15f)
            d = detail::iq4nl_fit(xb, 1.0f / (vmax / static_cast<float>(iq4nl_values[0])), q).scale();
        y[b].d = f32_to_f16(d);
        detail::pack_codes(q, y[b].qs, nullptr);
    }
}

/// iq4_nl with ggml's scale search, what llama-quantize writes without an importance
/// matrix (ggml's quantize_iq4_nl): d = detail::iq4nl_searched_scale (whose first scale
/// maps the value of largest magnitude to the table's top, +127, where
/// quantize_row_iq4_nl maps it to -127) is stored, and each value takes the entry nearest
/// to x / d (the f32 d). On normal and uniform data its weighted squared error (w = x^2) is about 9 %
/// below quantize_row_iq4_nl's, though a block now and then comes out worse (the codes are
/// chosen again for the chosen scale, which is not refitted to them). A block of
/// magnitudes below 1e-15 stores d = 0 and index 8 everywhere (the entry nearest 0), as
/// ggml's does. Not for cpy or set_rows: ggml's CPU writes quantize_row_iq4_nl's bytes.
inline void quantize_row_iq4_nl_search(const float* x, block_iq4_nl* y, std::int64_t n) noexcept {
    for (std::int64_t b = 0; b < n / qk_small; ++b) {
        const float* xb = x + b * qk_small;
        const float d = detail::iq4nl_searched_scale(xb);
        y[b].d = f32_to_f16(d);
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        std::uint8_t q[qk_small];
        for (int j = 0; j < qk_small; ++j) q[j] = static_cast<std::uint8_t>(detail::nearest_iq4nl(id * xb[j]));
        detail::pack_codes(q, y[b].qs, nullptr);
    }
}

/// ggml's reference mxfp4 quantizer: e = floor(log2(max |x|)) - 2 + 127 (0 for a block of
/// zeros), then each value the nearest table entry at that scale (ties: the lower index,
/// so 0 is code 0). ggml converts an exponent outside [0, 255] (max |x| below 2^-125) to
/// an 8-bit integer undefined; here it is clamped to that range.
inline void quantize_row_mxfp4(const float* x, block_mxfp4* y, std::int64_t n) noexcept {
    for (std::int64_t b = 0; b < n / qk_small; ++b) {
        const float* xb = x + b * qk_small;
        float amax = 0.0f;
        for (int j = 0; j < qk_small; ++j)
            if (amax < std::fabs(xb[j])) amax = std::fabs(xb[j]);
        float e = amax > 0.0f ? std::floor(std::log2(amax)) - 2.0f + 127.0f : 0.0f;
        e = e < 0.0f ? 0.0f : (e > 255.0f ? 255.0f : e);
        y[b].e = static_cast<std::uint8_t>(e);
        const float d = e8m0_to_f32_half(y[b].e);
        std::uint8_t q[qk_small];
        for (int j = 0; j < qk_small; ++j) q[j] = static_cast<std::uint8_t>(detail::nearest_mxfp4(xb[j], d));
        detail::pack_codes(q, y[b].qs, nullptr);
    }
}

// ---------------------------------------------------------------------------------------
// Dequantizers (each value's formula evaluated in f32 as written)

inline void dequantize_row_q4_1(const block_q4_1* x, float* y, std::int64_t n) noexcept {
    for (std::int64_t b = 0; b < n / qk_small; ++b) {
        const float d = f16_to_f32(x[b].d), m = f16_to_f32(x[b].m);
        for (int j = 0; j < qk_small; ++j)
            y[b * qk_small + j] = static_cast<float>(detail::code(x[b].qs, 0, j)) * d + m;
    }
}

inline void dequantize_row_q5_0(const block_q5_0* x, float* y, std::int64_t n) noexcept {
    for (std::int64_t b = 0; b < n / qk_small; ++b) {
        const float d = f16_to_f32(x[b].d);
        const std::uint32_t high = detail::fifth_bits(x[b].qh);
        for (int j = 0; j < qk_small; ++j)
            y[b * qk_small + j] = static_cast<float>(detail::code(x[b].qs, high, j) - 16) * d;
    }
}

inline void dequantize_row_q5_1(const block_q5_1* x, float* y, std::int64_t n) noexcept {
    for (std::int64_t b = 0; b < n / qk_small; ++b) {
        const float d = f16_to_f32(x[b].d), m = f16_to_f32(x[b].m);
        const std::uint32_t high = detail::fifth_bits(x[b].qh);
        for (int j = 0; j < qk_small; ++j)
            y[b * qk_small + j] = static_cast<float>(detail::code(x[b].qs, high, j)) * d + m;
    }
}

inline void dequantize_row_iq4_nl(const block_iq4_nl* x, float* y, std::int64_t n) noexcept {
    for (std::int64_t b = 0; b < n / qk_small; ++b) {
        const float d = f16_to_f32(x[b].d);
        for (int j = 0; j < qk_small; ++j)
            y[b * qk_small + j] = d * static_cast<float>(iq4nl_values[detail::code(x[b].qs, 0, j)]);
    }
}

inline void dequantize_row_mxfp4(const block_mxfp4* x, float* y, std::int64_t n) noexcept {
    for (std::int64_t b = 0; b < n / qk_small; ++b) {
        const float d = e8m0_to_f32_half(x[b].e);
        for (int j = 0; j < qk_small; ++j)
            y[b * qk_small + j] = static_cast<float>(mxfp4_values[detail::code(x[b].qs, 0, j)]) * d;
    }
}

} // namespace backplane
