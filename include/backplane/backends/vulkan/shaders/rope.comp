#version 460
// rope: rotary position embedding of a (source 0) [head_dim, n_head, n_tokens, ne3] with
// the i32 positions of source 1, pos[n_tokens]. Pair i (0 <= i < n_dims / 2) of a row of
// token t is rotated by theta = pos[t] * freq_scale * freq_base^(-2i / n_dims): normal
// mode pairs (x[2i], x[2i + 1]), neox mode (x[i], x[i + n_dims / 2]); values past n_dims
// are copied as bits. Any strides and offsets; in place (dst sharing a's memory and
// layout) too, as each invocation reads its pair before writing it.
//
// Push constants: prm.x n_dims, prm.y the mode (2: neox), prm.zw q = freq_base^(-2 /
// n_dims) as an f32 pair hi + lo (the host computes it in double), offs.w freq_scale.
//
// Accuracy. The CPU backend computes the angle, its sine and cosine in double, as
// positions reach thousands of radians, where an f32 angle is off by ~1e-3 already. Here
// the angle is computed in float-float arithmetic (an unevaluated sum hi + lo of two
// f32, ~44 bits; Dekker's products, so no fused multiply-add is needed): q^i by
// repeated squaring, times pos * freq_scale. It is reduced modulo pi/2 with a
// three-part pi/2, and the sine and cosine of the remainder, |r| <= pi/4, come from
// minimax polynomials (Cephes' sinf / cosf), so that their error (~1e-7) does not
// depend on the device's sin and cos. Angles stay within ~1e-6 of the CPU's up to
// ~1e7 radians (positions in the millions).
// The rotation itself is the CPU's: x0 * c - x1 * s and x0 * s + x1 * c in f32, without
// contraction; f16 values are widened exactly and the results rounded to nearest even.
//
//   variant    a, dst   needs
//   rope_f32   f32      -
//   rope_f16   f16      16-bit storage (no 16-bit arithmetic)
//
// variant: rope_f32 -DA_F32
// variant: rope_f16 -DA_F16
#include "common.glsl"
#include "convert.glsl"

#if defined(A_F16)
#extension GL_EXT_shader_16bit_storage : require
#define UNIT uint16_t
#else
#define UNIT uint
#endif

layout(local_size_x = 128) in;
layout(binding = 0, std430) readonly buffer A { UNIT a[]; };
layout(binding = 1, std430) readonly buffer P { int pos[]; };
layout(binding = 2, std430) writeonly buffer D { UNIT d[]; };

#if defined(A_F16)
float load_value(uint at_) { return uintBitsToFloat(f16_bits_to_f32(uint(a[at_]))); }
void store_value(uint at_, float v) { d[at_] = uint16_t(f32_bits_to_f16(floatBitsToUint(v))); }
#else
float load_value(uint at_) { return uintBitsToFloat(a[at_]); }
void store_value(uint at_, float v) { d[at_] = floatBitsToUint(v); }
#endif

// Float-float arithmetic: vec2(hi, lo) stands for hi + lo, |lo| <= ulp(hi) / 2, built on
// convert.glsl's error-free transformations. Every operation is `precise`, so that no
// compiler reassociates or fuses it.

vec2 ff_mul(vec2 x, vec2 y) {
    const vec2 pr = two_prod(x.x, y.x);
    precise float e = pr.y + (x.x * y.y + x.y * y.x);
    return fast_two_sum(pr.x, e);
}

vec2 ff_mul_f(vec2 x, float y) {
    const vec2 pr = two_prod(x.x, y);
    precise float e = pr.y + x.y * y;
    return fast_two_sum(pr.x, e);
}

// theta - k pi/2 for a whole number k, pi/2 = PIO2_1 + PIO2_2 + PIO2_3 (f32 parts):
// k PIO2_1 and k PIO2_2 are exact (Dekker), and theta.x - k PIO2_1 too (Sterbenz).
float reduce(vec2 theta, float k) {
    const float PIO2_1 = uintBitsToFloat(0x3fc90fdbu); //  1.57079637e+00
    const float PIO2_2 = uintBitsToFloat(0xb33bbd2eu); // -4.37113883e-08
    const float PIO2_3 = uintBitsToFloat(0xa6f72cedu); // -1.71512451e-15
    const vec2 p1 = two_prod(k, PIO2_1);
    const vec2 p2 = two_prod(k, PIO2_2);
    precise float s0 = theta.x - p1.x;
    precise float tail = ((theta.y - p1.y) - p2.y) - k * PIO2_3;
    precise float r = (s0 - p2.x) + tail;
    return r;
}

// cos and sin of theta (float-float).
vec2 cos_sin(vec2 theta) {
    const float TWO_OVER_PI = uintBitsToFloat(0x3f22f983u); // 6.36619747e-01
    const float PI_OVER_4 = uintBitsToFloat(0x3f490fdbu);   // 7.85398185e-01
    float k = roundEven(theta.x * TWO_OVER_PI);
    float r = reduce(theta, k);
    if (abs(r) > PI_OVER_4) { // k is off by one where theta.x * 2/pi rounded across a half
        k += sign(r);
        r = reduce(theta, k);
    }

    const float z = r * r;
    const float sn = r + r * z * (-1.6666654611e-1 + z * (8.3321608736e-3 + z * -1.9515295891e-4));
    const float cs = 1.0 - 0.5 * z + z * z * (4.166664568298827e-2 + z * (-1.388731625493765e-3 + z * 2.443315711809948e-5));

    // the quadrant: k mod 4 (exact steps, whatever k's size)
    const uint quadrant = uint(k - 4.0 * floor(k * 0.25));
    switch (quadrant) {
    case 0u: return vec2(cs, sn);
    case 1u: return vec2(-sn, cs);
    case 2u: return vec2(-cs, -sn);
    default: return vec2(sn, -cs);
    }
}

void main() {
    const uint n_dims = p.prm.x;
    const uint half_dims = n_dims / 2u;
    const uint per_row = p.ne.x - half_dims; // the pairs, then the values copied
    const uint rows = p.ne.y * p.ne.z * p.ne.w;
    const uint item = linear_id(128);
    if (item >= per_row * rows) return;
    const uint k = item % per_row;
    const uvec4 rc = coords(item / per_row, uvec4(p.ne.y, p.ne.z, p.ne.w, 1u)); // i1, i2, i3
    const uint src = p.offs.x + rc.x * p.a_nb.y + rc.y * p.a_nb.z + rc.z * p.a_nb.w;
    const uint dst = p.offs.z + rc.x * p.nb.y + rc.y * p.nb.z + rc.z * p.nb.w;

    if (k >= half_dims) { // past n_dims: copied
        const uint j = n_dims + (k - half_dims);
        d[dst + j * p.nb.x] = a[src + j * p.a_nb.x];
        return;
    }

    // the frequency q^k, by repeated squaring
    vec2 w = vec2(1.0, 0.0);
    vec2 base = uintBitsToFloat(p.prm.zw);
    for (uint e = k; e != 0u; e >>= 1) {
        if ((e & 1u) != 0u) w = ff_mul(w, base);
        if (e > 1u) base = ff_mul(base, base);
    }
    // the position, exactly: its high 16 bits and the rest are both exact floats
    const int position = pos[p.offs.y + rc.y * p.b_nb.x];
    const int high = position & int(0xffff0000u);
    const vec2 at_pos = ff_mul_f(two_sum(float(high), float(position - high)), uintBitsToFloat(p.offs.w));
    const vec2 cs = cos_sin(ff_mul(at_pos, w));

    const bool neox = p.prm.y == 2u;
    const uint j0 = neox ? k : 2u * k;
    const uint j1 = neox ? k + half_dims : 2u * k + 1u;
    const float x0 = load_value(src + j0 * p.a_nb.x);
    const float x1 = load_value(src + j1 * p.a_nb.x);
    precise float y0 = x0 * cs.x - x1 * cs.y;
    precise float y1 = x0 * cs.y + x1 * cs.x;
    store_value(dst + j0 * p.nb.x, y0);
    store_value(dst + j1 * p.nb.x, y1);
}
