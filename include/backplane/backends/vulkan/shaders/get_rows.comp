#version 460
// get_rows: dst [E, n, i1, i2] (f32; i32 for i32 a) with dst[e, j, k, l] =
// a[e, idx[j, k, l], k, l], a (source 0) [E, R, i1, i2], idx (source 1, i32)
// [n, i1, i2]. f16 and bf16 values are widened exactly, 32-bit values copied as bits,
// q8_0 and q4_0 values dequantized as core's dequantize_row_* do (d * q in f32). One
// invocation per destination element; every operand may have any strides and offsets.
//
// An index outside [0, R) reads nothing: its whole row of dst is written with zeros (as
// the CPU's kernel writes it) and the row's first invocation raises ERROR_INDEX in the
// stream's error word (binding 3), which synchronize() reports as errc::out_of_range.
//
//   variant         a               needs
//   get_rows_f32    f32             -
//   get_rows_i32    i32             -
//   get_rows_f16    f16             16-bit storage
//   get_rows_bf16   bf16            16-bit storage
//   get_rows_q8_0   q8_0            16-bit storage (blocks are read as 16-bit words)
//   get_rows_q4_0   q4_0            16-bit storage
//   get_rows_<type> q4_1 q5_0 q5_1  16-bit storage; mxfp4, read as bytes, 8-bit storage
//                   iq4_nl mxfp4    too (dequantized by quants.glsl)
//                   q2_K ... q8_K
//                   iq4_xs tq1_0
//                   tq2_0, iq2_xxs
//                   ... iq1_m
//
// variant: get_rows_f32 -DA_F32
// variant: get_rows_i32 -DA_I32
// variant: get_rows_f16 -DA_F16
// variant: get_rows_bf16 -DA_BF16
// variant: get_rows_q8_0 -DA_Q8_0
// variant: get_rows_q4_0 -DA_Q4_0
// variant: get_rows_q4_1 -DA_QX -DQ_Q4_1
// variant: get_rows_q5_0 -DA_QX -DQ_Q5_0
// variant: get_rows_q5_1 -DA_QX -DQ_Q5_1
// variant: get_rows_iq4_nl -DA_QX -DQ_IQ4_NL
// variant: get_rows_mxfp4 -DA_QX -DQ_MXFP4
// variant: get_rows_q2_K -DA_QX -DQ_Q2_K
// variant: get_rows_q3_K -DA_QX -DQ_Q3_K
// variant: get_rows_q4_K -DA_QX -DQ_Q4_K
// variant: get_rows_q5_K -DA_QX -DQ_Q5_K
// variant: get_rows_q6_K -DA_QX -DQ_Q6_K
// variant: get_rows_q8_K -DA_QX -DQ_Q8_K
// variant: get_rows_iq4_xs -DA_QX -DQ_IQ4_XS
// variant: get_rows_tq1_0 -DA_QX -DQ_TQ1_0
// variant: get_rows_tq2_0 -DA_QX -DQ_TQ2_0
// variant: get_rows_iq2_xxs -DA_QX -DQ_IQ2_XXS
// variant: get_rows_iq2_xs -DA_QX -DQ_IQ2_XS
// variant: get_rows_iq2_s -DA_QX -DQ_IQ2_S
// variant: get_rows_iq3_xxs -DA_QX -DQ_IQ3_XXS
// variant: get_rows_iq3_s -DA_QX -DQ_IQ3_S
// variant: get_rows_iq1_s -DA_QX -DQ_IQ1_S
// variant: get_rows_iq1_m -DA_QX -DQ_IQ1_M
#include "common.glsl"
#include "convert.glsl"

#if defined(A_F32) || defined(A_I32)
#define A_UNIT uint
#elif defined(Q_MXFP4)
#extension GL_EXT_shader_8bit_storage : require
#define A_UNIT uint8_t
#else
#extension GL_EXT_shader_16bit_storage : require
#define A_UNIT uint16_t
#endif

layout(local_size_x = 128) in;
layout(binding = 0, std430) readonly buffer A { A_UNIT a[]; };
layout(binding = 1, std430) readonly buffer I { int idx[]; };
layout(binding = 2, std430) writeonly buffer D { uint d[]; };
layout(binding = 3, std430) buffer E { uint error_word; };

#if defined(A_QX)
#define Q_UNIT(i) uint(a[i])
#include "quants.glsl"
#endif

// Quant byte k of the block whose first 16-bit word (its f16 scale) is a[base].
uint block_byte(uint base, uint k) { return block_byte_in_word(uint(a[block_word_of_byte(base, k)]), k); }

// The f32 bits of element e of the row whose first unit is a[row].
uint load(uint row, uint e) {
#if defined(A_F32) || defined(A_I32)
    return a[row + e * p.a_nb.x];
#elif defined(A_F16)
    return f16_bits_to_f32(uint(a[row + e * p.a_nb.x]));
#elif defined(A_BF16)
    return bf16_bits_to_f32(uint(a[row + e * p.a_nb.x]));
#elif defined(A_QX)
    return floatBitsToUint(q_value(row + (e / Q_BLOCK) * p.a_nb.x, e % Q_BLOCK)); // a_nb.x: the block stride
#else
    const uint base = row + (e >> 5) * p.a_nb.x; // the block: p.a_nb.x is its stride
    const uint j = e & 31u;
    const float scale = uintBitsToFloat(f16_bits_to_f32(uint(a[base])));
#if defined(A_Q8_0)
    return floatBitsToUint(q8_0_value(scale, block_byte(base, j)));
#else
    return floatBitsToUint(q4_0_value(scale, block_byte(base, q4_0_byte_of_value(j)), j));
#endif
#endif
}

void main() {
    const uint i = linear_id(128);
    if (i >= p.ne.x * p.ne.y * p.ne.z * p.ne.w) return;
    const uvec4 c = coords(i, p.ne);
    const int r = idx[p.offs.y + c.y * p.b_nb.x + c.z * p.b_nb.y + c.w * p.b_nb.z];
    uint v = 0u; // f32 0.0 and i32 0 alike
    if (r >= 0 && uint(r) < p.a_ne.y)
        v = load(p.offs.x + uint(r) * p.a_nb.y + c.z * p.a_nb.z + c.w * p.a_nb.w, c.x);
    else if (c.x == 0u)
        atomicOr(error_word, ERROR_INDEX);
    d[p.offs.z + at(c, p.nb)] = v;
}
