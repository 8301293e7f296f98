#version 460
// rope: rotary position embedding of a (source 0) [head_dim, n_head, n_tokens, ne3] with
// the i32 positions of source 1 (n_tokens, or 4 * n_tokens in the M-RoPE modes: streams
// t, h, w, e) and the optional f32 frequency factors of source 2: ggml's rope_ext and
// rope_multi, every mode (normal, neox, mrope, vision, imrope), YaRN included, as
// core/rope_functions.hpp writes them. Pair slot k of a row of token t is rotated by
// theta = p * q^e * g_k with p the position of k's stream, q = freq_base^(-2 / n_dims),
// e the exponent (k; its offset in its section in vision mode) and g_k = (freq_scale (1 -
// mix_k) + mix_k) / ff[k] (mix_k YaRN's ramp times ext_factor; 0 when ext_factor is 0);
// the rotation is scaled by mscale. Values past the rotated ones are copied as bits. Any
// strides and offsets; in place (dst sharing a's memory and layout) too, as each
// invocation reads its pair before writing it.
//
// Push constants: prm.x n_dims, prm.y the mode, prm.zw q as an f32 pair hi + lo (the host
// computes it in double); a_ne.x freq_scale, a_ne.y ext_factor, a_ne.z mscale (float
// bits), b_ne.x and b_ne.y YaRN's correction dims low and high (float bits), b_ne.z the
// frequency factors' stride (binding units; 0: none), offs.w their offset; sections[0..3]
// in b_nb.y, b_nb.z, b_nb.w, a_ne.w. (a's extents are the destination's, read from ne.)
//
// Accuracy. The CPU backend computes the angle, its sine and cosine in double, as
// positions reach thousands of radians, where an f32 angle is off by ~1e-3 already. Here
// the angle is computed in float-float arithmetic (an unevaluated sum hi + lo of two
// f32, ~44 bits; Dekker's products, so no fused multiply-add is needed): q^e by
// repeated squaring, times pos * g_k (g_k itself float-float: YaRN's mix is f32, exact
// outside the ramp, where angles are large). It is reduced modulo pi/2 with a
// three-part pi/2, and the sine and cosine of the remainder, |r| <= pi/4, come from
// minimax polynomials (Cephes' sinf / cosf), so that their error (~1e-7) does not
// depend on the device's sin and cos. Angles stay within ~1e-6 of the CPU's up to
// ~1e7 radians (positions in the millions).
// The rotation itself is the CPU's: x0 * c - x1 * s and x0 * s + x1 * c in f32, without
// contraction (c and s scaled by mscale in f32, where the CPU scales them in double); f16 values are widened exactly and the results rounded to nearest even.
//
//   variant           a     dst   needs
//   rope_f32          f32   f32   -
//   rope_f16          f16   f16   16-bit storage (no 16-bit arithmetic)
//   rope_set_rows_f32 f32   f32   -
//   rope_set_rows_f16 f32   f16   16-bit storage
//
// SET_ROWS: the fused rope_set_rows of core/fusion.hpp (normal and neox modes; a with unit
// element stride): token t's rows go to row idx[t] of the destination (a cache with rows
// of unit stride), head i1 at i1 * ne.x in it, as set_rows writes the rope's rows
// reshaped to one row per token. idx: i32, source 3 (binding 5) at the offset the backend
// keeps in a_nb.x, element stride b_nb.y; the destination's row stride b_nb.z and rows
// b_nb.w (the M-RoPE sections' words, unused in these modes). An index outside [0, rows)
// writes nothing and raises ERROR_INDEX in the stream's error word (binding 3).
//
// variant: rope_f32 -DA_F32
// variant: rope_f16 -DA_F16
// variant: rope_set_rows_f32 -DA_F32 -DSET_ROWS
// variant: rope_set_rows_f16 -DA_F32 -DD_F16 -DSET_ROWS
#include "common.glsl"
#include "convert.glsl"

#if defined(A_F16) || defined(D_F16)
#extension GL_EXT_shader_16bit_storage : require
#endif
#if defined(A_F16)
#define A_UNIT uint16_t
#define D_F16
#else
#define A_UNIT uint
#endif
#if defined(D_F16)
#define D_UNIT uint16_t
#else
#define D_UNIT uint
#endif

layout(local_size_x = 128) in;
layout(binding = 0, std430) readonly buffer A { A_UNIT a[]; };
layout(binding = 1, std430) readonly buffer P { int pos[]; };
layout(binding = 2, std430) writeonly buffer D { D_UNIT d[]; };
layout(binding = 4, std430) readonly buffer F { float ff[]; };
#if defined(SET_ROWS)
layout(binding = 3, std430) buffer E { uint error_word; };
layout(binding = 5, std430) readonly buffer I { int idx[]; };
#define A_NB_X 1u
#else
#define A_NB_X p.a_nb.x
#endif

#if defined(A_F16)
float load_value(uint at_) { return uintBitsToFloat(f16_bits_to_f32(uint(a[at_]))); }
#else
float load_value(uint at_) { return uintBitsToFloat(a[at_]); }
#endif
#if defined(D_F16)
void store_value(uint at_, float v) { d[at_] = uint16_t(f32_bits_to_f16(floatBitsToUint(v))); }
#else
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

vec2 ff_add_f(vec2 x, float y) {
    const vec2 sm = two_sum(x.x, y);
    precise float e = sm.y + x.y;
    return fast_two_sum(sm.x, e);
}

// x / y, with one correction step: the remainder x - q y is exact in float-float.
vec2 ff_div_f(vec2 x, float y) {
    const float q = x.x / y;
    const vec2 qy = two_prod(q, y);
    precise float r = (((x.x - qy.x) - qy.y) + x.y) / y;
    return fast_two_sum(q, r);
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

// The position stream (0 t, 1 h, 2 w, 3 e) of pair slot k and the exponent of its
// frequency (core/rope_functions.hpp's stream_of).
uint stream_of(uint k, out uint exponent) {
    exponent = k;
    const uint mode = p.prm.y;
    if ((mode & 8u) == 0u) return 0u;
    const uint s0 = p.b_nb.y, s1 = p.b_nb.z, s2 = p.b_nb.w, s3 = p.a_ne.w;
    const uint total = s0 + s1 + s2 + s3;
    const uint sector = k % total;
    if (mode == 40u) { // imrope: interleaved
        if (sector % 3u == 1u && sector < 3u * s1) return 1u;
        if (sector % 3u == 2u && sector < 3u * s2) return 2u;
        if (sector % 3u == 0u && sector < 3u * s0) return 0u;
        return 3u;
    }
    const uint start[4] = uint[4](0u, s0, s0 + s1, s0 + s1 + s2);
    uint stream = 3u;
    while (stream > 0u && sector < start[stream]) --stream;
    if (mode != 24u) return stream;
    // vision: the stream restarts where its section starts, unless an earlier stream
    // restarts at the same sector or the sector is never reached
    const uint r = start[stream];
    bool resets = r < total;
    for (uint x = 0u; x < stream; ++x) resets = resets && start[x] != r;
    if (resets) exponent = sector - r;
    return stream;
}

// g_k = (freq_scale (1 - mix) + mix) / ff[k] as float-float (see the file comment).
vec2 slot_factor(uint k) {
    const float freq_scale = uintBitsToFloat(p.a_ne.x);
    const float ext = uintBitsToFloat(p.a_ne.y);
    vec2 g = vec2(freq_scale, 0.0);
    if (ext != 0.0) {
        const float low = uintBitsToFloat(p.b_ne.x), high = uintBitsToFloat(p.b_ne.y);
        const float y = (float(k) - low) / max(0.001, high - low);
        precise float mix = (1.0 - clamp(y, 0.0, 1.0)) * ext;
        if (mix != 0.0) g = ff_add_f(two_prod(freq_scale, 1.0 - mix), mix);
    }
    if (p.b_ne.z != 0u) g = ff_div_f(g, ff[p.offs.w + k * p.b_ne.z]);
    return g;
}

void main() {
    const uint n_dims = p.prm.x;
    const uint mode = p.prm.y;
    const uint pairs = mode == 24u ? n_dims : n_dims / 2u; // vision rotates every value
    const uint per_row = p.ne.x - pairs; // the pairs, then the values copied
    const uint rows = p.ne.y * p.ne.z * p.ne.w;
    const uint item = linear_id(128);
    if (item >= per_row * rows) return;
    const uint k = item % per_row;
    const uvec4 rc = coords(item / per_row, uvec4(p.ne.y, p.ne.z, p.ne.w, 1u)); // i1, i2, i3
    const uint src = p.offs.x + rc.x * p.a_nb.y + rc.y * p.a_nb.z + rc.z * p.a_nb.w;
#if defined(SET_ROWS)
    const int row = idx[p.a_nb.x + rc.y * p.b_nb.y];
    if (row < 0 || uint(row) >= p.b_nb.w) {
        if (k == 0u && rc.x == 0u) atomicOr(error_word, ERROR_INDEX);
        return;
    }
    const uint dst = p.offs.z + uint(row) * p.b_nb.z + rc.x * p.ne.x;
#else
    const uint dst = p.offs.z + rc.x * p.nb.y + rc.y * p.nb.z + rc.z * p.nb.w;
#endif

    if (k >= pairs) { // past the rotated values: copied
        const uint j = 2u * pairs + (k - pairs);
#if defined(D_F16) && !defined(A_F16)
        store_value(dst + j * p.nb.x, load_value(src + j * A_NB_X));
#else
        d[dst + j * p.nb.x] = a[src + j * A_NB_X];
#endif
        return;
    }

    uint exponent;
    const uint stream = stream_of(k, exponent);
    // the frequency q^exponent, by repeated squaring
    vec2 w = vec2(1.0, 0.0);
    vec2 base = uintBitsToFloat(p.prm.zw);
    for (uint e = exponent; e != 0u; e >>= 1) {
        if ((e & 1u) != 0u) w = ff_mul(w, base);
        if (e > 1u) base = ff_mul(base, base);
    }
    // the position, exactly: its high 16 bits and the rest are both exact floats
    const int position = pos[p.offs.y + (rc.y + stream * p.ne.z) * p.b_nb.x];
    const int high = position & int(0xffff0000u);
    const vec2 at_pos = ff_mul(two_sum(float(high), float(position - high)), slot_factor(k));
    const vec2 cs = cos_sin(ff_mul(at_pos, w));
    const float mscale = uintBitsToFloat(p.a_ne.z);
    precise float c = cs.x * mscale;
    precise float sn = cs.y * mscale;

    const uint j0 = mode == 0u ? 2u * k : k;
    const uint j1 = mode == 0u ? 2u * k + 1u : k + (mode == 24u ? n_dims : n_dims / 2u);
    const float x0 = load_value(src + j0 * A_NB_X);
    const float x1 = load_value(src + j1 * A_NB_X);
    precise float y0 = x0 * c - x1 * sn;
    precise float y1 = x0 * sn + x1 * c;
    store_value(dst + j0 * p.nb.x, y0);
    store_value(dst + j1 * p.nb.x, y1);
}
