#pragma once
// The K-quant block formats (super-blocks of 256 values): q2_K, q3_K, q4_K, q5_K and q6_K,
// the weight types of the Q2_K ... Q6_K files (Q4_K_M is q4_K with q6_K for some tensors),
// and q8_K, the activation format their dot products use. Layouts are byte for byte ggml's; the quantizers compute what ggml's
// reference row quantizers (quantize_row_<type>_ref) compute, bit for bit on the same input
// (the same searches for each sub-block's scale and minimum, the same f32 arithmetic in the
// same order, no importance weights), whatever the compiler's contraction: every product
// whose rounding matters is rounded before it is added (detail::unfused), as in ggml's
// reference build, which has no FMA.
//
//   q4_K, q5_K: 8 sub-blocks of 32 values, each with a 6-bit scale and a 6-bit minimum
//     (packed in 12 bytes), times the f16 super-block scales d and dmin:
//     value = (d * sc) * q - (dmin * m), q of 4 (q4_K) or 5 (q5_K) bits.
//   q2_K: 16 sub-blocks of 16 with a 4-bit scale and a 4-bit minimum each;
//     value = (d * sc) * q - (dmin * m), q of 2 bits.
//   q3_K: 16 sub-blocks of 16 with a 6-bit signed scale; value = (d * sc) * (q - 4), q of
//     3 bits (the third in hmask).
//   q6_K: 16 sub-blocks of 16 values with an 8-bit signed scale; value = (d * sc) * (q - 32).
//   q8_K: value = d * q (d f32), with the sums of each 16 codes (bsums).
//
// n (values per row) must be a multiple of 256; callers validate.

#include <backplane/core/detail/unfused.hpp>
#include <backplane/core/types.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>

namespace backplane {

inline constexpr int qk_k = 256;        ///< values per K-quant super-block
inline constexpr int k_scale_size = 12; ///< bytes of q4_K's and q5_K's packed scales and minimums

struct block_q2_K {
    std::uint8_t scales[qk_k / 16]; ///< per 16 values: scale (low nibble) and minimum (high)
    std::uint8_t qs[qk_k / 4];
    f16_t d, dmin;
};
struct block_q3_K {
    std::uint8_t hmask[qk_k / 8]; ///< the third bits: bit e / 32 of byte e % 32
    std::uint8_t qs[qk_k / 4];
    std::uint8_t scales[k_scale_size];
    f16_t d;
};
struct block_q4_K {
    f16_t d, dmin;
    std::uint8_t scales[k_scale_size];
    std::uint8_t qs[qk_k / 2];
};
struct block_q5_K {
    f16_t d, dmin;
    std::uint8_t scales[k_scale_size];
    std::uint8_t qh[qk_k / 8];
    std::uint8_t qs[qk_k / 2];
};
struct block_q6_K {
    std::uint8_t ql[qk_k / 2];
    std::uint8_t qh[qk_k / 4];
    std::int8_t scales[qk_k / 16];
    f16_t d;
};
struct block_q8_K {
    float d;
    std::int8_t qs[qk_k];
    std::int16_t bsums[qk_k / 16];
};
static_assert(sizeof(block_q2_K) == 84 && sizeof(block_q3_K) == 110 && sizeof(block_q4_K) == 144 &&
                  sizeof(block_q5_K) == 176 && sizeof(block_q6_K) == 210 &&
                  sizeof(block_q8_K) == 292,
              "K-quant blocks must match ggml's layouts");

namespace kquant_detail {

/// x rounded to the nearest integer, ties to even, by ggml's float trick (|x| < 2^22), for
/// an x the compiler cannot fuse into the trick's addition (an element of an array passed
/// through detail::unfused, a quotient, a loaded value).
inline int nearest_int_unfused(float x) noexcept {
    const float v = x + 12582912.0f;
    std::int32_t i;
    std::memcpy(&i, &v, sizeof i);
    return (i & 0x007fffff) - 0x00400000;
}

/// nearest_int_unfused of x rounded first: x is mostly a product (unfused.hpp).
inline int nearest_int(float x) noexcept { return nearest_int_unfused(detail::unfused(x)); }

/// Sub-block j's 6-bit scale and minimum from q4_K's and q5_K's 12 packed bytes.
inline void scale_min(int j, const std::uint8_t* q, std::uint8_t& sc, std::uint8_t& m) noexcept {
    if (j < 4) {
        sc = q[j] & 63;
        m = q[j + 4] & 63;
    } else {
        sc = static_cast<std::uint8_t>((q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4));
        m = static_cast<std::uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

/// The error a fit weighs: absolute (q2_K) or squared.
inline float fit_error(float diff, bool absolute) noexcept { return absolute ? std::fabs(diff) : diff * diff; }

/// ggml's make_qkx2_quants: codes 0..nmax of n values with a scale and a minimum (returned:
/// the scale; `neg_min` = -minimum), the least weighted error (absolute or squared) of the
/// plain fit and of nstep + 1 refits from scales (rmin + rdelta * is + nmax) / (max - min).
inline float fit_scale_min(int n, int nmax, const float* x, const float* w, std::uint8_t* L, float& neg_min,
                           float rmin, float rdelta, int nstep, bool absolute = false) noexcept {
    float min = x[0], max = x[0], sum_w = w[0], sum_x = sum_w * x[0];
    for (int i = 1; i < n; ++i) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        sum_w += w[i];
        sum_x += detail::unfused(w[i] * x[i]);
    }
    if (min > 0) min = 0;
    if (max == min) {
        for (int i = 0; i < n; ++i) L[i] = 0;
        neg_min = -min;
        return 0.0f;
    }
    float iscale = static_cast<float>(nmax) / (max - min);
    float scale = 1 / iscale;
    float best_error = 0;
    for (int i = 0; i < n; ++i) {
        const int l = nearest_int(iscale * (x[i] - min));
        L[i] = static_cast<std::uint8_t>(l < 0 ? 0 : (l > nmax ? nmax : l));
        best_error += detail::unfused(w[i] * fit_error(detail::unfused(scale * L[i]) + min - x[i], absolute));
    }
    std::uint8_t aux[32];
    for (int is = 0; is <= nstep; ++is) {
        iscale = (rmin + detail::unfused(rdelta * static_cast<float>(is)) + static_cast<float>(nmax)) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; ++i) {
            int l = nearest_int(iscale * (x[i] - min));
            l = l < 0 ? 0 : (l > nmax ? nmax : l);
            aux[i] = static_cast<std::uint8_t>(l);
            const float fl = static_cast<float>(l);
            sum_l += detail::unfused(w[i] * fl);
            sum_l2 += detail::unfused(w[i] * fl * fl);
            sum_xl += detail::unfused(w[i] * fl * x[i]);
        }
        const auto mul = [](float a, float b) { return detail::unfused(a * b); };
        const float D = mul(sum_w, sum_l2) - mul(sum_l, sum_l);
        if (D > 0) {
            float this_scale = (mul(sum_w, sum_xl) - mul(sum_x, sum_l)) / D;
            float this_min = (mul(sum_l2, sum_x) - mul(sum_l, sum_xl)) / D;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float cur_error = 0;
            for (int i = 0; i < n; ++i) {
                cur_error += mul(w[i], fit_error(mul(this_scale, aux[i]) + this_min - x[i], absolute));
            }
            if (cur_error < best_error) {
                for (int i = 0; i < n; ++i) L[i] = aux[i];
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    neg_min = -min;
    return scale;
}

/// Codes around 0 as ggml's make_qx_quants and make_q3_quants fit them, weights x^2.
struct centred_fit {
    int nmax;
    float max = 0;              ///< the signed value of largest magnitude
    float sumlx = 0, suml2 = 0; ///< sum w x l and sum w l^2 of the codes

    [[nodiscard]] int clamp(int l) const noexcept { return l < -nmax ? -nmax : (l > nmax - 1 ? nmax - 1 : l); }
    /// The code of x at the inverse scale iscale.
    [[nodiscard]] int code(float iscale, float x) const noexcept { return clamp(nearest_int(iscale * x)); }

    /// The first fit, codes l (not offset) in L; false, with L zeros, when every |x| is
    /// below 1e-15.
    bool first(int n, const float* x, std::int8_t* L) noexcept {
        max = detail::signed_max(x, n);
        if (std::fabs(max) < 1e-15f) {
            for (int i = 0; i < n; ++i) L[i] = 0;
            return false;
        }
        const float iscale = -static_cast<float>(nmax) / max;
        for (int i = 0; i < n; ++i) {
            const int l = code(iscale, x[i]);
            L[i] = static_cast<std::int8_t>(l);
            const float w = x[i] * x[i], fl = static_cast<float>(l);
            sumlx += detail::unfused(w * x[i] * fl);
            suml2 += detail::unfused(w * fl * fl);
        }
        return true;
    }
};

/// ggml's make_qx_quants with weights x^2 (rmse_type 1): codes L = l + nmax for l in
/// [-nmax, nmax - 1] of n values around 0, the scale refit over 18 trial scales.
inline float fit_scale(int n, int nmax, const float* x, std::int8_t* L) noexcept {
    centred_fit f{nmax};
    if (!f.first(n, x, L)) return 0.0f;
    for (int i = 0; i < n; ++i) L[i] = static_cast<std::int8_t>(L[i] + nmax);
    float scale = f.suml2 != 0.0f ? f.sumlx / f.suml2 : 0.0f;
    float best = scale * f.sumlx;
    for (int is = -9; is <= 9; ++is) {
        if (is == 0) continue;
        const float iscale = -(static_cast<float>(nmax) + detail::unfused(0.1f * static_cast<float>(is))) / f.max;
        float sumlx = 0, suml2 = 0;
        for (int i = 0; i < n; ++i) {
            const float fl = static_cast<float>(f.code(iscale, x[i]));
            const float w = x[i] * x[i];
            sumlx += detail::unfused(w * x[i] * fl);
            suml2 += detail::unfused(w * fl * fl);
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; ++i) L[i] = static_cast<std::int8_t>(nmax + f.code(iscale, x[i]));
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/// ggml's make_q3_quants with its refinement (do_rmse): codes l in [-nmax, nmax - 1] of n
/// values around 0, each moved in up to 5 passes to where it raises the fit
/// (sum w x l)^2 / (sum w l^2), w = x^2; stored as l + nmax. Returns the fitted scale.
inline float fit_scale_refined(int n, int nmax, const float* x, std::int8_t* L) noexcept {
    centred_fit f{nmax};
    if (!f.first(n, x, L)) return 0.0f;
    float sumlx = f.sumlx, suml2 = f.suml2;
    const auto clamp = [&f](int l) { return f.clamp(l); };
    for (int pass = 0; pass < 5; ++pass) {
        int changed = 0;
        for (int i = 0; i < n; ++i) {
            const float w = x[i] * x[i];
            float slx = sumlx - detail::unfused(w * x[i] * L[i]);
            if (!(slx > 0)) continue; // as ggml: a NaN skips too
            float sl2 = suml2 - detail::unfused(w * L[i] * L[i]);
            const int l = clamp(nearest_int(x[i] * sl2 / slx));
            if (l == L[i]) continue;
            slx += detail::unfused(w * x[i] * static_cast<float>(l));
            sl2 += detail::unfused(w * static_cast<float>(l) * static_cast<float>(l));
            if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                L[i] = static_cast<std::int8_t>(l);
                sumlx = slx;
                suml2 = sl2;
                ++changed;
            }
        }
        if (changed == 0) break;
    }
    for (int i = 0; i < n; ++i) L[i] = static_cast<std::int8_t>(L[i] + nmax);
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

/// Packs 256 2-bit codes: byte 32 h + l holds values 128 h + l + 32 s at bits 2 s.
inline void pack_2bit(const std::uint8_t* L, std::uint8_t* qs) noexcept {
    for (int h = 0; h < 2; ++h)
        for (int l = 0; l < 32; ++l) {
            const std::uint8_t* q = L + 128 * h + l;
            qs[32 * h + l] = static_cast<std::uint8_t>(q[0] | (q[32] << 2) | (q[64] << 4) | (q[96] << 6));
        }
}

/// The 2-bit code of value e from pack_2bit's bytes.
inline int code_2bit(const std::uint8_t* qs, int e) noexcept {
    return (qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
}

/// q3_K's 6-bit signed scale of sub-block j (of 16), from its 12 packed bytes.
inline int q3_scale(const std::uint8_t* scales, int j) noexcept {
    const int lo = j < 8 ? scales[j] & 15 : scales[j - 8] >> 4;
    return (lo | (((scales[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32;
}

/// q4_K and q5_K: each sub-block's scale and minimum fitted (weights sqrt(mean x^2) + |x|),
/// quantized to 6 bits against the largest, packed; then every code again from the stored
/// scales. Leaves the codes (0..nmax) in L.
inline void quantize_scales_mins(const float* x, int nmax, float rmin, int nstep, f16_t& d, f16_t& dmin,
                                 std::uint8_t* scales, std::uint8_t* L) noexcept {
    float sc[8], mn[8], w[32];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; ++j) {
        const float* xb = x + 32 * j;
        float sum_x2 = 0;
        for (int l = 0; l < 32; ++l) sum_x2 += detail::unfused(xb[l] * xb[l]);
        const float av_x = std::sqrt(sum_x2 / 32);
        for (int l = 0; l < 32; ++l) w[l] = av_x + std::fabs(xb[l]);
        sc[j] = fit_scale_min(32, nmax, xb, w, L + 32 * j, mn[j], rmin, 0.1f, nstep);
        if (sc[j] > max_scale) max_scale = sc[j];
        if (mn[j] > max_min) max_min = mn[j];
    }
    const float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
    const float inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
    for (int j = 0; j < 8; ++j) {
        auto ls = static_cast<std::uint8_t>(nearest_int(inv_scale * sc[j]));
        auto lm = static_cast<std::uint8_t>(nearest_int(inv_min * mn[j]));
        ls = ls < 63 ? ls : 63;
        lm = lm < 63 ? lm : 63;
        if (j < 4) {
            scales[j] = ls;
            scales[j + 4] = lm;
        } else {
            scales[j + 4] = static_cast<std::uint8_t>((ls & 0x0f) | ((lm & 0x0f) << 4));
            scales[j - 4] = static_cast<std::uint8_t>(scales[j - 4] | ((ls >> 4) << 6));
            scales[j] = static_cast<std::uint8_t>(scales[j] | ((lm >> 4) << 6));
        }
    }
    d = f32_to_f16(max_scale / 63.0f);
    dmin = f32_to_f16(max_min / 63.0f);
    for (int j = 0; j < 8; ++j) {
        std::uint8_t s, m;
        scale_min(j, scales, s, m);
        const float dl = f16_to_f32(d) * s;
        if (dl == 0.0f) continue;
        const float dm = f16_to_f32(dmin) * m; // exact (f16 times 6 bits): no rounding to fuse
        for (int i = 0; i < 32; ++i) {
            const int l = nearest_int((x[32 * j + i] + dm) / dl);
            L[32 * j + i] = static_cast<std::uint8_t>(l < 0 ? 0 : (l > nmax ? nmax : l));
        }
    }
}

} // namespace kquant_detail

// ---------------------------------------------------------------------------------------
// Quantizers

/// q2_K: 16 sub-blocks of 16, each scale and minimum fitted for the least weighted absolute
/// error (weights |x|), both quantized to 4 bits against the largest.
inline void quantize_row_q2_K(const float* x, block_q2_K* y, std::int64_t n) noexcept {
    for (std::int64_t b = 0; b < n / qk_k; ++b, x += qk_k) {
        std::uint8_t L[qk_k];
        float sc[16], mn[16], w[16];
        float max_scale = 0, max_min = 0;
        for (int j = 0; j < 16; ++j) {
            for (int l = 0; l < 16; ++l) w[l] = std::fabs(x[16 * j + l]);
            sc[j] = kquant_detail::fit_scale_min(16, 3, x + 16 * j, w, L + 16 * j, mn[j], -0.5f, 0.1f, 15, true);
            if (sc[j] > max_scale) max_scale = sc[j];
            if (mn[j] > max_min) max_min = mn[j];
        }
        y[b].d = f32_to_f16(0.0f);
        y[b].dmin = f32_to_f16(0.0f);
        for (int j = 0; j < 16; ++j) y[b].scales[j] = 0;
        if (max_scale > 0) {
            const float iscale = 15.0f / max_scale;
            for (int j = 0; j < 16; ++j) y[b].scales[j] = static_cast<std::uint8_t>(kquant_detail::nearest_int(iscale * sc[j]));
            y[b].d = f32_to_f16(max_scale / 15.0f);
        }
        if (max_min > 0) {
            const float iscale = 15.0f / max_min;
            for (int j = 0; j < 16; ++j)
                y[b].scales[j] = static_cast<std::uint8_t>(y[b].scales[j] | (kquant_detail::nearest_int(iscale * mn[j]) << 4));
            y[b].dmin = f32_to_f16(max_min / 15.0f);
        }
        for (int j = 0; j < 16; ++j) {
            const float d = f16_to_f32(y[b].d) * static_cast<float>(y[b].scales[j] & 15);
            if (d == 0.0f) continue;
            const float dm = f16_to_f32(y[b].dmin) * static_cast<float>(y[b].scales[j] >> 4);
            for (int i = 0; i < 16; ++i) {
                const int l = kquant_detail::nearest_int((x[16 * j + i] + dm) / d);
                L[16 * j + i] = static_cast<std::uint8_t>(l < 0 ? 0 : (l > 3 ? 3 : l));
            }
        }
        kquant_detail::pack_2bit(L, y[b].qs);
    }
}

/// q3_K: 16 sub-blocks of 16 with a signed scale each (fitted by ggml's refinement),
/// quantized to 6 bits against the largest magnitude; codes of 3 bits, the third in hmask.
inline void quantize_row_q3_K(const float* x, block_q3_K* y, std::int64_t n) noexcept {
    for (std::int64_t b = 0; b < n / qk_k; ++b, x += qk_k) {
        std::int8_t L[qk_k];
        float sc[16];
        for (int j = 0; j < 16; ++j) sc[j] = kquant_detail::fit_scale_refined(16, 4, x + 16 * j, L + 16 * j);
        const float max_scale = detail::signed_max(sc, 16);
        std::memset(y[b].scales, 0, sizeof y[b].scales);
        y[b].d = f32_to_f16(0.0f);
        if (max_scale != 0.0f) {
            const float iscale = -32.0f / max_scale;
            for (int j = 0; j < 16; ++j) {
                const auto l8 = static_cast<std::int8_t>(kquant_detail::nearest_int(iscale * sc[j]));
                const int l = (l8 < -32 ? -32 : (l8 > 31 ? 31 : l8)) + 32;
                if (j < 8)
                    y[b].scales[j] = static_cast<std::uint8_t>(l & 15);
                else
                    y[b].scales[j - 8] = static_cast<std::uint8_t>(y[b].scales[j - 8] | ((l & 15) << 4));
                y[b].scales[j % 4 + 8] = static_cast<std::uint8_t>(y[b].scales[j % 4 + 8] | ((l >> 4) << (2 * (j / 4))));
            }
            y[b].d = f32_to_f16(1 / iscale);
        }
        for (int j = 0; j < 16; ++j) {
            const float d = f16_to_f32(y[b].d) * static_cast<float>(kquant_detail::q3_scale(y[b].scales, j));
            if (d == 0.0f) continue;
            for (int i = 0; i < 16; ++i) {
                const int l = kquant_detail::nearest_int(x[16 * j + i] / d);
                L[16 * j + i] = static_cast<std::int8_t>((l < -4 ? -4 : (l > 3 ? 3 : l)) + 4);
            }
        }
        std::memset(y[b].hmask, 0, sizeof y[b].hmask);
        std::uint8_t low[qk_k];
        for (int e = 0; e < qk_k; ++e) {
            if (L[e] > 3) y[b].hmask[e % 32] = static_cast<std::uint8_t>(y[b].hmask[e % 32] | (1 << (e / 32)));
            low[e] = static_cast<std::uint8_t>(L[e] > 3 ? L[e] - 4 : L[e]);
        }
        kquant_detail::pack_2bit(low, y[b].qs);
    }
}

inline void quantize_row_q4_K(const float* x, block_q4_K* y, std::int64_t n) noexcept {
    for (std::int64_t b = 0; b < n / qk_k; ++b, x += qk_k) {
        std::uint8_t L[qk_k];
        kquant_detail::quantize_scales_mins(x, 15, -1.0f, 20, y[b].d, y[b].dmin, y[b].scales, L);
        for (int c = 0; c < 4; ++c) // 64 values per 32 bytes: low nibbles the first 32
            for (int l = 0; l < 32; ++l)
                y[b].qs[32 * c + l] = static_cast<std::uint8_t>(L[64 * c + l] | (L[64 * c + 32 + l] << 4));
    }
}

inline void quantize_row_q5_K(const float* x, block_q5_K* y, std::int64_t n) noexcept {
    for (std::int64_t b = 0; b < n / qk_k; ++b, x += qk_k) {
        std::uint8_t L[qk_k];
        kquant_detail::quantize_scales_mins(x, 31, -0.5f, 15, y[b].d, y[b].dmin, y[b].scales, L);
        std::memset(y[b].qh, 0, sizeof y[b].qh);
        for (int c = 0; c < 4; ++c)
            for (int l = 0; l < 32; ++l) {
                const int lo = L[64 * c + l], hi = L[64 * c + 32 + l];
                y[b].qs[32 * c + l] = static_cast<std::uint8_t>((lo & 15) | ((hi & 15) << 4));
                y[b].qh[l] = static_cast<std::uint8_t>(y[b].qh[l] | ((lo >> 4) << (2 * c)) | ((hi >> 4) << (2 * c + 1)));
            }
    }
}

inline void quantize_row_q6_K(const float* x, block_q6_K* y, std::int64_t n) noexcept {
    for (std::int64_t b = 0; b < n / qk_k; ++b, x += qk_k) {
        std::int8_t L[qk_k];
        float scales[qk_k / 16];
        for (int ib = 0; ib < qk_k / 16; ++ib) scales[ib] = kquant_detail::fit_scale(16, 32, x + 16 * ib, L + 16 * ib);
        const float max_scale = detail::signed_max(scales, qk_k / 16);
        if (std::fabs(max_scale) < 1e-15f) {
            std::memset(&y[b], 0, sizeof y[b]);
            continue;
        }
        const float iscale = -128.0f / max_scale;
        y[b].d = f32_to_f16(1 / iscale);
        for (int ib = 0; ib < qk_k / 16; ++ib) {
            const int s = kquant_detail::nearest_int(iscale * scales[ib]);
            y[b].scales[ib] = static_cast<std::int8_t>(s < 127 ? s : 127);
        }
        for (int j = 0; j < qk_k / 16; ++j) {
            const float d = f16_to_f32(y[b].d) * y[b].scales[j];
            if (d == 0.0f) continue;
            for (int i = 0; i < 16; ++i) {
                const int l = kquant_detail::nearest_int(x[16 * j + i] / d);
                L[16 * j + i] = static_cast<std::int8_t>((l < -32 ? -32 : (l > 31 ? 31 : l)) + 32);
            }
        }
        for (int h = 0; h < 2; ++h) // halves of 128 values
            for (int l = 0; l < 32; ++l) {
                const std::int8_t* q = L + 128 * h + l;
                y[b].ql[64 * h + l] = static_cast<std::uint8_t>((q[0] & 15) | ((q[64] & 15) << 4));
                y[b].ql[64 * h + 32 + l] = static_cast<std::uint8_t>((q[32] & 15) | ((q[96] & 15) << 4));
                y[b].qh[32 * h + l] =
                    static_cast<std::uint8_t>((q[0] >> 4) | ((q[32] >> 4) << 2) | ((q[64] >> 4) << 4) | ((q[96] >> 4) << 6));
            }
    }
}

/// q8_K: codes round(-127 x / max) (max the signed value of largest magnitude), at most
/// 127, d = max / -127 in f32. A block of zeros is d 0, codes 0 and sums 0 (ggml leaves its
/// sums unwritten).
inline void quantize_row_q8_K(const float* x, block_q8_K* y, std::int64_t n) noexcept {
    for (std::int64_t b = 0; b < n / qk_k; ++b, x += qk_k) {
        const float max = detail::signed_max(x, qk_k);
        std::memset(&y[b], 0, sizeof y[b]);
        if (max == 0.0f) continue;
        const float iscale = -127.0f / max;
        float p[qk_k]; // the products, rounded before the rounding trick adds (vectorised)
        for (int j = 0; j < qk_k; ++j) p[j] = iscale * x[j];
        detail::unfused(p);
        for (int j = 0; j < qk_k; ++j) {
            const int v = kquant_detail::nearest_int_unfused(p[j]);
            y[b].qs[j] = static_cast<std::int8_t>(v < 127 ? v : 127);
        }
        for (int j = 0; j < qk_k / 16; ++j) {
            int sum = 0;
            for (int i = 0; i < 16; ++i) sum += y[b].qs[16 * j + i];
            y[b].bsums[j] = static_cast<std::int16_t>(sum);
        }
        y[b].d = 1 / iscale;
    }
}

// ---------------------------------------------------------------------------------------
// Dequantizers (each value's formula evaluated in f32 as written above)

inline void dequantize_row_q2_K(const block_q2_K* x, float* y, std::int64_t n) noexcept {
    for (std::int64_t b = 0; b < n / qk_k; ++b, y += qk_k) {
        const float d = f16_to_f32(x[b].d), dmin = f16_to_f32(x[b].dmin);
        for (int e = 0; e < qk_k; ++e) {
            const std::uint8_t s = x[b].scales[e / 16];
            const float dl = d * static_cast<float>(s & 15), ml = dmin * static_cast<float>(s >> 4);
            y[e] = dl * static_cast<float>(kquant_detail::code_2bit(x[b].qs, e)) - ml;
        }
    }
}

inline void dequantize_row_q3_K(const block_q3_K* x, float* y, std::int64_t n) noexcept {
    for (std::int64_t b = 0; b < n / qk_k; ++b, y += qk_k) {
        const float d = f16_to_f32(x[b].d);
        for (int e = 0; e < qk_k; ++e) {
            const float dl = d * static_cast<float>(kquant_detail::q3_scale(x[b].scales, e / 16));
            const int high = (x[b].hmask[e % 32] >> (e / 32)) & 1;
            y[e] = dl * static_cast<float>(kquant_detail::code_2bit(x[b].qs, e) - (high ? 0 : 4));
        }
    }
}

namespace kquant_detail {
/// q4_K and q5_K: (d * sc) * q - (dmin * m) per sub-block of 32, q5_K's fifth bits from qh.
template <class Block> void dequantize_row_scale_min(const Block* x, float* y, std::int64_t n) noexcept {
    for (std::int64_t b = 0; b < n / qk_k; ++b) {
        const float d = f16_to_f32(x[b].d), dmin = f16_to_f32(x[b].dmin);
        for (int j = 0; j < 8; ++j) {
            std::uint8_t s, m;
            scale_min(j, x[b].scales, s, m);
            const float dl = d * s, ml = dmin * m;
            const std::uint8_t* q = x[b].qs + 32 * (j / 2);
            for (int l = 0; l < 32; ++l) {
                int v = j % 2 ? q[l] >> 4 : q[l] & 15;
                if constexpr (requires { x[b].qh; }) v += 16 * ((x[b].qh[l] >> j) & 1);
                *y++ = dl * static_cast<float>(v) - ml;
            }
        }
    }
}
} // namespace kquant_detail

inline void dequantize_row_q4_K(const block_q4_K* x, float* y, std::int64_t n) noexcept {
    kquant_detail::dequantize_row_scale_min(x, y, n);
}

inline void dequantize_row_q5_K(const block_q5_K* x, float* y, std::int64_t n) noexcept {
    kquant_detail::dequantize_row_scale_min(x, y, n);
}

inline void dequantize_row_q6_K(const block_q6_K* x, float* y, std::int64_t n) noexcept {
    for (std::int64_t b = 0; b < n / qk_k; ++b, y += qk_k) {
        const float d = f16_to_f32(x[b].d);
        for (int e = 0; e < qk_k; ++e) {
            const int h = e / 128, r = e % 128, l = r % 32, part = r / 32; // part: +0, +32, +64, +96
            const std::uint8_t lo = x[b].ql[64 * h + 32 * (part % 2) + l];
            const int q = ((part < 2 ? lo & 15 : lo >> 4) | (((x[b].qh[32 * h + l] >> (2 * part)) & 3) << 4)) - 32;
            y[e] = d * x[b].scales[e / 16] * static_cast<float>(q);
        }
    }
}

inline void dequantize_row_q8_K(const block_q8_K* x, float* y, std::int64_t n) noexcept {
    for (std::int64_t b = 0; b < n / qk_k; ++b)
        for (int j = 0; j < qk_k; ++j) *y++ = x[b].d * static_cast<float>(x[b].qs[j]);
}

} // namespace backplane
