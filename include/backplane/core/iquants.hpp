#pragma once
// The i-quant and ternary block formats (super-blocks of 256 values): iq4_xs, iq3_xxs,
// iq3_s, iq2_xxs, iq2_xs, iq2_s, iq1_s, iq1_m, tq1_0 and tq2_0. Layouts are byte for byte
// ggml's types of the same names, so GGUF files' bytes are used as they are; the lattice
// grids the iq2 / iq3 / iq1 formats index are data (detail/iq_grids.hpp).
//
//   iq4_xs:  8 sub-blocks of 32 with a 6-bit scale each (low nibbles in scales_l, high
//            2 bits in scales_h); value = d * (scale - 32) * iq4nl_values[q], q of 4 bits
//            (iq4_nl's nibble order per sub-block).
//   iq3_xxs: per 32 values: 8 indices into a 256-entry grid of 4 magnitudes, then a u32
//            with four 7-bit sign groups and a 4-bit scale s; value = d (s + 1/2) / 2
//            times the magnitude, negated where its sign bit is set.
//   iq3_s:   as iq3_xxs with a 512-entry grid (a ninth index bit in qh), explicit sign
//            bytes and 4-bit scales s per 32 values: value = d (1 + 2 s) * magnitude.
//   iq2_xxs: per 32 values: 4 indices into a 256-entry grid of 8 magnitudes and a u32 of
//            four 7-bit sign groups and a 4-bit scale; value = d (s + 1/2) / 4 * magnitude.
//   iq2_xs:  u16 codes (9-bit index into 512 entries, 7 sign bits), 4-bit scales per 16.
//   iq2_s:   10-bit indices into 1024 entries (two high bits in qh), 8 explicit sign bits.
//   iq1_s:   11-bit indices into 2048 entries of 8 values in {-1, 0, 1}, per 32 values a
//            3-bit scale s and a shift of +-1/8: value = d (2 s + 1) (grid + shift).
//   iq1_m:   as iq1_s with per 16 values 3-bit scales and the f16 d spread over the top
//            nibbles of the scales, a shift per 8 values.
//   tq1_0:   ternary {-1, 0, 1} times d: five values per byte in base 3 (qs), four in qh.
//   tq2_0:   ternary, two bits per value (code - 1).
//
// A sign group of 7 bits stands for 8 signs with an even number of minus signs (the
// eighth is the parity of the seven: detail::even_signs).
//
// The quantizers here compute ggml's bytes bit for bit (quantize_row_<type>_ref, and
// quantize_iq4_xs without an importance matrix): iq4_xs, tq1_0, tq2_0. ggml quantizes
// iq2_xxs, iq2_xs and iq1_s only with an importance matrix (ggml_quantize_requires_imatrix),
// so they are dequantized only. n (values per row) must be a multiple of 256.

#include <backplane/core/detail/iq_grids.hpp>
#include <backplane/core/detail/unfused.hpp>
#include <backplane/core/kquants.hpp>
#include <backplane/core/quants.hpp>
#include <backplane/core/types.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace backplane {

struct block_iq4_xs {
    f16_t d;
    std::uint16_t scales_h; ///< bits 2 ib and 2 ib + 1: sub-block ib's scale bits 4, 5
    std::uint8_t
        scales_l[qk_k / 64]; ///< sub-block ib's scale bits 0-3: nibble ib % 2 of byte ib / 2
    std::uint8_t qs[qk_k / 2];
};
struct block_iq3_xxs {
    f16_t d;
    std::uint8_t qs[3 * qk_k / 8]; ///< 64 grid indices, then 8 u32 of signs and scales
};
struct block_iq3_s {
    f16_t d;
    std::uint8_t qs[qk_k / 4];
    std::uint8_t qh[qk_k / 32];
    std::uint8_t signs[qk_k / 8];
    std::uint8_t scales[qk_k / 64];
};
struct block_iq2_xxs {
    f16_t d;
    std::uint16_t qs[qk_k / 8];
};
struct block_iq2_xs {
    f16_t d;
    std::uint16_t qs[qk_k / 8];
    std::uint8_t scales[qk_k / 32];
};
struct block_iq2_s {
    f16_t d;
    std::uint8_t qs[qk_k / 4]; ///< 32 low index bytes, then 32 sign bytes
    std::uint8_t qh[qk_k / 32];
    std::uint8_t scales[qk_k / 32];
};
struct block_iq1_s {
    f16_t d;
    std::uint8_t qs[qk_k / 8];
    std::uint16_t qh[qk_k / 32];
};
struct block_iq1_m {
    std::uint8_t qs[qk_k / 8];
    std::uint8_t qh[qk_k / 16];
    std::uint8_t scales[qk_k / 32]; ///< four u16: 3-bit scales, and d's nibbles in their tops
};
struct block_tq1_0 {
    std::uint8_t qs[(qk_k - 4 * qk_k / 64) / 5]; ///< 240 values, five per byte
    std::uint8_t qh[qk_k / 64];                  ///< the last 16, four per byte
    f16_t d;
};
struct block_tq2_0 {
    std::uint8_t qs[qk_k / 4];
    f16_t d;
};
static_assert(sizeof(block_iq4_xs) == 136 && sizeof(block_iq3_xxs) == 98 &&
                  sizeof(block_iq3_s) == 110 && sizeof(block_iq2_xxs) == 66 &&
                  sizeof(block_iq2_xs) == 74 && sizeof(block_iq2_s) == 82 &&
                  sizeof(block_iq1_s) == 50 && sizeof(block_iq1_m) == 56 &&
                  sizeof(block_tq1_0) == 54 && sizeof(block_tq2_0) == 66,
              "i-quant and ternary blocks must match ggml's layouts");

/// iq1_s's and iq1_m's shift of the grid values (+- 1/8).
inline constexpr float iq1_delta = 0.125f;

namespace detail {

/// The 8 signs a 7-bit group stands for: its bits, and as bit 7 their parity (an even
/// number of minus signs in all).
constexpr std::uint8_t even_signs(unsigned group) noexcept {
    group &= 127u;
    return static_cast<std::uint8_t>(group | ((std::popcount(group) & 1u) << 7));
}

/// Byte k of a grid entry.
template <class U> constexpr std::uint8_t grid_byte(U entry, int k) noexcept {
    return static_cast<std::uint8_t>(entry >> (8 * k));
}

/// Eight values: scale times grid entry g's bytes, negated where `signs` has a bit.
inline void put_signed8(float scale, std::uint64_t g, std::uint8_t signs, float* y) noexcept {
    for (int j = 0; j < 8; ++j) {
        const float v = scale * static_cast<float>(grid_byte(g, j));
        y[j] = (signs >> j) & 1u ? -v : v;
    }
}

/// Eight values from two 4-magnitude entries (the iq3 grids).
inline void put_signed4x2(float scale, std::uint32_t g1, std::uint32_t g2, std::uint8_t signs,
                          float* y) noexcept {
    put_signed8(scale, static_cast<std::uint64_t>(g1) | static_cast<std::uint64_t>(g2) << 32, signs,
                y);
}

/// Eight values of iq1_s / iq1_m: scale * (grid value + shift), the grid's bytes signed.
inline void put_iq1(float scale, float shift, std::uint64_t g, float* y) noexcept {
    for (int j = 0; j < 8; ++j)
        y[j] = scale * (static_cast<float>(static_cast<std::int8_t>(grid_byte(g, j))) + shift);
}

/// A little-endian u32 at p.
inline std::uint32_t load_u32(const std::uint8_t* p) noexcept {
    std::uint32_t v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

/// The trit (0, 1, 2) at position k (0 most significant) of a byte holding five in
/// tq1_0's fixed-point base-3 code: the byte times 3^k, kept to 8 bits, times 3, over 256.
constexpr int trit(std::uint8_t q, int k) noexcept {
    constexpr std::uint8_t pow3[5] = {1, 3, 9, 27, 81};
    const auto shifted = static_cast<std::uint8_t>(q * pow3[k]);
    return (shifted * 3) >> 8;
}

/// Five (or four, with a trailing zero trit) ternary codes packed as tq1_0 does: base 3,
/// first code most significant, scaled to a byte by a ceiling division.
inline std::uint8_t pack_trits(const int* t, int count) noexcept {
    unsigned q = 0;
    for (int k = 0; k < count; ++k)
        q = q * 3 + static_cast<unsigned>(t[k]);
    for (int k = count; k < 5; ++k)
        q *= 3;
    return static_cast<std::uint8_t>((q * 256 + 242) / 243);
}

/// ggml's ternary code of x at inverse scale id: round(x id) + 1 (0, 1 or 2 for |x id| <= 1).
inline int ternary_code(float x, float id) noexcept {
    return static_cast<int>(std::lround(x * id)) + 1;
}

/// The magnitude of a block (ternary formats' scale).
inline float abs_max(const float* x, int n) noexcept {
    float amax = 0.0f;
    for (int j = 0; j < n; ++j)
        amax = amax > std::fabs(x[j]) ? amax : std::fabs(x[j]);
    return amax;
}

} // namespace detail

// ---------------------------------------------------------------------------------------
// Dequantizers (each value's formula evaluated in f32 as ggml's)

inline void dequantize_row_iq4_xs(const block_iq4_xs* x, float* y, std::int64_t n) noexcept {
    for (std::int64_t b = 0; b < n / qk_k; ++b, y += qk_k) {
        const float d = f16_to_f32(x[b].d);
        for (int ib = 0; ib < qk_k / 32; ++ib) {
            const int lo = (x[b].scales_l[ib / 2] >> (4 * (ib % 2))) & 0xf;
            const int hi = (x[b].scales_h >> (2 * ib)) & 3;
            const float dl = d * static_cast<float>((lo | hi << 4) - 32);
            const std::uint8_t* qs = x[b].qs + 16 * ib;
            for (int j = 0; j < 16; ++j) {
                y[32 * ib + j] = dl * static_cast<float>(iq4nl_values[qs[j] & 0xf]);
                y[32 * ib + j + 16] = dl * static_cast<float>(iq4nl_values[qs[j] >> 4]);
            }
        }
    }
}

inline void dequantize_row_iq3_xxs(const block_iq3_xxs* x, float* y, std::int64_t n) noexcept {
    for (std::int64_t b = 0; b < n / qk_k; ++b) {
        const float d = f16_to_f32(x[b].d);
        for (int ib = 0; ib < qk_k / 32; ++ib) {
            const std::uint8_t* qs = x[b].qs + 8 * ib;
            const std::uint32_t aux = detail::load_u32(x[b].qs + qk_k / 4 + 4 * ib);
            const float db = d * (0.5f + static_cast<float>(aux >> 28)) * 0.5f;
            for (int l = 0; l < 4; ++l, y += 8)
                detail::put_signed4x2(db, detail::iq3xxs_grid[qs[2 * l]],
                                      detail::iq3xxs_grid[qs[2 * l + 1]],
                                      detail::even_signs(aux >> (7 * l)), y);
        }
    }
}

inline void dequantize_row_iq3_s(const block_iq3_s* x, float* y, std::int64_t n) noexcept {
    for (std::int64_t b = 0; b < n / qk_k; ++b) {
        const float d = f16_to_f32(x[b].d);
        for (int ib = 0; ib < qk_k / 32; ++ib) {
            const int s = (x[b].scales[ib / 2] >> (4 * (ib % 2))) & 0xf;
            const float db = d * static_cast<float>(1 + 2 * s);
            const std::uint8_t* qs = x[b].qs + 8 * ib;
            const unsigned qh = x[b].qh[ib];
            for (int l = 0; l < 4; ++l, y += 8) {
                const unsigned i1 = qs[2 * l] | ((qh << (8 - 2 * l)) & 256u);
                const unsigned i2 = qs[2 * l + 1] | ((qh << (7 - 2 * l)) & 256u);
                detail::put_signed4x2(db, detail::iq3s_grid[i1], detail::iq3s_grid[i2],
                                      x[b].signs[4 * ib + l], y);
            }
        }
    }
}

inline void dequantize_row_iq2_xxs(const block_iq2_xxs* x, float* y, std::int64_t n) noexcept {
    for (std::int64_t b = 0; b < n / qk_k; ++b) {
        const float d = f16_to_f32(x[b].d);
        for (int ib = 0; ib < qk_k / 32; ++ib) {
            std::uint8_t idx[4];
            std::memcpy(idx, x[b].qs + 4 * ib, 4);
            std::uint32_t aux;
            std::memcpy(&aux, x[b].qs + 4 * ib + 2, 4);
            const float db = d * (0.5f + static_cast<float>(aux >> 28)) * 0.25f;
            for (int l = 0; l < 4; ++l, y += 8)
                detail::put_signed8(db, detail::iq2xxs_grid[idx[l]],
                                    detail::even_signs(aux >> (7 * l)), y);
        }
    }
}

inline void dequantize_row_iq2_xs(const block_iq2_xs* x, float* y, std::int64_t n) noexcept {
    for (std::int64_t b = 0; b < n / qk_k; ++b) {
        const float d = f16_to_f32(x[b].d);
        for (int ib = 0; ib < qk_k / 32; ++ib) {
            const float db[2] = {d * (0.5f + static_cast<float>(x[b].scales[ib] & 0xf)) * 0.25f,
                                 d * (0.5f + static_cast<float>(x[b].scales[ib] >> 4)) * 0.25f};
            for (int l = 0; l < 4; ++l, y += 8) {
                const std::uint16_t q = x[b].qs[4 * ib + l];
                detail::put_signed8(db[l / 2], detail::iq2xs_grid[q & 511u],
                                    detail::even_signs(q >> 9), y);
            }
        }
    }
}

inline void dequantize_row_iq2_s(const block_iq2_s* x, float* y, std::int64_t n) noexcept {
    for (std::int64_t b = 0; b < n / qk_k; ++b) {
        const float d = f16_to_f32(x[b].d);
        const std::uint8_t* signs = x[b].qs + qk_k / 8;
        for (int ib = 0; ib < qk_k / 32; ++ib) {
            const float db[2] = {d * (0.5f + static_cast<float>(x[b].scales[ib] & 0xf)) * 0.25f,
                                 d * (0.5f + static_cast<float>(x[b].scales[ib] >> 4)) * 0.25f};
            for (int l = 0; l < 4; ++l, y += 8) {
                const unsigned i = x[b].qs[4 * ib + l] |
                                   ((static_cast<unsigned>(x[b].qh[ib]) << (8 - 2 * l)) & 0x300u);
                detail::put_signed8(db[l / 2], detail::iq2s_grid[i], signs[4 * ib + l], y);
            }
        }
    }
}

inline void dequantize_row_iq1_s(const block_iq1_s* x, float* y, std::int64_t n) noexcept {
    for (std::int64_t b = 0; b < n / qk_k; ++b) {
        const float d = f16_to_f32(x[b].d);
        for (int ib = 0; ib < qk_k / 32; ++ib) {
            const unsigned qh = x[b].qh[ib];
            const float dl = d * static_cast<float>(2 * ((qh >> 12) & 7u) + 1);
            const float shift = qh & 0x8000u ? -iq1_delta : iq1_delta;
            for (int l = 0; l < 4; ++l, y += 8)
                detail::put_iq1(
                    dl, shift,
                    detail::iq1s_grid[x[b].qs[4 * ib + l] | (((qh >> (3 * l)) & 7u) << 8)], y);
        }
    }
}

inline void dequantize_row_iq1_m(const block_iq1_m* x, float* y, std::int64_t n) noexcept {
    for (std::int64_t b = 0; b < n / qk_k; ++b) {
        std::uint16_t sc[4];
        std::memcpy(sc, x[b].scales, sizeof sc);
        const auto dbits = static_cast<std::uint16_t>((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) |
                                                      ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000));
        const float d = f16_to_f32(f16_t{dbits});
        for (int ib = 0; ib < qk_k / 32; ++ib) {
            const std::uint8_t* qs = x[b].qs + 4 * ib;
            const std::uint8_t* qh = x[b].qh + 2 * ib;
            for (int l = 0; l < 4; ++l, y += 8) {
                const unsigned h = qh[l / 2] >> (4 * (l % 2)); // this group's nibble of qh
                const unsigned s = (sc[ib / 2] >> (6 * (ib % 2) + 3 * (l / 2))) & 7u;
                const float dl = d * static_cast<float>(2 * s + 1);
                const float shift = h & 0x08u ? -iq1_delta : iq1_delta;
                detail::put_iq1(dl, shift, detail::iq1s_grid[qs[l] | ((h & 7u) << 8)], y);
            }
        }
    }
}

inline void dequantize_row_tq1_0(const block_tq1_0* x, float* y, std::int64_t n) noexcept {
    for (std::int64_t b = 0; b < n / qk_k; ++b) {
        const float d = f16_to_f32(x[b].d);
        // the first 32 bytes hold values 0..159 (value 32 k + m in byte m's trit k), the
        // next 16 values 160..239 likewise, qh the last 16 (4 trits per byte)
        const auto run = [&](const std::uint8_t* q, int bytes, int trits) {
            for (int k = 0; k < trits; ++k)
                for (int m = 0; m < bytes; ++m)
                    *y++ = static_cast<float>(detail::trit(q[m], k) - 1) * d;
        };
        run(x[b].qs, 32, 5);
        run(x[b].qs + 32, 16, 5);
        run(x[b].qh, 4, 4);
    }
}

inline void dequantize_row_tq2_0(const block_tq2_0* x, float* y, std::int64_t n) noexcept {
    for (std::int64_t b = 0; b < n / qk_k; ++b) {
        const float d = f16_to_f32(x[b].d);
        for (int j = 0; j < qk_k / 4; j += 32)
            for (int l = 0; l < 4; ++l)
                for (int m = 0; m < 32; ++m)
                    *y++ = static_cast<float>(((x[b].qs[j + m] >> (2 * l)) & 3) - 1) * d;
    }
}

// ---------------------------------------------------------------------------------------
// Quantizers

/// ggml's tq1_0 quantizer: d = max |x|, each value's code round(x / d) + 1, five codes a
/// byte in base 3 (value 32 k + m of the first 160 in byte m, of the next 80 in byte
/// 32 + m, k = the trit), the last 16 in qh, four a byte with a zero fifth trit.
inline void quantize_row_tq1_0(const float* x, block_tq1_0* y, std::int64_t n) noexcept {
    for (std::int64_t b = 0; b < n / qk_k; ++b, x += qk_k) {
        const float d = detail::abs_max(x, qk_k);
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = f32_to_f16(d);
        const auto pack = [&](const float* xs, std::uint8_t* q, int bytes, int trits) {
            for (int m = 0; m < bytes; ++m) {
                int t[5];
                for (int k = 0; k < trits; ++k)
                    t[k] = detail::ternary_code(xs[m + k * bytes], id);
                q[m] = detail::pack_trits(t, trits);
            }
        };
        pack(x, y[b].qs, 32, 5);
        pack(x + 160, y[b].qs + 32, 16, 5);
        pack(x + 240, y[b].qh, 4, 4);
    }
}

/// ggml's tq2_0 quantizer: d = max |x|, code round(x / d) + 1 in two bits; value
/// 128 j + 32 l + m in bits 2 l of byte 32 j + m.
inline void quantize_row_tq2_0(const float* x, block_tq2_0* y, std::int64_t n) noexcept {
    for (std::int64_t b = 0; b < n / qk_k; ++b, x += qk_k) {
        const float d = detail::abs_max(x, qk_k);
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = f32_to_f16(d);
        for (int j = 0; j < qk_k / 4; j += 32)
            for (int m = 0; m < 32; ++m) {
                unsigned q = 0;
                for (int l = 0; l < 4; ++l)
                    q |= (static_cast<unsigned>(detail::ternary_code(x[4 * j + 32 * l + m], id)) &
                          3u)
                         << (2 * l);
                y[b].qs[j + m] = static_cast<std::uint8_t>(q);
            }
    }
}

/// ggml's iq4_xs quantizer without an importance matrix (quantize_iq4_xs, which
/// quantize_row_iq4_xs_ref and ggml's CPU from_float call): each sub-block's scale by
/// iq4_nl's search (detail::iq4nl_searched_scale); d = -(the scale of largest magnitude,
/// the first of equals) / 32; each sub-block's 6-bit scale round(scale / d) + 32
/// (clamped to [0, 63]) and its codes the table entries nearest to x / (d (scale - 32))
/// (the f32 d).
inline void quantize_row_iq4_xs(const float* x, block_iq4_xs* y, std::int64_t n) noexcept {
    for (std::int64_t b = 0; b < n / qk_k; ++b, x += qk_k) {
        float scales[qk_k / 32];
        float max_scale = 0.0f, amax_scale = 0.0f;
        for (int ib = 0; ib < qk_k / 32; ++ib) {
            scales[ib] = detail::iq4nl_searched_scale(x + 32 * ib);
            if (std::fabs(scales[ib]) > amax_scale) {
                amax_scale = std::fabs(scales[ib]);
                max_scale = scales[ib];
            }
        }
        const float d = -max_scale / 32.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = f32_to_f16(d);
        y[b].scales_h = 0;
        std::memset(y[b].scales_l, 0, sizeof y[b].scales_l);
        for (int ib = 0; ib < qk_k / 32; ++ib) {
            int l = kquant_detail::nearest_int(id * scales[ib]);
            l = l < -32 ? -32 : (l > 31 ? 31 : l);
            const float dl = d * static_cast<float>(l);
            const float idl = dl != 0.0f ? 1.0f / dl : 0.0f;
            std::uint8_t q[qk_small];
            for (int j = 0; j < qk_small; ++j)
                q[j] = static_cast<std::uint8_t>(detail::nearest_iq4nl(idl * x[32 * ib + j]));
            detail::pack_codes(q, y[b].qs + 16 * ib, nullptr);
            const auto s = static_cast<unsigned>(l + 32);
            y[b].scales_l[ib / 2] |= static_cast<std::uint8_t>((s & 0xfu) << (4 * (ib % 2)));
            y[b].scales_h |= static_cast<std::uint16_t>((s >> 4) << (2 * ib));
        }
    }
}

} // namespace backplane
