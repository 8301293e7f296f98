// Dequantizing the weight types beyond q8_0 and q4_0: q4_1, q5_0, q5_1, iq4_nl, mxfp4
// (blocks of 32 values), the K-quants q2_K, q3_K, q4_K, q5_K, q6_K, q8_K, and iq4_xs,
// tq1_0, tq2_0 and the lattice i-quants iq2_xxs, iq2_xs, iq2_s, iq3_xxs, iq3_s, iq1_s,
// iq1_m (blocks of 256), as core's dequantize_row_* compute them
// (core/quants.hpp, core/kquants.hpp, core/iquants.hpp): the
// same f32 operations in the same order, each `precise` so that no compiler fuses a
// product into a multiply-add, scales widened from f16 exactly. Bit for bit as long as
// the device keeps subnormal products (mxfp4's two smallest exponents scale by 2^-128
// and 2^-127, which a device may flush).
//
// The including shader defines, before including this file (after common.glsl and
// convert.glsl):
//   Q_<TYPE>    the block type: Q_Q4_1, Q_Q5_0, Q_Q5_1, Q_IQ4_NL, Q_MXFP4, Q_Q2_K,
//               Q_Q3_K, Q_Q4_K, Q_Q5_K, Q_Q6_K, Q_Q8_K, Q_IQ4_XS, Q_TQ1_0, Q_TQ2_0,
//               Q_IQ2_XXS, Q_IQ2_XS, Q_IQ2_S, Q_IQ3_XXS, Q_IQ3_S, Q_IQ1_S or Q_IQ1_M (the
//               lattice types read their grid at binding 9);
//   Q_UNIT(i)   unit i of the binding that holds the blocks, as a uint: a 16-bit word
//               (every type but mxfp4), or a byte (mxfp4: its 17-byte blocks are not
//               2-byte aligned, so its binding is read as uint8_t, which needs 8-bit
//               storage);
//   Q_HALF(h)   optional: f16 bits h as a float (default: f16_bits_to_f32, exact; a
//               kernel may use unpackHalf2x16, exact too on any IEEE device).
// It then has Q_BLOCK (values per block), Q_UNITS (units per block) and
// q_eight(base, j, lo, hi): values j .. j + 7 (j a multiple of 8) of the block whose
// first unit is at index base, in lo and hi; q_value(base, j): value j alone. A kernel
// that reads several chunks of one sub-block (16 or 32 values sharing a scale) may decode
// the scales once with q_scales(base, j) and pass them to q_eight_with.
//
// The layouts (byte offsets in a block; nibble j of a 32-value block is the low nibble of
// qs[j] for j < 16, the high one of qs[j - 16] otherwise):
//   q4_1    0 d, 2 m, 4 qs[16]                     q * d + m
//   q5_0    0 d, 2 qh[4], 6 qs[16]                 (q - 16) * d, bit j of qh q's fifth
//   q5_1    0 d, 2 m, 4 qh[4], 8 qs[16]            q * d + m
//   iq4_nl  0 d, 2 qs[16]                          d * iq4nl[q]
//   mxfp4   0 e, 1 qs[16]                          mxfp4[q] * 2^(e - 128)
//   q2_K    0 scales[16], 16 qs[64], 80 d, 82 dmin (d * sc) * q - (dmin * m), 16 a scale
//   q3_K    0 hmask[32], 32 qs[64], 96 scales[12], 108 d   (d * sc) * (q - 4 or q)
//   q4_K    0 d, 2 dmin, 4 scales[12], 16 qs[128]  (d * sc) * q - (dmin * m), 32 a scale
//   q5_K    0 d, 2 dmin, 4 scales[12], 16 qh[32], 48 qs[128]
//   q6_K    0 ql[128], 128 qh[64], 192 scales[16] (i8), 208 d   (d * sc) * (q - 32)
//   q8_K    0 d (f32), 4 qs[256] (i8), 260 bsums   d * q
//   iq4_xs  0 d, 2 scales_h, 4 scales_l[4], 8 qs[128]   (d * (sc - 32)) * iq4nl[q], 32 a scale
//   tq1_0   0 qs[48], 48 qh[4], 52 d           (q - 1) * d, q a base-3 digit (trit)
//   tq2_0   0 qs[64], 64 d                     (q - 1) * d, q of 2 bits
//   iq2_xxs 0 d, 2 (idx[4], aux u32)[8]        per 32: (d (0.5 + aux>>28) / 4) grid[idx] +-
//   iq2_xs  0 d, 2 qs u16[32], 66 scales[8]    per 8: grid[q & 511], signs q >> 9
//   iq2_s   0 d, 2 qs[32], 34 signs[32], 66 qh[8], 74 scales[8]   grid[qs | qh bits 8, 9]
//   iq3_xxs 0 d, 2 qs[64], 66 aux u32[8]       per 4: grid[qs], (d (0.5 + aux>>28) / 2)
//   iq3_s   0 d, 2 qs[64], 66 qh[8], 74 signs[32], 106 scales[4]   d (1 + 2 s) grid[qs | qh]
//   iq1_s   0 d, 2 qs[32], 34 qh u16[8]        d (2 s + 1) (grid[qs | qh bits] +- 1/8)
//   iq1_m   0 qs[32], 32 qh[16], 48 scales u16[4] (d in their top nibbles)   likewise
// (signs: a bit per value, negative where set; iq2_xxs's, iq2_xs's and iq3_xxs's 7-bit
// groups stand for 8 with an even number of minus signs, the eighth their parity)
// Every field a value reads from starts at an even offset (mxfp4's quants excepted), so
// eight consecutive bytes are four 16-bit words.
#ifndef BACKPLANE_QUANTS_GLSL
#define BACKPLANE_QUANTS_GLSL

#ifndef Q_HALF
#define Q_HALF(h) uintBitsToFloat(f16_bits_to_f32(h))
#endif

#if defined(Q_Q4_1)
#define Q_BLOCK 32u
#define Q_UNITS 10u
#elif defined(Q_Q5_0)
#define Q_BLOCK 32u
#define Q_UNITS 11u
#elif defined(Q_Q5_1)
#define Q_BLOCK 32u
#define Q_UNITS 12u
#elif defined(Q_IQ4_NL)
#define Q_BLOCK 32u
#define Q_UNITS 9u
#elif defined(Q_MXFP4)
#define Q_BLOCK 32u
#define Q_UNITS 17u
#elif defined(Q_Q2_K)
#define Q_BLOCK 256u
#define Q_UNITS 42u
#elif defined(Q_Q3_K)
#define Q_BLOCK 256u
#define Q_UNITS 55u
#elif defined(Q_Q4_K)
#define Q_BLOCK 256u
#define Q_UNITS 72u
#elif defined(Q_Q5_K)
#define Q_BLOCK 256u
#define Q_UNITS 88u
#elif defined(Q_Q6_K)
#define Q_BLOCK 256u
#define Q_UNITS 105u
#elif defined(Q_Q8_K)
#define Q_BLOCK 256u
#define Q_UNITS 146u
#elif defined(Q_IQ4_XS)
#define Q_BLOCK 256u
#define Q_UNITS 68u
#elif defined(Q_TQ1_0)
#define Q_BLOCK 256u
#define Q_UNITS 27u
#elif defined(Q_TQ2_0)
#define Q_BLOCK 256u
#define Q_UNITS 33u
#elif defined(Q_IQ2_XXS)
#define Q_BLOCK 256u
#define Q_UNITS 33u
#elif defined(Q_IQ2_XS)
#define Q_BLOCK 256u
#define Q_UNITS 37u
#elif defined(Q_IQ2_S)
#define Q_BLOCK 256u
#define Q_UNITS 41u
#elif defined(Q_IQ3_XXS)
#define Q_BLOCK 256u
#define Q_UNITS 49u
#elif defined(Q_IQ3_S)
#define Q_BLOCK 256u
#define Q_UNITS 55u
#elif defined(Q_IQ1_S)
#define Q_BLOCK 256u
#define Q_UNITS 25u
#elif defined(Q_IQ1_M)
#define Q_BLOCK 256u
#define Q_UNITS 28u
#else
#error "quants.glsl: define the block type (Q_Q4_1 ... Q_Q8_K, Q_IQ4_XS, Q_TQ1_0, Q_TQ2_0, Q_IQ2_XXS ... Q_IQ1_M)"
#endif

#if defined(Q_IQ2_XXS) || defined(Q_IQ2_XS) || defined(Q_IQ2_S) || defined(Q_IQ3_XXS) || defined(Q_IQ3_S) || \
    defined(Q_IQ1_S) || defined(Q_IQ1_M)
#define Q_LATTICE
// The type's grid (core/detail/iq_grids.hpp), which the backend binds here for every
// dispatch: 64-bit entries as two words, the low one first.
layout(std430, binding = 9) readonly buffer QGrid { uint q_grid[]; };
#endif

// ---------------------------------------------------------------------------------------
// Bytes and words of the block at base.

#if defined(Q_MXFP4)
uint q_byte(uint base, uint o) { return Q_UNIT(base + o) & 0xffu; }
// Bytes o .. o + 7.
void q_bytes8(uint base, uint o, out uvec4 lo, out uvec4 hi) {
    lo = uvec4(Q_UNIT(base + o), Q_UNIT(base + o + 1u), Q_UNIT(base + o + 2u), Q_UNIT(base + o + 3u)) & 0xffu;
    hi = uvec4(Q_UNIT(base + o + 4u), Q_UNIT(base + o + 5u), Q_UNIT(base + o + 6u), Q_UNIT(base + o + 7u)) & 0xffu;
}
#else
uint q_word(uint base, uint w) { return Q_UNIT(base + w) & 0xffffu; }
uint q_byte(uint base, uint o) { return (q_word(base, o >> 1) >> ((o & 1u) * 8u)) & 0xffu; }
float q_half(uint base, uint o) { return Q_HALF(q_word(base, o >> 1)); } // the f16 at byte o
// Bytes o .. o + 7, o even: four words.
void q_bytes8(uint base, uint o, out uvec4 lo, out uvec4 hi) {
    const uint w = base + (o >> 1);
    const uvec4 v = uvec4(Q_UNIT(w), Q_UNIT(w + 1u), Q_UNIT(w + 2u), Q_UNIT(w + 3u)) & 0xffffu;
    lo = uvec4(v.x, v.x >> 8, v.y, v.y >> 8) & 0xffu;
    hi = uvec4(v.z, v.z >> 8, v.w, v.w >> 8) & 0xffu;
}
#endif

// The 8 nibbles of values j .. j + 7 of a 32-value block whose qs start at byte qs.
void q_nibbles8(uint base, uint qs, uint j, out uvec4 lo, out uvec4 hi) {
    q_bytes8(base, qs + (j & 15u), lo, hi);
    const uint sh = j < 16u ? 0u : 4u;
    lo = (lo >> sh) & 15u;
    hi = (hi >> sh) & 15u;
}

#if defined(Q_Q5_0) || defined(Q_Q5_1)
// The fifth bits of values j .. j + 7 (qh a little-endian u32 at byte qh), as 16 or 0.
void q_fifth8(uint base, uint qh, uint j, inout uvec4 lo, inout uvec4 hi) {
    const uint high = (q_word(base, qh >> 1) | (q_word(base, (qh >> 1) + 1u) << 16)) >> j;
    lo |= ((uvec4(high) >> uvec4(0u, 1u, 2u, 3u)) & 1u) << 4;
    hi |= ((uvec4(high) >> uvec4(4u, 5u, 6u, 7u)) & 1u) << 4;
}
#endif

// Sign-extended bytes.
ivec4 q_signed(uvec4 b) { return (ivec4(b) << 24) >> 24; }

#if defined(Q_IQ4_NL) || defined(Q_IQ4_XS)
const float q_table[16] = float[16](-127.0, -104.0, -83.0, -65.0, -49.0, -35.0, -22.0, -10.0, 1.0, 13.0, 25.0,
                                    38.0, 53.0, 69.0, 89.0, 113.0);
#elif defined(Q_MXFP4)
const float q_table[16] = float[16](0.0, 1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 0.0, -1.0, -2.0, -3.0, -4.0, -6.0,
                                    -8.0, -12.0);
#endif
#if defined(Q_IQ4_NL) || defined(Q_IQ4_XS) || defined(Q_MXFP4)
vec4 q_lookup(uvec4 q) { return vec4(q_table[q.x], q_table[q.y], q_table[q.z], q_table[q.w]); }
#endif

#if defined(Q_Q4_K) || defined(Q_Q5_K)
// Sub-block j's (of 8) 6-bit scale and minimum, from the 12 bytes at byte 4 (core's
// scale_min): bytes 4 + i, 8 + i and 12 + i (i = j % 4) hold both sub-block i's and
// sub-block i + 4's, so the same three bytes are read either way (no branch).
uvec2 q_scale_min(uint base, uint j) {
    const uint i = j & 3u;
    const uint a = q_byte(base, 4u + i), b = q_byte(base, 8u + i), c = q_byte(base, 12u + i);
    return j < 4u ? uvec2(a, b) & 63u : uvec2((c & 15u) | ((a >> 6) << 4), (c >> 4) | ((b >> 6) << 4));
}
#endif

#if defined(Q_LATTICE)
// The little-endian u32 at byte o (even).
uint q_u32(uint base, uint o) { return q_word(base, o >> 1) | (q_word(base, (o >> 1) + 1u) << 16); }
// The bytes of a 32-bit grid word.
uvec4 q_grid_bytes(uint w) { return (uvec4(w) >> uvec4(0u, 8u, 16u, 24u)) & 0xffu; }
// The 8 bytes of 64-bit grid entry e (two words of q_grid).
void q_grid8(uint e, out uvec4 lo, out uvec4 hi) {
    lo = q_grid_bytes(q_grid[2u * e]);
    hi = q_grid_bytes(q_grid[2u * e + 1u]);
}
// The 8 signs a 7-bit group stands for: its bits, and their parity as the eighth.
uint q_even_signs(uint g) {
    g &= 127u;
    return g | ((uint(bitCount(g)) & 1u) << 7);
}
// v negated where bits k0 .. k0 + 3 of signs are set (exact).
vec4 q_signed4(vec4 v, uint signs, uint k0) {
    return mix(v, -v, notEqual((uvec4(signs) >> (uvec4(0u, 1u, 2u, 3u) + k0)) & 1u, uvec4(0u)));
}
#endif

#if defined(Q_TQ1_0)
// The base-3 digits k (0 the most significant) of tq1_0's bytes b, which hold five each
// as a fixed-point fraction: the byte times 3^k, kept to 8 bits, times 3, over 256.
uvec4 q_trits(uvec4 b, uint k) {
    const uint pow3[5] = uint[5](1u, 3u, 9u, 27u, 81u);
    return (((b * pow3[k]) & 0xffu) * 3u) >> 8;
}
#endif

// ---------------------------------------------------------------------------------------

// The scales of values j .. j + 7 (j a multiple of 8) of the block at base: x, the factor
// of each code (d, or d * sc of its sub-block), and y, the minimum subtracted (dmin * m)
// or added (q4_1's and q5_1's m), 0 where the type has none. The same for every value of
// j's sub-block (16 values for q2_K, q3_K, q6_K; 32 for q4_K, q5_K; the whole block for
// the others).
vec2 q_scales(uint base, uint j) {
#if defined(Q_Q4_1) || defined(Q_Q5_1)
    return vec2(q_half(base, 0u), q_half(base, 2u));
#elif defined(Q_Q5_0) || defined(Q_IQ4_NL)
    return vec2(q_half(base, 0u), 0.0);
#elif defined(Q_MXFP4)
    const uint e = q_byte(base, 0u); // 2^(e - 128); e 0 and 1 the subnormals 2^-128, 2^-127
    return vec2(uintBitsToFloat(e < 2u ? 0x00200000u << e : (e - 1u) << 23), 0.0);
#elif defined(Q_Q2_K)
    const uint s = q_byte(base, j >> 4);
    precise float dl = q_half(base, 80u) * float(s & 15u);
    precise float ml = q_half(base, 82u) * float(s >> 4);
    return vec2(dl, ml);
#elif defined(Q_Q3_K)
    const uint sj = j >> 4; // the sub-block of 16
    const uint sl = sj < 8u ? q_byte(base, 96u + sj) & 15u : q_byte(base, 96u + sj - 8u) >> 4;
    const int sc = int(sl | (((q_byte(base, 104u + (sj & 3u)) >> (2u * (sj >> 2))) & 3u) << 4)) - 32;
    precise float dl = q_half(base, 108u) * float(sc);
    return vec2(dl, 0.0);
#elif defined(Q_Q4_K) || defined(Q_Q5_K)
    const uvec2 sm = q_scale_min(base, j >> 5);
    precise float dl = q_half(base, 0u) * float(sm.x);
    precise float ml = q_half(base, 2u) * float(sm.y);
    return vec2(dl, ml);
#elif defined(Q_Q6_K)
    precise float dl = q_half(base, 208u) * float(q_signed(uvec4(q_byte(base, 192u + (j >> 4)))).x);
    return vec2(dl, 0.0);
#elif defined(Q_Q8_K)
    return vec2(uintBitsToFloat(q_word(base, 0u) | (q_word(base, 1u) << 16)), 0.0);
#elif defined(Q_IQ4_XS)
    const uint ib = j >> 5; // the sub-block of 32
    const uint sl = (q_byte(base, 4u + (ib >> 1)) >> (4u * (ib & 1u))) & 15u;
    const uint sh = (q_word(base, 1u) >> (2u * ib)) & 3u;
    precise float dl = q_half(base, 0u) * float(int(sl | (sh << 4)) - 32);
    return vec2(dl, 0.0);
#elif defined(Q_TQ1_0)
    return vec2(q_half(base, 52u), 0.0);
#elif defined(Q_TQ2_0)
    return vec2(q_half(base, 64u), 0.0);
#elif defined(Q_IQ2_XXS) || defined(Q_IQ3_XXS)
    // the sub-block of 32's scale: the top 4 bits of its aux word
#if defined(Q_IQ2_XXS)
    const uint aux = q_u32(base, 6u + 8u * (j >> 5));
    precise float db = q_half(base, 0u) * (0.5 + float(aux >> 28)) * 0.25;
#else
    const uint aux = q_u32(base, 66u + 4u * (j >> 5));
    precise float db = q_half(base, 0u) * (0.5 + float(aux >> 28)) * 0.5;
#endif
    return vec2(db, 0.0);
#elif defined(Q_IQ2_XS) || defined(Q_IQ2_S)
    // a 4-bit scale per 16 values
#if defined(Q_IQ2_XS)
    const uint sc = q_byte(base, 66u + (j >> 5));
#else
    const uint sc = q_byte(base, 74u + (j >> 5));
#endif
    precise float db = q_half(base, 0u) * (0.5 + float((sc >> (4u * ((j >> 4) & 1u))) & 15u)) * 0.25;
    return vec2(db, 0.0);
#elif defined(Q_IQ3_S)
    const uint ib = j >> 5;
    precise float db = q_half(base, 0u) * float(1u + 2u * ((q_byte(base, 106u + (ib >> 1)) >> (4u * (ib & 1u))) & 15u));
    return vec2(db, 0.0);
#elif defined(Q_IQ1_S)
    const uint qh = q_word(base, 17u + (j >> 5));
    precise float dl = q_half(base, 0u) * float(2u * ((qh >> 12) & 7u) + 1u);
    return vec2(dl, (qh & 0x8000u) != 0u ? -0.125 : 0.125);
#elif defined(Q_IQ1_M)
    const uvec4 sc = uvec4(q_word(base, 24u), q_word(base, 25u), q_word(base, 26u), q_word(base, 27u));
    const uint dbits = (sc.x >> 12) | ((sc.y >> 8) & 0x00f0u) | ((sc.z >> 4) & 0x0f00u) | (sc.w & 0xf000u);
    const uint ib = j >> 5, l = (j >> 3) & 3u;
    const uint s = (sc[ib >> 1] >> (6u * (ib & 1u) + 3u * (l >> 1))) & 7u;
    const uint h = q_byte(base, 32u + 2u * ib + (l >> 1)) >> (4u * (l & 1u));
    precise float dl = Q_HALF(dbits) * float(2u * s + 1u);
    return vec2(dl, (h & 8u) != 0u ? -0.125 : 0.125);
#endif
}

// Values j .. j + 7 (j a multiple of 8) of the block at base, whose scales are s
// (q_scales(base, j)).
void q_eight_with(uint base, uint j, vec2 s, out vec4 lo, out vec4 hi) {
    uvec4 a, b;
#if defined(Q_Q4_1) || defined(Q_Q5_1)
#if defined(Q_Q4_1)
    q_nibbles8(base, 4u, j, a, b);
#else
    q_nibbles8(base, 8u, j, a, b);
    q_fifth8(base, 4u, j, a, b);
#endif
    precise vec4 x = vec4(a) * s.x + s.y; // q * d + m
    precise vec4 y = vec4(b) * s.x + s.y;
#elif defined(Q_Q5_0)
    q_nibbles8(base, 6u, j, a, b);
    q_fifth8(base, 2u, j, a, b);
    precise vec4 x = vec4(ivec4(a) - 16) * s.x; // (q - 16) * d
    precise vec4 y = vec4(ivec4(b) - 16) * s.x;
#elif defined(Q_IQ4_NL)
    q_nibbles8(base, 2u, j, a, b);
    precise vec4 x = s.x * q_lookup(a); // d * table[q]
    precise vec4 y = s.x * q_lookup(b);
#elif defined(Q_MXFP4)
    q_nibbles8(base, 1u, j, a, b);
    precise vec4 x = q_lookup(a) * s.x; // table[q] * d
    precise vec4 y = q_lookup(b) * s.x;
#elif defined(Q_Q2_K)
    q_bytes8(base, 16u + 32u * (j >> 7) + (j & 31u), a, b);
    const uint sh = 2u * ((j & 127u) >> 5);
    precise vec4 x = s.x * vec4((a >> sh) & 3u) - s.y; // (d * sc) * q - (dmin * m)
    precise vec4 y = s.x * vec4((b >> sh) & 3u) - s.y;
#elif defined(Q_Q3_K)
    uvec4 ma, mb;
    q_bytes8(base, j & 31u, ma, mb); // hmask: bit j / 32 of byte j % 32
    q_bytes8(base, 32u + 32u * (j >> 7) + (j & 31u), a, b);
    const uint sh = 2u * ((j & 127u) >> 5), hb = j >> 5;
    const ivec4 qa = ivec4((a >> sh) & 3u) - ivec4(((ma >> hb) & 1u) ^ 1u) * 4;
    const ivec4 qb = ivec4((b >> sh) & 3u) - ivec4(((mb >> hb) & 1u) ^ 1u) * 4;
    precise vec4 x = s.x * vec4(qa); // (d * sc) * (q - 4), or q with the third bit
    precise vec4 y = s.x * vec4(qb);
#elif defined(Q_Q4_K) || defined(Q_Q5_K)
    const uint sj = j >> 5; // the sub-block of 32
#if defined(Q_Q4_K)
    q_bytes8(base, 16u + 32u * (sj >> 1) + (j & 31u), a, b);
#else
    q_bytes8(base, 48u + 32u * (sj >> 1) + (j & 31u), a, b);
#endif
    const uint sh = (sj & 1u) * 4u;
    a = (a >> sh) & 15u;
    b = (b >> sh) & 15u;
#if defined(Q_Q5_K)
    uvec4 ha, hb;
    q_bytes8(base, 16u + (j & 31u), ha, hb);
    a += ((ha >> sj) & 1u) * 16u;
    b += ((hb >> sj) & 1u) * 16u;
#endif
    precise vec4 x = s.x * vec4(a) - s.y; // (d * sc) * q - (dmin * m)
    precise vec4 y = s.x * vec4(b) - s.y;
#elif defined(Q_Q6_K)
    const uint h = j >> 7, l = j & 31u, part = (j & 127u) >> 5;
    uvec4 ha, hb;
    q_bytes8(base, 64u * h + 32u * (part & 1u) + l, a, b);
    q_bytes8(base, 128u + 32u * h + l, ha, hb);
    const uint sh = part < 2u ? 0u : 4u;
    const ivec4 qa = ivec4(((a >> sh) & 15u) | (((ha >> (2u * part)) & 3u) << 4)) - 32;
    const ivec4 qb = ivec4(((b >> sh) & 15u) | (((hb >> (2u * part)) & 3u) << 4)) - 32;
    precise vec4 x = s.x * vec4(qa); // (d * sc) * (q - 32)
    precise vec4 y = s.x * vec4(qb);
#elif defined(Q_Q8_K)
    q_bytes8(base, 4u + j, a, b);
    precise vec4 x = s.x * vec4(q_signed(a)); // d * q
    precise vec4 y = s.x * vec4(q_signed(b));
#elif defined(Q_IQ4_XS)
    q_nibbles8(base, 8u + 16u * (j >> 5), j & 31u, a, b);
    precise vec4 x = s.x * q_lookup(a); // (d * (sc - 32)) * table[q]
    precise vec4 y = s.x * q_lookup(b);
#elif defined(Q_TQ1_0)
    // values 32 k + m (< 160): trit k of byte m; 160 + 16 k + m (< 240): of byte 32 + m;
    // 240 + 4 k + m: of qh's byte m (48 + m), so eight of those span two trits
    if (j < 160u) {
        q_bytes8(base, j & 31u, a, b);
        a = q_trits(a, j >> 5);
        b = q_trits(b, j >> 5);
    } else if (j < 240u) {
        q_bytes8(base, 32u + ((j - 160u) & 15u), a, b);
        a = q_trits(a, (j - 160u) >> 4);
        b = q_trits(b, (j - 160u) >> 4);
    } else {
        uvec4 unused;
        q_bytes8(base, 48u, a, unused);
        b = q_trits(a, ((j - 240u) >> 2) + 1u);
        a = q_trits(a, (j - 240u) >> 2);
    }
    precise vec4 x = vec4(ivec4(a) - 1) * s.x; // (q - 1) * d
    precise vec4 y = vec4(ivec4(b) - 1) * s.x;
#elif defined(Q_TQ2_0)
    // value 128 h + 32 l + m: bits 2 l of byte 32 h + m
    q_bytes8(base, 32u * (j >> 7) + (j & 31u), a, b);
    const uint sh = 2u * ((j >> 5) & 3u);
    precise vec4 x = vec4(ivec4((a >> sh) & 3u) - 1) * s.x; // (q - 1) * d
    precise vec4 y = vec4(ivec4((b >> sh) & 3u) - 1) * s.x;
#elif defined(Q_LATTICE)
    const uint ib = j >> 5, l = (j >> 3) & 3u;
    uint signs;
#if defined(Q_IQ2_XXS)
    q_grid8(q_byte(base, 2u + 8u * ib + l), a, b);
    signs = q_even_signs(q_u32(base, 6u + 8u * ib) >> (7u * l));
#elif defined(Q_IQ2_XS)
    const uint q = q_word(base, 1u + 4u * ib + l);
    q_grid8(q & 511u, a, b);
    signs = q_even_signs(q >> 9);
#elif defined(Q_IQ2_S)
    q_grid8(q_byte(base, 2u + 4u * ib + l) | ((q_byte(base, 66u + ib) << (8u - 2u * l)) & 0x300u), a, b);
    signs = q_byte(base, 34u + 4u * ib + l);
#elif defined(Q_IQ3_XXS)
    a = q_grid_bytes(q_grid[q_byte(base, 2u + 8u * ib + 2u * l)]);
    b = q_grid_bytes(q_grid[q_byte(base, 3u + 8u * ib + 2u * l)]);
    signs = q_even_signs(q_u32(base, 66u + 4u * ib) >> (7u * l));
#elif defined(Q_IQ3_S)
    const uint qh = q_byte(base, 66u + ib);
    a = q_grid_bytes(q_grid[q_byte(base, 2u + 8u * ib + 2u * l) | ((qh << (8u - 2u * l)) & 256u)]);
    b = q_grid_bytes(q_grid[q_byte(base, 3u + 8u * ib + 2u * l) | ((qh << (7u - 2u * l)) & 256u)]);
    signs = q_byte(base, 74u + 4u * ib + l);
#elif defined(Q_IQ1_S)
    const uint qh = q_word(base, 17u + ib);
    q_grid8(q_byte(base, 2u + 4u * ib + l) | (((qh >> (3u * l)) & 7u) << 8), a, b);
#elif defined(Q_IQ1_M)
    const uint h = q_byte(base, 32u + 2u * ib + (l >> 1)) >> (4u * (l & 1u));
    q_grid8(q_byte(base, 4u * ib + l) | ((h & 7u) << 8), a, b);
#endif
#if defined(Q_IQ1_S) || defined(Q_IQ1_M)
    precise vec4 x = s.x * (vec4(q_signed(a)) + s.y); // dl * (grid value + shift)
    precise vec4 y = s.x * (vec4(q_signed(b)) + s.y);
#else
    precise vec4 x = q_signed4(s.x * vec4(a), signs, 0u); // +- db * grid value
    precise vec4 y = q_signed4(s.x * vec4(b), signs, 4u);
#endif
#endif
    lo = x;
    hi = y;
}

// Values j .. j + 7 (j a multiple of 8) of the block at base.
void q_eight(uint base, uint j, out vec4 lo, out vec4 hi) { q_eight_with(base, j, q_scales(base, j), lo, hi); }

// Value j of the block at base.
float q_value(uint base, uint j) {
    vec4 lo, hi;
    q_eight(base, j & ~7u, lo, hi);
    const uint i = j & 7u;
    return i < 4u ? lo[i] : hi[i - 4u];
}

#endif // BACKPLANE_QUANTS_GLSL
