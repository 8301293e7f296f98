#version 460
// set_rows: row (n, j, k) of b (source 0, f32 / f16 / bf16, [E, N, A2, A3]) is written,
// converted to the destination's type, over row idx[n, j % I2, k % I3] of matrix (j, k)
// of the destination (binding 2: the node, whose memory is its destination a). idx
// (source 1) is i32, or i64 when p.prm.x is 1 (read as two 32-bit words, low first).
// Conversions are core's, bit for bit, as in copy.comp: f16 and bf16 widened exactly,
// narrowed rounding to nearest even, q8_0 / q4_0 / q4_1 / q5_0 / q5_1 / iq4_nl / mxfp4
// blocks and q2_K ... q6_K super-blocks quantized by quantize.glsl. Any strides and
// offsets on every operand (a quantized destination's rows are whole blocks).
//
// One invocation per element of b, or per destination block (32 or 256 values) when the
// destination is quantized.
// An index outside [0, rows of a) writes nothing: the row's first invocation raises
// ERROR_INDEX in the stream's error word (binding 3), which synchronize() reports as
// errc::out_of_range.
//
// Variants: set_rows_<b>_<destination>. Everything but f32 is read and written as 16-bit
// words, which needs 16-bit storage; mxfp4 as bytes, which needs 8-bit storage too.
//
// variant: set_rows_f32_f32 -DSRC_F32 -DDST_F32
// variant: set_rows_f32_f16 -DSRC_F32 -DDST_F16
// variant: set_rows_f32_bf16 -DSRC_F32 -DDST_BF16
// variant: set_rows_f32_q8_0 -DSRC_F32 -DDST_Q8_0
// variant: set_rows_f32_q4_0 -DSRC_F32 -DDST_Q4_0
// variant: set_rows_f16_f32 -DSRC_F16 -DDST_F32
// variant: set_rows_f16_f16 -DSRC_F16 -DDST_F16
// variant: set_rows_f16_bf16 -DSRC_F16 -DDST_BF16
// variant: set_rows_f16_q8_0 -DSRC_F16 -DDST_Q8_0
// variant: set_rows_f16_q4_0 -DSRC_F16 -DDST_Q4_0
// variant: set_rows_bf16_f32 -DSRC_BF16 -DDST_F32
// variant: set_rows_bf16_f16 -DSRC_BF16 -DDST_F16
// variant: set_rows_bf16_bf16 -DSRC_BF16 -DDST_BF16
// variant: set_rows_bf16_q8_0 -DSRC_BF16 -DDST_Q8_0
// variant: set_rows_bf16_q4_0 -DSRC_BF16 -DDST_Q4_0
// variant: set_rows_f32_q4_1 -DSRC_F32 -DDST_Q4_1
// variant: set_rows_f32_q5_0 -DSRC_F32 -DDST_Q5_0
// variant: set_rows_f32_q5_1 -DSRC_F32 -DDST_Q5_1
// variant: set_rows_f32_iq4_nl -DSRC_F32 -DDST_IQ4_NL
// variant: set_rows_f16_q4_1 -DSRC_F16 -DDST_Q4_1
// variant: set_rows_f16_q5_0 -DSRC_F16 -DDST_Q5_0
// variant: set_rows_f16_q5_1 -DSRC_F16 -DDST_Q5_1
// variant: set_rows_f16_iq4_nl -DSRC_F16 -DDST_IQ4_NL
// variant: set_rows_bf16_q4_1 -DSRC_BF16 -DDST_Q4_1
// variant: set_rows_bf16_q5_0 -DSRC_BF16 -DDST_Q5_0
// variant: set_rows_bf16_q5_1 -DSRC_BF16 -DDST_Q5_1
// variant: set_rows_bf16_iq4_nl -DSRC_BF16 -DDST_IQ4_NL
// variant: set_rows_f32_mxfp4 -DSRC_F32 -DDST_MXFP4
// variant: set_rows_f32_q2_K -DSRC_F32 -DDST_Q2_K
// variant: set_rows_f32_q3_K -DSRC_F32 -DDST_Q3_K
// variant: set_rows_f32_q4_K -DSRC_F32 -DDST_Q4_K
// variant: set_rows_f32_q5_K -DSRC_F32 -DDST_Q5_K
// variant: set_rows_f32_q6_K -DSRC_F32 -DDST_Q6_K
// variant: set_rows_f16_mxfp4 -DSRC_F16 -DDST_MXFP4
// variant: set_rows_f16_q2_K -DSRC_F16 -DDST_Q2_K
// variant: set_rows_f16_q3_K -DSRC_F16 -DDST_Q3_K
// variant: set_rows_f16_q4_K -DSRC_F16 -DDST_Q4_K
// variant: set_rows_f16_q5_K -DSRC_F16 -DDST_Q5_K
// variant: set_rows_f16_q6_K -DSRC_F16 -DDST_Q6_K
// variant: set_rows_bf16_mxfp4 -DSRC_BF16 -DDST_MXFP4
// variant: set_rows_bf16_q2_K -DSRC_BF16 -DDST_Q2_K
// variant: set_rows_bf16_q3_K -DSRC_BF16 -DDST_Q3_K
// variant: set_rows_bf16_q4_K -DSRC_BF16 -DDST_Q4_K
// variant: set_rows_bf16_q5_K -DSRC_BF16 -DDST_Q5_K
// variant: set_rows_bf16_q6_K -DSRC_BF16 -DDST_Q6_K
#include "common.glsl"
#include "convert.glsl"

#if defined(SRC_F32)
#define SRC_UNIT uint
#else
#define SRC_UNIT uint16_t
#endif
#if defined(DST_F32)
#define DST_UNIT uint
#elif defined(DST_MXFP4)
#define DST_UNIT uint8_t
#else
#define DST_UNIT uint16_t
#endif
#if !defined(SRC_F32) || !defined(DST_F32)
#extension GL_EXT_shader_16bit_storage : require
#endif
#if defined(DST_MXFP4)
#extension GL_EXT_shader_8bit_storage : require
#endif
#if defined(DST_Q2_K) || defined(DST_Q3_K) || defined(DST_Q4_K) || defined(DST_Q5_K) || defined(DST_Q6_K)
#define DST_SUPER // quantized in super-blocks of 256
#define DST_QK 256u
#else
#define DST_QK 32u
#endif
#if defined(DST_Q8_0) || defined(DST_Q4_0) || defined(DST_Q4_1) || defined(DST_Q5_0) || defined(DST_Q5_1) || \
    defined(DST_IQ4_NL) || defined(DST_MXFP4) || defined(DST_SUPER)
#define DST_QUANT
#define WG 64
#else
#define WG 128
#endif
#if defined(SRC_F32) && defined(DST_F32) || defined(SRC_F16) && defined(DST_F16) || \
    defined(SRC_BF16) && defined(DST_BF16)
#define SAME_TYPE
#endif

layout(local_size_x = WG) in;
layout(binding = 0, std430) readonly buffer A { SRC_UNIT a[]; };
layout(binding = 1, std430) readonly buffer I { uint idx[]; };
layout(binding = 2, std430) writeonly buffer D { DST_UNIT d[]; };
layout(binding = 3, std430) buffer E { uint error_word; };

#if defined(DST_QUANT)
#include "quantize.glsl"
#endif

// The f32 bits of element c of b.
uint src_bits(uvec4 c) {
    const uint u = uint(a[p.offs.x + at(c, p.a_nb)]);
#if defined(SRC_F16)
    return f16_bits_to_f32(u);
#elif defined(SRC_BF16)
    return bf16_bits_to_f32(u);
#else
    return u;
#endif
}

// The destination row of b's row (c.y, c.z, c.w), or 0xffffffff when its index is
// outside [0, rows of the destination).
uint target_row(uvec4 c) {
    const uint i = p.offs.y + c.y * p.b_nb.x + (c.z % p.b_ne.y) * p.b_nb.y + (c.w % p.b_ne.z) * p.b_nb.z;
    const uint lo = idx[i];
    const bool outside = p.prm.x != 0u ? idx[i + 1u] != 0u : int(lo) < 0;
    return outside || lo >= p.ne.y ? 0xffffffffu : lo;
}

void main() {
#if defined(DST_QUANT)
    const uvec4 n = uvec4(p.a_ne.x / DST_QK, p.a_ne.yzw); // b's blocks of the destination's size
#else
    const uvec4 n = p.a_ne;
#endif
    const uint k = linear_id(WG);
    if (k >= n.x * n.y * n.z * n.w) return;
    const uvec4 c = coords(k, n);
    const uint r = target_row(c);
    if (r == 0xffffffffu) {
        if (c.x == 0u) atomicOr(error_word, ERROR_INDEX);
        return;
    }
    const uint dst = p.offs.z + at(uvec4(c.x, r, c.zw), p.nb); // nb.x: a quantized block's stride
#if defined(DST_QUANT)
    float v[DST_QK];
    for (uint j = 0u; j < DST_QK; ++j) v[j] = uintBitsToFloat(src_bits(uvec4(c.x * DST_QK + j, c.yzw)));
    store_block(dst, v);
#elif defined(SAME_TYPE)
    d[dst] = a[p.offs.x + at(c, p.a_nb)];
#else
    const uint bits = src_bits(c);
#if defined(DST_F16)
    d[dst] = uint16_t(f32_bits_to_f16(bits));
#elif defined(DST_BF16)
    d[dst] = uint16_t(f32_bits_to_bf16(bits));
#else
    d[dst] = bits;
#endif
#endif
}
