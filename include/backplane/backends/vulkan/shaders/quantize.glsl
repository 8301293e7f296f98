// Quantizing a block of 32 f32 values into a q8_0, q4_0, q4_1, q5_0, q5_1 or iq4_nl
// destination, as core's quantize_row_<type> do (core/types.hpp, core/quants.hpp): the
// same f32 operations in the same order, divisions correctly rounded (a device's division
// may be off by 2.5 ulp; see div_rn), no contraction, rounding to nearest even (q8_0) or
// truncation (the others) where the CPU does. Bit for bit as long as the block's scale is
// a normal f32 (values of magnitude above ~1e-36) and the values are finite: a device may
// flush subnormals, and the CPU's result for an infinite or NaN value is itself undefined.
// mxfp4 and the K-quants (DST_MXFP4, DST_Q2_K ... DST_Q6_K) are quantized by
// quantize_k.glsl, which this file includes for them.
//
// The including shader defines DST_Q8_0, DST_Q4_0, DST_Q4_1, DST_Q5_0, DST_Q5_1,
// DST_IQ4_NL, DST_MXFP4 or DST_Q2_K ... DST_Q6_K and declares the destination, `d[]`
// (binding 2), as 16-bit words (bytes for mxfp4) before including this file.
#if defined(DST_MXFP4) || defined(DST_Q2_K) || defined(DST_Q3_K) || defined(DST_Q4_K) || defined(DST_Q5_K) || \
    defined(DST_Q6_K)
#define DST_KQUANT
#endif

// x - q * y, exactly when q is within a few ulp of x / y.
float residual(float x, float y, float q) {
    const vec2 qy = two_prod(q, y);
    precise float r = (x - qy.x) - qy.y;
    return r;
}

// The float next to q (q != 0) away from zero (up) or toward it.
float next_float(float q, bool away) { return uintBitsToFloat(floatBitsToUint(q) + (away ? 1u : 0xffffffffu)); }

// 2^e as a float, -126 <= e <= 127.
float pow2(int e) { return uintBitsToFloat(uint(e + 127) << 23); }

// x / y rounded to nearest, as the CPU divides (Vulkan allows 2.5 ulp): the device's
// quotient, one Newton step, then whichever of it and its neighbour toward the exact
// quotient leaves the smaller remainder (a tie is impossible for an inexact quotient).
// The operands' significands are divided, in [1, 2) (so that Dekker's splitting cannot
// overflow), and the quotient scaled back by powers of two, exactly while it is normal.
// Zeros, subnormals, infinities and NaNs are left to the device's division.
float div_rn(float x, float y) {
    const uint bx = floatBitsToUint(x), by = floatBitsToUint(y);
    const uint fx = (bx >> 23) & 0xffu, fy = (by >> 23) & 0xffu; // exponent fields
    if (fx == 0u || fx == 0xffu || fy == 0u || fy == 0xffu) return x / y;
    const float mx = uintBitsToFloat((bx & 0x807fffffu) | 0x3f800000u);
    const float my = uintBitsToFloat((by & 0x807fffffu) | 0x3f800000u);
    const int e = int(fx) - int(fy); // -253 .. 253
    precise float q = mx / my;
    precise float r = residual(mx, my, q);
    q = q + r / my;
    r = residual(mx, my, q);
    if (r != 0.0) {
        // the exact quotient is q + r / my: away from zero when r / my has q's sign
        const bool away = (r > 0.0) == (my > 0.0) == (q > 0.0);
        const float q2 = next_float(q, away);
        precise float r2 = residual(mx, my, q2);
        if (abs(r2) < abs(r)) q = q2;
    }
    const int e1 = clamp(e / 2, -126, 127);
    precise float scaled = q * pow2(e1) * pow2(clamp(e - e1, -126, 127));
    return scaled;
}

// The value of largest magnitude (the first of equals), its sign kept, as core's
// detail::signed_max.
float signed_max(float v[32]) {
    float amax = 0.0, vmax = 0.0;
    for (int j = 0; j < 32; ++j) {
        if (abs(v[j]) > amax) {
            amax = abs(v[j]);
            vmax = v[j];
        }
    }
    return vmax;
}

#if defined(DST_KQUANT)
#include "quantize_k.glsl"
#else
// Stores 32 codes (up to 5 bits each) from word w of the block at d[at_] on, as core's
// detail::pack_codes: byte j the low nibbles of codes j and j + 16, then (when `fifth`)
// their fifth bits as a little-endian u32 in the two words before.
void store_codes(uint at_, uint w, uint q[32], bool fifth) {
    uint high = 0u;
    for (uint j = 0u; j < 8u; ++j) {
        const uint b0 = (q[2u * j] & 15u) | ((q[2u * j + 16u] & 15u) << 4);
        const uint b1 = (q[2u * j + 1u] & 15u) | ((q[2u * j + 17u] & 15u) << 4);
        d[at_ + w + j] = uint16_t(b0 | (b1 << 8));
    }
    if (fifth) {
        for (uint j = 0u; j < 32u; ++j) high |= ((q[j] >> 4) & 1u) << j;
        d[at_ + w - 2u] = uint16_t(high & 0xffffu);
        d[at_ + w - 1u] = uint16_t(high >> 16);
    }
}

#if defined(DST_IQ4_NL)
const float iq4nl_values[16] = float[16](-127.0, -104.0, -83.0, -65.0, -49.0, -35.0, -22.0, -10.0, 1.0, 13.0, 25.0,
                                         38.0, 53.0, 69.0, 89.0, 113.0);

// The index of the table value nearest to x (a tie takes the upper one), as core's
// detail::nearest_iq4nl: the same comparisons.
uint nearest_iq4nl(float x) {
    if (x <= iq4nl_values[0]) return 0u;
    if (x >= iq4nl_values[15]) return 15u;
    int lo = 0, hi = 15;
    while (hi - lo > 1) {
        const int mid = (lo + hi) / 2;
        if (x < iq4nl_values[mid]) hi = mid;
        else lo = mid;
    }
    precise float below = x - iq4nl_values[hi - 1];
    precise float above = iq4nl_values[hi] - x;
    return uint(below < above ? hi - 1 : hi);
}
#endif

// Stores the 32 values v as the block at d[at_].
void store_block(uint at_, float v[32]) {
#if defined(DST_Q4_1) || defined(DST_Q5_1)
#if defined(DST_Q4_1)
    const float levels = 15.0;
#else
    const float levels = 31.0;
#endif
    // d = (max - min) / levels, m = min, codes (x - min) / d rounded half up, at most levels
    float lo = uintBitsToFloat(0x7f7fffffu), hi = -lo;
    for (int j = 0; j < 32; ++j) {
        if (v[j] < lo) lo = v[j];
        if (v[j] > hi) hi = v[j];
    }
    precise float range = hi - lo;
    const float dd = div_rn(range, levels);
    const float id = dd != 0.0 ? div_rn(1.0, dd) : 0.0;
    d[at_] = uint16_t(f32_bits_to_f16(floatBitsToUint(dd)));
    d[at_ + 1u] = uint16_t(f32_bits_to_f16(floatBitsToUint(lo)));
    uint q[32];
    for (uint j = 0u; j < 32u; ++j) {
        precise float s = (v[j] - lo) * id + 0.5;
        const int c = int(s); // truncated, as the CPU's conversion to int8
        q[j] = uint(min(c, int(levels)));
    }
#if defined(DST_Q4_1)
    store_codes(at_, 2u, q, false);
#else
    store_codes(at_, 4u, q, true);
#endif
#elif defined(DST_Q5_0)
    precise float dd = signed_max(v) * -0.0625; // max / -16, exactly as the CPU's division rounds
    const float id = dd != 0.0 ? div_rn(1.0, dd) : 0.0;
    d[at_] = uint16_t(f32_bits_to_f16(floatBitsToUint(dd)));
    uint q[32];
    for (uint j = 0u; j < 32u; ++j) {
        precise float s = v[j] * id + 16.5;
        q[j] = uint(min(int(s), 31));
    }
    store_codes(at_, 3u, q, true);
#elif defined(DST_IQ4_NL)
    // the scale maps the value of largest magnitude to -127; the refit sum(w q x) /
    // sum(w q^2), w = x^2, is stored
    const float vmax = signed_max(v);
    float dd = 0.0;
    uint q[32];
    for (uint j = 0u; j < 32u; ++j) q[j] = 0u;
    if (abs(vmax) >= 1e-15) {
        const float id = div_rn(1.0, div_rn(vmax, -127.0));
        precise float sumqx = 0.0, sumq2 = 0.0;
        for (uint j = 0u; j < 32u; ++j) {
            precise float x = id * v[j];
            q[j] = nearest_iq4nl(x);
            const float t = iq4nl_values[q[j]];
            precise float w = v[j] * v[j];
            precise float wt = w * t;
            sumqx = sumqx + wt * v[j];
            sumq2 = sumq2 + wt * t;
        }
        dd = sumq2 > 0.0 ? div_rn(sumqx, sumq2) : 0.0;
    }
    d[at_] = uint16_t(f32_bits_to_f16(floatBitsToUint(dd)));
    store_codes(at_, 1u, q, false);
#elif defined(DST_Q8_0)
    float amax = 0.0; // as fmax: a NaN is passed over
    for (int j = 0; j < 32; ++j)
        if (abs(v[j]) > amax) amax = abs(v[j]);
    const float dd = div_rn(amax, 127.0);
    const float id = dd != 0.0 ? div_rn(1.0, dd) : 0.0;
    d[at_] = uint16_t(f32_bits_to_f16(floatBitsToUint(dd)));
    for (uint j = 0u; j < 16u; ++j) {
        precise float s0 = v[2u * j] * id;
        precise float s1 = v[2u * j + 1u] * id;
        const uint q0 = uint(int(roundEven(s0))) & 0xffu;
        const uint q1 = uint(int(roundEven(s1))) & 0xffu;
        d[at_ + 1u + j] = uint16_t(q0 | (q1 << 8));
    }
#elif defined(DST_Q4_0)
    // the value of largest magnitude (the first of equals) maps to -8
    float amax = 0.0, vmax = 0.0;
    for (int j = 0; j < 32; ++j) {
        if (abs(v[j]) > amax) {
            amax = abs(v[j]);
            vmax = v[j];
        }
    }
    precise float dd = vmax * -0.125; // vmax / -8, exactly as the CPU's division rounds
    const float id = dd != 0.0 ? div_rn(1.0, dd) : 0.0;
    d[at_] = uint16_t(f32_bits_to_f16(floatBitsToUint(dd)));
    uint bytes[16];
    for (uint j = 0u; j < 16u; ++j) {
        precise float s0 = v[j] * id + 8.5;
        precise float s1 = v[j + 16u] * id + 8.5;
        const uint q0 = s0 < 15.0 ? uint(int(s0)) : 15u;
        const uint q1 = s1 < 15.0 ? uint(int(s1)) : 15u;
        bytes[j] = (q0 | (q1 << 4)) & 0xffu;
    }
    for (uint j = 0u; j < 8u; ++j) d[at_ + 1u + j] = uint16_t(bytes[2u * j] | (bytes[2u * j + 1u] << 8));
#endif
}
#endif
