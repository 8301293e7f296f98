// Quantizing a block of 32 f32 values into a q8_0 or q4_0 destination, as core's
// quantize_row_q8_0 / quantize_row_q4_0 do: the same f32 operations, divisions correctly
// rounded (a device's division may be off by 2.5 ulp; see div_rn), no contraction,
// rounding to nearest even (q8_0) or truncation (q4_0) where the CPU does. Bit for bit as
// long as the block's scale is a normal f32 (values of magnitude above ~1e-36) and the
// values are finite: a device may flush subnormals, and the CPU's result for an infinite
// or NaN value is itself undefined.
//
// The including shader defines DST_Q8_0 or DST_Q4_0 and declares the destination as
// 16-bit words, `d[]` (binding 2), before including this file.

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

// Stores the 32 values v as the block at d[at_].
void store_block(uint at_, float v[32]) {
#if defined(DST_Q8_0)
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
#else
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
