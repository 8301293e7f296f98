#version 460
// dup / cont / cpy: destination element i (in its own shape's order, dim 0 fastest) is
// source element i (in the source's shape's order); the shapes may differ, the element
// counts are equal. Either side may have any strides and offsets (quantized rows are
// whole blocks, 32 values each).
//
// Conversions are core's (core/types.hpp), bit for bit:
//   - one type to itself: units are copied as bits (elements; whole blocks for q8_0 and
//     q4_0), exact for every type;
//   - f16 and bf16 are widened exactly, f32 is narrowed to f16 / bf16 rounding to
//     nearest even, in integer arithmetic (a NaN stays a quiet NaN, as on the CPU);
//   - q8_0 / q4_0 values are dequantized as d * q in f32, then converted; the other
//     quantized types (SRC_QX with Q_<TYPE>: q4_1 ... q8_K; iq4_xs, tq1_0, tq2_0 and the
//     lattice i-quants iq2_xxs ... iq1_m only to f32) as quants.glsl does, as core's
//     dequantize_row_* compute them;
//   - a q8_0 / q4_0 / q4_1 / q5_0 / q5_1 / iq4_nl destination is quantized block by
//     block as quantize_row_<type> does: the same f32 operations, divisions correctly rounded (a
//     device's division may be off by 2.5 ulp; see div_rn), no contraction, rounding
//     to nearest even (q8_0) or truncation (q4_0) where the CPU does. Bit for bit as
//     long as the block's scale is a normal f32 (values of magnitude above ~1e-36)
//     and the values are finite: a device may flush subnormals, and the CPU's result
//     for an infinite or NaN value is itself undefined;
//   - an mxfp4 / q2_K ... q6_K destination likewise, with their scale searches
//     (quantize_k.glsl; bit for bit while no product of the fits is subnormal).
// One invocation per destination element, or per destination block when it is
// quantized.
//
// Variants: cpy_<source>_<destination>. Everything but f32 and i32 is read and written
// as 16-bit words, which needs 16-bit storage, and mxfp4 as bytes, which needs 8-bit
// storage (no 16-bit or 8-bit arithmetic). Every quantized type is a source; every one
// but q8_K is a destination of every type (quantize.glsl), q8_K only of itself (a copy
// of bits).
//
// variant: cpy_f32_f32 -DSRC_F32 -DDST_F32
// variant: cpy_f32_f16 -DSRC_F32 -DDST_F16
// variant: cpy_f32_bf16 -DSRC_F32 -DDST_BF16
// variant: cpy_f32_q8_0 -DSRC_F32 -DDST_Q8_0
// variant: cpy_f32_q4_0 -DSRC_F32 -DDST_Q4_0
// variant: cpy_f16_f32 -DSRC_F16 -DDST_F32
// variant: cpy_f16_f16 -DSRC_F16 -DDST_F16
// variant: cpy_f16_bf16 -DSRC_F16 -DDST_BF16
// variant: cpy_f16_q8_0 -DSRC_F16 -DDST_Q8_0
// variant: cpy_f16_q4_0 -DSRC_F16 -DDST_Q4_0
// variant: cpy_bf16_f32 -DSRC_BF16 -DDST_F32
// variant: cpy_bf16_f16 -DSRC_BF16 -DDST_F16
// variant: cpy_bf16_bf16 -DSRC_BF16 -DDST_BF16
// variant: cpy_bf16_q8_0 -DSRC_BF16 -DDST_Q8_0
// variant: cpy_bf16_q4_0 -DSRC_BF16 -DDST_Q4_0
// variant: cpy_q8_0_f32 -DSRC_Q8_0 -DDST_F32
// variant: cpy_q8_0_f16 -DSRC_Q8_0 -DDST_F16
// variant: cpy_q8_0_bf16 -DSRC_Q8_0 -DDST_BF16
// variant: cpy_q8_0_q8_0 -DSRC_Q8_0 -DDST_Q8_0
// variant: cpy_q8_0_q4_0 -DSRC_Q8_0 -DDST_Q4_0
// variant: cpy_q4_0_f32 -DSRC_Q4_0 -DDST_F32
// variant: cpy_q4_0_f16 -DSRC_Q4_0 -DDST_F16
// variant: cpy_q4_0_bf16 -DSRC_Q4_0 -DDST_BF16
// variant: cpy_q4_0_q8_0 -DSRC_Q4_0 -DDST_Q8_0
// variant: cpy_q4_0_q4_0 -DSRC_Q4_0 -DDST_Q4_0
// variant: cpy_i32_i32 -DSRC_I32 -DDST_I32
// variant: cpy_q4_1_f32 -DSRC_QX -DQ_Q4_1 -DDST_F32
// variant: cpy_q4_1_f16 -DSRC_QX -DQ_Q4_1 -DDST_F16
// variant: cpy_q4_1_bf16 -DSRC_QX -DQ_Q4_1 -DDST_BF16
// variant: cpy_q4_1_q8_0 -DSRC_QX -DQ_Q4_1 -DDST_Q8_0
// variant: cpy_q4_1_q4_0 -DSRC_QX -DQ_Q4_1 -DDST_Q4_0
// variant: cpy_q4_1_q4_1 -DSRC_QX -DDST_QX -DQ_Q4_1
// variant: cpy_q5_0_f32 -DSRC_QX -DQ_Q5_0 -DDST_F32
// variant: cpy_q5_0_f16 -DSRC_QX -DQ_Q5_0 -DDST_F16
// variant: cpy_q5_0_bf16 -DSRC_QX -DQ_Q5_0 -DDST_BF16
// variant: cpy_q5_0_q8_0 -DSRC_QX -DQ_Q5_0 -DDST_Q8_0
// variant: cpy_q5_0_q4_0 -DSRC_QX -DQ_Q5_0 -DDST_Q4_0
// variant: cpy_q5_0_q5_0 -DSRC_QX -DDST_QX -DQ_Q5_0
// variant: cpy_q5_1_f32 -DSRC_QX -DQ_Q5_1 -DDST_F32
// variant: cpy_q5_1_f16 -DSRC_QX -DQ_Q5_1 -DDST_F16
// variant: cpy_q5_1_bf16 -DSRC_QX -DQ_Q5_1 -DDST_BF16
// variant: cpy_q5_1_q8_0 -DSRC_QX -DQ_Q5_1 -DDST_Q8_0
// variant: cpy_q5_1_q4_0 -DSRC_QX -DQ_Q5_1 -DDST_Q4_0
// variant: cpy_q5_1_q5_1 -DSRC_QX -DDST_QX -DQ_Q5_1
// variant: cpy_iq4_nl_f32 -DSRC_QX -DQ_IQ4_NL -DDST_F32
// variant: cpy_iq4_nl_f16 -DSRC_QX -DQ_IQ4_NL -DDST_F16
// variant: cpy_iq4_nl_bf16 -DSRC_QX -DQ_IQ4_NL -DDST_BF16
// variant: cpy_iq4_nl_q8_0 -DSRC_QX -DQ_IQ4_NL -DDST_Q8_0
// variant: cpy_iq4_nl_q4_0 -DSRC_QX -DQ_IQ4_NL -DDST_Q4_0
// variant: cpy_iq4_nl_iq4_nl -DSRC_QX -DDST_QX -DQ_IQ4_NL
// variant: cpy_mxfp4_f32 -DSRC_QX -DQ_MXFP4 -DDST_F32
// variant: cpy_mxfp4_f16 -DSRC_QX -DQ_MXFP4 -DDST_F16
// variant: cpy_mxfp4_bf16 -DSRC_QX -DQ_MXFP4 -DDST_BF16
// variant: cpy_mxfp4_q8_0 -DSRC_QX -DQ_MXFP4 -DDST_Q8_0
// variant: cpy_mxfp4_q4_0 -DSRC_QX -DQ_MXFP4 -DDST_Q4_0
// variant: cpy_mxfp4_mxfp4 -DSRC_QX -DDST_QX -DQ_MXFP4
// variant: cpy_q2_K_f32 -DSRC_QX -DQ_Q2_K -DDST_F32
// variant: cpy_q2_K_f16 -DSRC_QX -DQ_Q2_K -DDST_F16
// variant: cpy_q2_K_bf16 -DSRC_QX -DQ_Q2_K -DDST_BF16
// variant: cpy_q2_K_q8_0 -DSRC_QX -DQ_Q2_K -DDST_Q8_0
// variant: cpy_q2_K_q4_0 -DSRC_QX -DQ_Q2_K -DDST_Q4_0
// variant: cpy_q2_K_q2_K -DSRC_QX -DDST_QX -DQ_Q2_K
// variant: cpy_q3_K_f32 -DSRC_QX -DQ_Q3_K -DDST_F32
// variant: cpy_q3_K_f16 -DSRC_QX -DQ_Q3_K -DDST_F16
// variant: cpy_q3_K_bf16 -DSRC_QX -DQ_Q3_K -DDST_BF16
// variant: cpy_q3_K_q8_0 -DSRC_QX -DQ_Q3_K -DDST_Q8_0
// variant: cpy_q3_K_q4_0 -DSRC_QX -DQ_Q3_K -DDST_Q4_0
// variant: cpy_q3_K_q3_K -DSRC_QX -DDST_QX -DQ_Q3_K
// variant: cpy_q4_K_f32 -DSRC_QX -DQ_Q4_K -DDST_F32
// variant: cpy_q4_K_f16 -DSRC_QX -DQ_Q4_K -DDST_F16
// variant: cpy_q4_K_bf16 -DSRC_QX -DQ_Q4_K -DDST_BF16
// variant: cpy_q4_K_q8_0 -DSRC_QX -DQ_Q4_K -DDST_Q8_0
// variant: cpy_q4_K_q4_0 -DSRC_QX -DQ_Q4_K -DDST_Q4_0
// variant: cpy_q4_K_q4_K -DSRC_QX -DDST_QX -DQ_Q4_K
// variant: cpy_q5_K_f32 -DSRC_QX -DQ_Q5_K -DDST_F32
// variant: cpy_q5_K_f16 -DSRC_QX -DQ_Q5_K -DDST_F16
// variant: cpy_q5_K_bf16 -DSRC_QX -DQ_Q5_K -DDST_BF16
// variant: cpy_q5_K_q8_0 -DSRC_QX -DQ_Q5_K -DDST_Q8_0
// variant: cpy_q5_K_q4_0 -DSRC_QX -DQ_Q5_K -DDST_Q4_0
// variant: cpy_q5_K_q5_K -DSRC_QX -DDST_QX -DQ_Q5_K
// variant: cpy_q6_K_f32 -DSRC_QX -DQ_Q6_K -DDST_F32
// variant: cpy_q6_K_f16 -DSRC_QX -DQ_Q6_K -DDST_F16
// variant: cpy_q6_K_bf16 -DSRC_QX -DQ_Q6_K -DDST_BF16
// variant: cpy_q6_K_q8_0 -DSRC_QX -DQ_Q6_K -DDST_Q8_0
// variant: cpy_q6_K_q4_0 -DSRC_QX -DQ_Q6_K -DDST_Q4_0
// variant: cpy_q6_K_q6_K -DSRC_QX -DDST_QX -DQ_Q6_K
// variant: cpy_q8_K_f32 -DSRC_QX -DQ_Q8_K -DDST_F32
// variant: cpy_iq4_xs_f32 -DSRC_QX -DQ_IQ4_XS -DDST_F32
// variant: cpy_tq1_0_f32 -DSRC_QX -DQ_TQ1_0 -DDST_F32
// variant: cpy_tq2_0_f32 -DSRC_QX -DQ_TQ2_0 -DDST_F32
// variant: cpy_iq2_xxs_f32 -DSRC_QX -DQ_IQ2_XXS -DDST_F32
// variant: cpy_iq2_xs_f32 -DSRC_QX -DQ_IQ2_XS -DDST_F32
// variant: cpy_iq2_s_f32 -DSRC_QX -DQ_IQ2_S -DDST_F32
// variant: cpy_iq3_xxs_f32 -DSRC_QX -DQ_IQ3_XXS -DDST_F32
// variant: cpy_iq3_s_f32 -DSRC_QX -DQ_IQ3_S -DDST_F32
// variant: cpy_iq1_s_f32 -DSRC_QX -DQ_IQ1_S -DDST_F32
// variant: cpy_iq1_m_f32 -DSRC_QX -DQ_IQ1_M -DDST_F32
// variant: cpy_q8_K_f16 -DSRC_QX -DQ_Q8_K -DDST_F16
// variant: cpy_q8_K_bf16 -DSRC_QX -DQ_Q8_K -DDST_BF16
// variant: cpy_q8_K_q8_0 -DSRC_QX -DQ_Q8_K -DDST_Q8_0
// variant: cpy_q8_K_q4_0 -DSRC_QX -DQ_Q8_K -DDST_Q4_0
// variant: cpy_q8_K_q8_K -DSRC_QX -DDST_QX -DQ_Q8_K
// variant: cpy_f32_q4_1 -DSRC_F32 -DDST_Q4_1
// variant: cpy_f16_q4_1 -DSRC_F16 -DDST_Q4_1
// variant: cpy_bf16_q4_1 -DSRC_BF16 -DDST_Q4_1
// variant: cpy_q8_0_q4_1 -DSRC_Q8_0 -DDST_Q4_1
// variant: cpy_q4_0_q4_1 -DSRC_Q4_0 -DDST_Q4_1
// variant: cpy_q5_0_q4_1 -DSRC_QX -DQ_Q5_0 -DDST_Q4_1
// variant: cpy_q5_1_q4_1 -DSRC_QX -DQ_Q5_1 -DDST_Q4_1
// variant: cpy_iq4_nl_q4_1 -DSRC_QX -DQ_IQ4_NL -DDST_Q4_1
// variant: cpy_mxfp4_q4_1 -DSRC_QX -DQ_MXFP4 -DDST_Q4_1
// variant: cpy_q2_K_q4_1 -DSRC_QX -DQ_Q2_K -DDST_Q4_1
// variant: cpy_q3_K_q4_1 -DSRC_QX -DQ_Q3_K -DDST_Q4_1
// variant: cpy_q4_K_q4_1 -DSRC_QX -DQ_Q4_K -DDST_Q4_1
// variant: cpy_q5_K_q4_1 -DSRC_QX -DQ_Q5_K -DDST_Q4_1
// variant: cpy_q6_K_q4_1 -DSRC_QX -DQ_Q6_K -DDST_Q4_1
// variant: cpy_q8_K_q4_1 -DSRC_QX -DQ_Q8_K -DDST_Q4_1
// variant: cpy_f32_q5_0 -DSRC_F32 -DDST_Q5_0
// variant: cpy_f16_q5_0 -DSRC_F16 -DDST_Q5_0
// variant: cpy_bf16_q5_0 -DSRC_BF16 -DDST_Q5_0
// variant: cpy_q8_0_q5_0 -DSRC_Q8_0 -DDST_Q5_0
// variant: cpy_q4_0_q5_0 -DSRC_Q4_0 -DDST_Q5_0
// variant: cpy_q4_1_q5_0 -DSRC_QX -DQ_Q4_1 -DDST_Q5_0
// variant: cpy_q5_1_q5_0 -DSRC_QX -DQ_Q5_1 -DDST_Q5_0
// variant: cpy_iq4_nl_q5_0 -DSRC_QX -DQ_IQ4_NL -DDST_Q5_0
// variant: cpy_mxfp4_q5_0 -DSRC_QX -DQ_MXFP4 -DDST_Q5_0
// variant: cpy_q2_K_q5_0 -DSRC_QX -DQ_Q2_K -DDST_Q5_0
// variant: cpy_q3_K_q5_0 -DSRC_QX -DQ_Q3_K -DDST_Q5_0
// variant: cpy_q4_K_q5_0 -DSRC_QX -DQ_Q4_K -DDST_Q5_0
// variant: cpy_q5_K_q5_0 -DSRC_QX -DQ_Q5_K -DDST_Q5_0
// variant: cpy_q6_K_q5_0 -DSRC_QX -DQ_Q6_K -DDST_Q5_0
// variant: cpy_q8_K_q5_0 -DSRC_QX -DQ_Q8_K -DDST_Q5_0
// variant: cpy_f32_q5_1 -DSRC_F32 -DDST_Q5_1
// variant: cpy_f16_q5_1 -DSRC_F16 -DDST_Q5_1
// variant: cpy_bf16_q5_1 -DSRC_BF16 -DDST_Q5_1
// variant: cpy_q8_0_q5_1 -DSRC_Q8_0 -DDST_Q5_1
// variant: cpy_q4_0_q5_1 -DSRC_Q4_0 -DDST_Q5_1
// variant: cpy_q4_1_q5_1 -DSRC_QX -DQ_Q4_1 -DDST_Q5_1
// variant: cpy_q5_0_q5_1 -DSRC_QX -DQ_Q5_0 -DDST_Q5_1
// variant: cpy_iq4_nl_q5_1 -DSRC_QX -DQ_IQ4_NL -DDST_Q5_1
// variant: cpy_mxfp4_q5_1 -DSRC_QX -DQ_MXFP4 -DDST_Q5_1
// variant: cpy_q2_K_q5_1 -DSRC_QX -DQ_Q2_K -DDST_Q5_1
// variant: cpy_q3_K_q5_1 -DSRC_QX -DQ_Q3_K -DDST_Q5_1
// variant: cpy_q4_K_q5_1 -DSRC_QX -DQ_Q4_K -DDST_Q5_1
// variant: cpy_q5_K_q5_1 -DSRC_QX -DQ_Q5_K -DDST_Q5_1
// variant: cpy_q6_K_q5_1 -DSRC_QX -DQ_Q6_K -DDST_Q5_1
// variant: cpy_q8_K_q5_1 -DSRC_QX -DQ_Q8_K -DDST_Q5_1
// variant: cpy_f32_iq4_nl -DSRC_F32 -DDST_IQ4_NL
// variant: cpy_f16_iq4_nl -DSRC_F16 -DDST_IQ4_NL
// variant: cpy_bf16_iq4_nl -DSRC_BF16 -DDST_IQ4_NL
// variant: cpy_q8_0_iq4_nl -DSRC_Q8_0 -DDST_IQ4_NL
// variant: cpy_q4_0_iq4_nl -DSRC_Q4_0 -DDST_IQ4_NL
// variant: cpy_q4_1_iq4_nl -DSRC_QX -DQ_Q4_1 -DDST_IQ4_NL
// variant: cpy_q5_0_iq4_nl -DSRC_QX -DQ_Q5_0 -DDST_IQ4_NL
// variant: cpy_q5_1_iq4_nl -DSRC_QX -DQ_Q5_1 -DDST_IQ4_NL
// variant: cpy_mxfp4_iq4_nl -DSRC_QX -DQ_MXFP4 -DDST_IQ4_NL
// variant: cpy_q2_K_iq4_nl -DSRC_QX -DQ_Q2_K -DDST_IQ4_NL
// variant: cpy_q3_K_iq4_nl -DSRC_QX -DQ_Q3_K -DDST_IQ4_NL
// variant: cpy_q4_K_iq4_nl -DSRC_QX -DQ_Q4_K -DDST_IQ4_NL
// variant: cpy_q5_K_iq4_nl -DSRC_QX -DQ_Q5_K -DDST_IQ4_NL
// variant: cpy_q6_K_iq4_nl -DSRC_QX -DQ_Q6_K -DDST_IQ4_NL
// variant: cpy_q8_K_iq4_nl -DSRC_QX -DQ_Q8_K -DDST_IQ4_NL
// variant: cpy_f32_mxfp4 -DSRC_F32 -DDST_MXFP4
// variant: cpy_f16_mxfp4 -DSRC_F16 -DDST_MXFP4
// variant: cpy_bf16_mxfp4 -DSRC_BF16 -DDST_MXFP4
// variant: cpy_q8_0_mxfp4 -DSRC_Q8_0 -DDST_MXFP4
// variant: cpy_q4_0_mxfp4 -DSRC_Q4_0 -DDST_MXFP4
// variant: cpy_q4_1_mxfp4 -DSRC_QX -DQ_Q4_1 -DDST_MXFP4
// variant: cpy_q5_0_mxfp4 -DSRC_QX -DQ_Q5_0 -DDST_MXFP4
// variant: cpy_q5_1_mxfp4 -DSRC_QX -DQ_Q5_1 -DDST_MXFP4
// variant: cpy_iq4_nl_mxfp4 -DSRC_QX -DQ_IQ4_NL -DDST_MXFP4
// variant: cpy_q2_K_mxfp4 -DSRC_QX -DQ_Q2_K -DDST_MXFP4
// variant: cpy_q3_K_mxfp4 -DSRC_QX -DQ_Q3_K -DDST_MXFP4
// variant: cpy_q4_K_mxfp4 -DSRC_QX -DQ_Q4_K -DDST_MXFP4
// variant: cpy_q5_K_mxfp4 -DSRC_QX -DQ_Q5_K -DDST_MXFP4
// variant: cpy_q6_K_mxfp4 -DSRC_QX -DQ_Q6_K -DDST_MXFP4
// variant: cpy_q8_K_mxfp4 -DSRC_QX -DQ_Q8_K -DDST_MXFP4
// variant: cpy_f32_q2_K -DSRC_F32 -DDST_Q2_K
// variant: cpy_f16_q2_K -DSRC_F16 -DDST_Q2_K
// variant: cpy_bf16_q2_K -DSRC_BF16 -DDST_Q2_K
// variant: cpy_q8_0_q2_K -DSRC_Q8_0 -DDST_Q2_K
// variant: cpy_q4_0_q2_K -DSRC_Q4_0 -DDST_Q2_K
// variant: cpy_q4_1_q2_K -DSRC_QX -DQ_Q4_1 -DDST_Q2_K
// variant: cpy_q5_0_q2_K -DSRC_QX -DQ_Q5_0 -DDST_Q2_K
// variant: cpy_q5_1_q2_K -DSRC_QX -DQ_Q5_1 -DDST_Q2_K
// variant: cpy_iq4_nl_q2_K -DSRC_QX -DQ_IQ4_NL -DDST_Q2_K
// variant: cpy_mxfp4_q2_K -DSRC_QX -DQ_MXFP4 -DDST_Q2_K
// variant: cpy_q3_K_q2_K -DSRC_QX -DQ_Q3_K -DDST_Q2_K
// variant: cpy_q4_K_q2_K -DSRC_QX -DQ_Q4_K -DDST_Q2_K
// variant: cpy_q5_K_q2_K -DSRC_QX -DQ_Q5_K -DDST_Q2_K
// variant: cpy_q6_K_q2_K -DSRC_QX -DQ_Q6_K -DDST_Q2_K
// variant: cpy_q8_K_q2_K -DSRC_QX -DQ_Q8_K -DDST_Q2_K
// variant: cpy_f32_q3_K -DSRC_F32 -DDST_Q3_K
// variant: cpy_f16_q3_K -DSRC_F16 -DDST_Q3_K
// variant: cpy_bf16_q3_K -DSRC_BF16 -DDST_Q3_K
// variant: cpy_q8_0_q3_K -DSRC_Q8_0 -DDST_Q3_K
// variant: cpy_q4_0_q3_K -DSRC_Q4_0 -DDST_Q3_K
// variant: cpy_q4_1_q3_K -DSRC_QX -DQ_Q4_1 -DDST_Q3_K
// variant: cpy_q5_0_q3_K -DSRC_QX -DQ_Q5_0 -DDST_Q3_K
// variant: cpy_q5_1_q3_K -DSRC_QX -DQ_Q5_1 -DDST_Q3_K
// variant: cpy_iq4_nl_q3_K -DSRC_QX -DQ_IQ4_NL -DDST_Q3_K
// variant: cpy_mxfp4_q3_K -DSRC_QX -DQ_MXFP4 -DDST_Q3_K
// variant: cpy_q2_K_q3_K -DSRC_QX -DQ_Q2_K -DDST_Q3_K
// variant: cpy_q4_K_q3_K -DSRC_QX -DQ_Q4_K -DDST_Q3_K
// variant: cpy_q5_K_q3_K -DSRC_QX -DQ_Q5_K -DDST_Q3_K
// variant: cpy_q6_K_q3_K -DSRC_QX -DQ_Q6_K -DDST_Q3_K
// variant: cpy_q8_K_q3_K -DSRC_QX -DQ_Q8_K -DDST_Q3_K
// variant: cpy_f32_q4_K -DSRC_F32 -DDST_Q4_K
// variant: cpy_f16_q4_K -DSRC_F16 -DDST_Q4_K
// variant: cpy_bf16_q4_K -DSRC_BF16 -DDST_Q4_K
// variant: cpy_q8_0_q4_K -DSRC_Q8_0 -DDST_Q4_K
// variant: cpy_q4_0_q4_K -DSRC_Q4_0 -DDST_Q4_K
// variant: cpy_q4_1_q4_K -DSRC_QX -DQ_Q4_1 -DDST_Q4_K
// variant: cpy_q5_0_q4_K -DSRC_QX -DQ_Q5_0 -DDST_Q4_K
// variant: cpy_q5_1_q4_K -DSRC_QX -DQ_Q5_1 -DDST_Q4_K
// variant: cpy_iq4_nl_q4_K -DSRC_QX -DQ_IQ4_NL -DDST_Q4_K
// variant: cpy_mxfp4_q4_K -DSRC_QX -DQ_MXFP4 -DDST_Q4_K
// variant: cpy_q2_K_q4_K -DSRC_QX -DQ_Q2_K -DDST_Q4_K
// variant: cpy_q3_K_q4_K -DSRC_QX -DQ_Q3_K -DDST_Q4_K
// variant: cpy_q5_K_q4_K -DSRC_QX -DQ_Q5_K -DDST_Q4_K
// variant: cpy_q6_K_q4_K -DSRC_QX -DQ_Q6_K -DDST_Q4_K
// variant: cpy_q8_K_q4_K -DSRC_QX -DQ_Q8_K -DDST_Q4_K
// variant: cpy_f32_q5_K -DSRC_F32 -DDST_Q5_K
// variant: cpy_f16_q5_K -DSRC_F16 -DDST_Q5_K
// variant: cpy_bf16_q5_K -DSRC_BF16 -DDST_Q5_K
// variant: cpy_q8_0_q5_K -DSRC_Q8_0 -DDST_Q5_K
// variant: cpy_q4_0_q5_K -DSRC_Q4_0 -DDST_Q5_K
// variant: cpy_q4_1_q5_K -DSRC_QX -DQ_Q4_1 -DDST_Q5_K
// variant: cpy_q5_0_q5_K -DSRC_QX -DQ_Q5_0 -DDST_Q5_K
// variant: cpy_q5_1_q5_K -DSRC_QX -DQ_Q5_1 -DDST_Q5_K
// variant: cpy_iq4_nl_q5_K -DSRC_QX -DQ_IQ4_NL -DDST_Q5_K
// variant: cpy_mxfp4_q5_K -DSRC_QX -DQ_MXFP4 -DDST_Q5_K
// variant: cpy_q2_K_q5_K -DSRC_QX -DQ_Q2_K -DDST_Q5_K
// variant: cpy_q3_K_q5_K -DSRC_QX -DQ_Q3_K -DDST_Q5_K
// variant: cpy_q4_K_q5_K -DSRC_QX -DQ_Q4_K -DDST_Q5_K
// variant: cpy_q6_K_q5_K -DSRC_QX -DQ_Q6_K -DDST_Q5_K
// variant: cpy_q8_K_q5_K -DSRC_QX -DQ_Q8_K -DDST_Q5_K
// variant: cpy_f32_q6_K -DSRC_F32 -DDST_Q6_K
// variant: cpy_f16_q6_K -DSRC_F16 -DDST_Q6_K
// variant: cpy_bf16_q6_K -DSRC_BF16 -DDST_Q6_K
// variant: cpy_q8_0_q6_K -DSRC_Q8_0 -DDST_Q6_K
// variant: cpy_q4_0_q6_K -DSRC_Q4_0 -DDST_Q6_K
// variant: cpy_q4_1_q6_K -DSRC_QX -DQ_Q4_1 -DDST_Q6_K
// variant: cpy_q5_0_q6_K -DSRC_QX -DQ_Q5_0 -DDST_Q6_K
// variant: cpy_q5_1_q6_K -DSRC_QX -DQ_Q5_1 -DDST_Q6_K
// variant: cpy_iq4_nl_q6_K -DSRC_QX -DQ_IQ4_NL -DDST_Q6_K
// variant: cpy_mxfp4_q6_K -DSRC_QX -DQ_MXFP4 -DDST_Q6_K
// variant: cpy_q2_K_q6_K -DSRC_QX -DQ_Q2_K -DDST_Q6_K
// variant: cpy_q3_K_q6_K -DSRC_QX -DQ_Q3_K -DDST_Q6_K
// variant: cpy_q4_K_q6_K -DSRC_QX -DQ_Q4_K -DDST_Q6_K
// variant: cpy_q5_K_q6_K -DSRC_QX -DQ_Q5_K -DDST_Q6_K
// variant: cpy_q8_K_q6_K -DSRC_QX -DQ_Q8_K -DDST_Q6_K
#include "common.glsl"
#include "convert.glsl"

#if defined(SRC_F32) || defined(SRC_I32)
#define SRC_UNIT uint
#elif defined(SRC_QX) && defined(Q_MXFP4)
#define SRC_UNIT uint8_t
#else
#define SRC_UNIT uint16_t
#endif
#if defined(DST_F32) || defined(DST_I32)
#define DST_UNIT uint
#elif defined(DST_QX) && defined(Q_MXFP4) || defined(DST_MXFP4)
#define DST_UNIT uint8_t
#else
#define DST_UNIT uint16_t
#endif
#if !defined(SRC_F32) && !defined(SRC_I32) || !defined(DST_F32) && !defined(DST_I32)
#extension GL_EXT_shader_16bit_storage : require
#endif
#if defined(Q_MXFP4) || defined(DST_MXFP4)
#extension GL_EXT_shader_8bit_storage : require
#endif

#if defined(SRC_Q8_0) || defined(SRC_Q4_0) || defined(SRC_QX)
#define SRC_QUANT
#endif
#if defined(DST_Q2_K) || defined(DST_Q3_K) || defined(DST_Q4_K) || defined(DST_Q5_K) || defined(DST_Q6_K)
#define DST_SUPER // quantized in super-blocks of 256
#endif
#if defined(DST_Q8_0) || defined(DST_Q4_0) || defined(DST_Q4_1) || defined(DST_Q5_0) || defined(DST_Q5_1) || \
    defined(DST_IQ4_NL) || defined(DST_MXFP4) || defined(DST_SUPER) || defined(DST_QX)
#define DST_QUANT
#endif
// a super-block spans several blocks of 32 of a quantized source, maybe several rows:
// walked value by value
#if defined(DST_SUPER) && (defined(SRC_Q8_0) || defined(SRC_Q4_0) || defined(Q_Q4_1) || defined(Q_Q5_0) || \
                           defined(Q_Q5_1) || defined(Q_IQ4_NL) || defined(Q_MXFP4))
#define SRC_WALKED
#endif
// one type to itself: bits (DST_QX comes only with SRC_QX, of the same Q_<TYPE>)
#if defined(SRC_F32) && defined(DST_F32) || defined(SRC_I32) && defined(DST_I32) || \
    defined(SRC_F16) && defined(DST_F16) || defined(SRC_BF16) && defined(DST_BF16) || \
    defined(SRC_Q8_0) && defined(DST_Q8_0) || defined(SRC_Q4_0) && defined(DST_Q4_0) || defined(DST_QX)
#define SAME_TYPE
#endif

// Units per block (16-bit words, bytes for mxfp4) and values per block: q8_0 the f16
// scale, then 32 bytes; q4_0 the scale, then 16 bytes; the others as quants.glsl says.
#if defined(SRC_Q8_0)
#define SRC_BLOCK_WORDS 17u
#define SRC_QK 32u
#elif defined(SRC_Q4_0)
#define SRC_BLOCK_WORDS 9u
#define SRC_QK 32u
#elif defined(SRC_QX)
#define SRC_BLOCK_WORDS Q_UNITS
#define SRC_QK Q_BLOCK
#endif
#if defined(DST_QX)
#define DST_QK Q_BLOCK
#elif defined(DST_SUPER)
#define DST_QK 256u
#else
#define DST_QK 32u
#endif

#if defined(DST_QUANT)
#define WG 64
#else
#define WG 128
#endif

layout(local_size_x = WG) in;
layout(binding = 0, std430) readonly buffer A { SRC_UNIT a[]; };
layout(binding = 2, std430) writeonly buffer D { DST_UNIT d[]; };

// ---------------------------------------------------------------------------------------
// The source.

#if defined(SRC_QX)
#define Q_UNIT(i) uint(a[i])
#include "quants.glsl"
// Value j of the block at a[base], as core's dequantize_row_*.
float src_dequant(uint base, uint j) { return q_value(base, j); }
#elif defined(SRC_QUANT)
// Quant byte k of the block whose first word (its scale) is a[base].
uint src_byte(uint base, uint k) { return block_byte_in_word(uint(a[block_word_of_byte(base, k)]), k); }

// Value j of the block at a[base], as core's dequantize_row_*: d * q in f32.
float src_dequant(uint base, uint j) {
    const float scale = uintBitsToFloat(f16_bits_to_f32(uint(a[base])));
#if defined(SRC_Q8_0)
    return q8_0_value(scale, src_byte(base, j));
#else
    return q4_0_value(scale, src_byte(base, q4_0_byte_of_value(j)), j);
#endif
}
#endif

// The f32 bits of source element c.
uint src_bits(uvec4 c) {
#if defined(SRC_QUANT)
    const uvec4 blk = uvec4(c.x / SRC_QK, c.yzw); // the block, whose stride is a_nb.x
    return floatBitsToUint(src_dequant(p.offs.x + at(blk, p.a_nb), c.x % SRC_QK));
#else
    const uint u = uint(a[p.offs.x + at(c, p.a_nb)]);
#if defined(SRC_F16)
    return f16_bits_to_f32(u);
#elif defined(SRC_BF16)
    return bf16_bits_to_f32(u);
#else
    return u;
#endif
#endif
}

// ---------------------------------------------------------------------------------------
// A quantized destination.

#if defined(DST_QUANT) && !defined(SAME_TYPE)
#include "quantize.glsl"
#endif

// ---------------------------------------------------------------------------------------

void main() {
#if defined(DST_QUANT)
    // one invocation per destination block
    const uint nbx = p.ne.x / DST_QK;
    const uint k = linear_id(WG);
    if (k >= nbx * p.ne.y * p.ne.z * p.ne.w) return;
    const uvec4 c = coords(k, uvec4(nbx, p.ne.yzw));
    const uint dst = p.offs.z + at(c, p.nb); // nb.x: the block stride
    // the block's first value, as a linear index, and where it is in the source
    const uint first = ((c.w * p.ne.z + c.z) * p.ne.y + c.y) * p.ne.x + c.x * DST_QK;
    uvec4 s = coords(first, p.a_ne);
#if defined(SAME_TYPE)
    // the source's rows are whole blocks too: s.x is a block's first value
    const uint src = p.offs.x + at(uvec4(s.x / SRC_QK, s.yzw), p.a_nb);
    for (uint j = 0u; j < SRC_BLOCK_WORDS; ++j) d[dst + j] = a[src + j];
#else
    float v[DST_QK];
#if defined(SRC_QUANT) && !defined(SRC_WALKED)
    // the source's rows are whole blocks, each as long as the destination's or longer:
    // the destination block's values are in one
    const uint src = p.offs.x + at(uvec4(s.x / SRC_QK, s.yzw), p.a_nb);
    for (uint j = 0u; j < DST_QK; ++j) v[j] = src_dequant(src, s.x % SRC_QK + j);
#else
    // walk the source in its order, a block's values, across its rows
    for (uint j = 0u; j < DST_QK; ++j) {
        v[j] = uintBitsToFloat(src_bits(s));
        if (++s.x == p.a_ne.x) {
            s.x = 0u;
            if (++s.y == p.a_ne.y) {
                s.y = 0u;
                if (++s.z == p.a_ne.z) {
                    s.z = 0u;
                    ++s.w;
                }
            }
        }
    }
#endif
    store_block(dst, v);
#endif
#else
    // one invocation per destination element
    const uint i = linear_id(WG);
    if (i >= p.ne.x * p.ne.y * p.ne.z * p.ne.w) return;
    const uint dst = p.offs.z + at(coords(i, p.ne), p.nb);
    const uvec4 s = coords(i, p.a_ne);
#if defined(SAME_TYPE)
    d[dst] = a[p.offs.x + at(s, p.a_nb)];
#else
    const uint bits = src_bits(s);
#if defined(DST_F16)
    d[dst] = uint16_t(f32_bits_to_f16(bits));
#elif defined(DST_BF16)
    d[dst] = uint16_t(f32_bits_to_bf16(bits));
#else
    d[dst] = bits;
#endif
#endif
#endif
}
