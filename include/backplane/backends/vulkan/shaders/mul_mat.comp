#version 460
// mul_mat: dst f32 [M, N, ne2, ne3], dst[i2, i3][n][m] = sum_k a[k, m, i2 / r2, i3 / r3] *
// b[k, n, i2, i3], where a (source 0, the weights) is [K, M, ne2 / r2, ne3 / r3] and b
// (source 1, the activations) is [K, N, ne2, ne3]. Sums are accumulated in f32. Every
// tensor may have any strides and offsets (a quantized row is whole blocks).
//
// Kernels:
//   tiled   a workgroup of (BM / TM) x (BN / TN) invocations computes a BM x BN block of
//           dst: BK-deep slices of a and b are staged in shared memory, k-major, as vec4s
//           of four rows, and each invocation accumulates a TM x TN block in registers.
//           128 x 128 blocks (16 x 16 per invocation), or 128 x 32 (8 x 8) with NARROW,
//           for fewer columns.
//   MV      mat-vec, for few columns or rows: a workgroup of WG invocations computes NR
//           rows of a against one column of b; the invocations stride along K and their
//           partial sums meet in a tree in shared memory.
//   MUL_MAT_ID  mat-vec for mul_mat_id: dst f32 [M, n_used, n_tokens], column (s, t) is
//           expert ids[s, t]'s matrix (a is [K, M, n_expert]) times column (s % b.ne1, t)
//           of b; the ids are source 2 (binding 4). An id outside [0, n_expert) reads
//           nothing: the column is written as zeros and ERROR_INDEX is raised in the
//           stream's error word (binding 3), which synchronize() reports as
//           errc::out_of_range.
// A workgroup finds its item (a block, or NR rows and a column, of one batch) from its
// linear index in the grid, which the planner spreads over up to three dimensions of at
// most 65535 workgroups; those past the last item leave at once.
//
// Loads. Rows are read in chunks of 4 consecutive elements (8 for the quantized types,
// each chunk decoding its own scales: on lavapipe, keeping a group's scales and
// activations live across rows spills more than decoding again costs). The mat-vec
// kernel reads q4_K in 32-bit words where every block starts on one (a8w).
// When every row of a float tensor is contiguous and starts at a multiple of 4 elements
// (element stride 1; K, the row strides and the tensor's offset in its binding multiples
// of 4) a chunk is one vector load, otherwise 4 element loads whose indices are clamped
// into the row (elements past K then read as 0). Both ways are compiled into every
// variant, and one is picked per dispatch, outside the loops over K: vectors when prm.y
// is set (by ops/mul_mat.hpp, from the strides and K) and both offsets are multiples of
// 4. Lavapipe, a CPU driver, runs both sides of a branch under a mask, and a loop at
// least once: a choice inside the loops would cost both ways throughout, while here the
// way not taken costs one masked pass of its loop.
//
// Types (A_*: the weights, B_*: the activations):
//   A_F32, A_HALF (f16, or bf16 when prm.x bit 0 is set), A_Q8_0, A_Q4_0
//   A_QX with Q_<TYPE>: q4_1, q5_0, q5_1, iq4_nl, mxfp4, q2_K ... q6_K, q8_K, iq4_xs,
//     tq1_0, tq2_0, iq2_xxs ... iq1_m (these seven and the three before them not with
//     MUL_MAT_ID), dequantized
//     8 values at a time by quants.glsl (mxfp4's blocks are read as bytes: 8-bit storage)
//   B_F32, B_HALF (f16, or bf16 when prm.x bit 1 is set)
// Everything 16-bit (all but f32) needs 16-bit storage; values become f32 as they are
// read, so there is no 16-bit arithmetic.
//
// variant: mul_mat_f32_f32 -DA_F32 -DB_F32
// variant: mul_mat_f32_half -DA_F32 -DB_HALF
// variant: mul_mat_half_f32 -DA_HALF -DB_F32
// variant: mul_mat_half_half -DA_HALF -DB_HALF
// variant: mul_mat_q8_0_f32 -DA_Q8_0 -DB_F32
// variant: mul_mat_q8_0_half -DA_Q8_0 -DB_HALF
// variant: mul_mat_q4_0_f32 -DA_Q4_0 -DB_F32
// variant: mul_mat_q4_0_half -DA_Q4_0 -DB_HALF
// variant: mul_mat_narrow_f32_f32 -DNARROW -DA_F32 -DB_F32
// variant: mul_mat_narrow_f32_half -DNARROW -DA_F32 -DB_HALF
// variant: mul_mat_narrow_half_f32 -DNARROW -DA_HALF -DB_F32
// variant: mul_mat_narrow_half_half -DNARROW -DA_HALF -DB_HALF
// variant: mul_mat_narrow_q8_0_f32 -DNARROW -DA_Q8_0 -DB_F32
// variant: mul_mat_narrow_q8_0_half -DNARROW -DA_Q8_0 -DB_HALF
// variant: mul_mat_narrow_q4_0_f32 -DNARROW -DA_Q4_0 -DB_F32
// variant: mul_mat_narrow_q4_0_half -DNARROW -DA_Q4_0 -DB_HALF
// variant: mul_mat_vec_f32_f32 -DMV -DA_F32 -DB_F32
// variant: mul_mat_vec_f32_half -DMV -DA_F32 -DB_HALF
// variant: mul_mat_vec_half_f32 -DMV -DA_HALF -DB_F32
// variant: mul_mat_vec_half_half -DMV -DA_HALF -DB_HALF
// variant: mul_mat_vec_q8_0_f32 -DMV -DA_Q8_0 -DB_F32
// variant: mul_mat_vec_q8_0_half -DMV -DA_Q8_0 -DB_HALF
// variant: mul_mat_vec_q4_0_f32 -DMV -DA_Q4_0 -DB_F32
// variant: mul_mat_vec_q4_0_half -DMV -DA_Q4_0 -DB_HALF
// variant: mul_mat_id_f32_f32 -DMV -DMUL_MAT_ID -DA_F32 -DB_F32
// variant: mul_mat_id_f32_half -DMV -DMUL_MAT_ID -DA_F32 -DB_HALF
// variant: mul_mat_id_half_f32 -DMV -DMUL_MAT_ID -DA_HALF -DB_F32
// variant: mul_mat_id_half_half -DMV -DMUL_MAT_ID -DA_HALF -DB_HALF
// variant: mul_mat_id_q8_0_f32 -DMV -DMUL_MAT_ID -DA_Q8_0 -DB_F32
// variant: mul_mat_id_q8_0_half -DMV -DMUL_MAT_ID -DA_Q8_0 -DB_HALF
// variant: mul_mat_id_q4_0_f32 -DMV -DMUL_MAT_ID -DA_Q4_0 -DB_F32
// variant: mul_mat_id_q4_0_half -DMV -DMUL_MAT_ID -DA_Q4_0 -DB_HALF
// variant: mul_mat_q4_1_f32 -DA_QX -DQ_Q4_1 -DB_F32
// variant: mul_mat_q4_1_half -DA_QX -DQ_Q4_1 -DB_HALF
// variant: mul_mat_q5_0_f32 -DA_QX -DQ_Q5_0 -DB_F32
// variant: mul_mat_q5_0_half -DA_QX -DQ_Q5_0 -DB_HALF
// variant: mul_mat_q5_1_f32 -DA_QX -DQ_Q5_1 -DB_F32
// variant: mul_mat_q5_1_half -DA_QX -DQ_Q5_1 -DB_HALF
// variant: mul_mat_iq4_nl_f32 -DA_QX -DQ_IQ4_NL -DB_F32
// variant: mul_mat_iq4_nl_half -DA_QX -DQ_IQ4_NL -DB_HALF
// variant: mul_mat_mxfp4_f32 -DA_QX -DQ_MXFP4 -DB_F32
// variant: mul_mat_mxfp4_half -DA_QX -DQ_MXFP4 -DB_HALF
// variant: mul_mat_q2_K_f32 -DA_QX -DQ_Q2_K -DB_F32
// variant: mul_mat_q2_K_half -DA_QX -DQ_Q2_K -DB_HALF
// variant: mul_mat_q3_K_f32 -DA_QX -DQ_Q3_K -DB_F32
// variant: mul_mat_q3_K_half -DA_QX -DQ_Q3_K -DB_HALF
// variant: mul_mat_q4_K_f32 -DA_QX -DQ_Q4_K -DB_F32
// variant: mul_mat_q4_K_half -DA_QX -DQ_Q4_K -DB_HALF
// variant: mul_mat_q5_K_f32 -DA_QX -DQ_Q5_K -DB_F32
// variant: mul_mat_q5_K_half -DA_QX -DQ_Q5_K -DB_HALF
// variant: mul_mat_q6_K_f32 -DA_QX -DQ_Q6_K -DB_F32
// variant: mul_mat_q6_K_half -DA_QX -DQ_Q6_K -DB_HALF
// variant: mul_mat_q8_K_f32 -DA_QX -DQ_Q8_K -DB_F32
// variant: mul_mat_q8_K_half -DA_QX -DQ_Q8_K -DB_HALF
// variant: mul_mat_iq4_xs_f32 -DA_QX -DQ_IQ4_XS -DB_F32
// variant: mul_mat_iq4_xs_half -DA_QX -DQ_IQ4_XS -DB_HALF
// variant: mul_mat_tq1_0_f32 -DA_QX -DQ_TQ1_0 -DB_F32
// variant: mul_mat_tq1_0_half -DA_QX -DQ_TQ1_0 -DB_HALF
// variant: mul_mat_tq2_0_f32 -DA_QX -DQ_TQ2_0 -DB_F32
// variant: mul_mat_tq2_0_half -DA_QX -DQ_TQ2_0 -DB_HALF
// variant: mul_mat_iq2_xxs_f32 -DA_QX -DQ_IQ2_XXS -DB_F32
// variant: mul_mat_iq2_xxs_half -DA_QX -DQ_IQ2_XXS -DB_HALF
// variant: mul_mat_iq2_xs_f32 -DA_QX -DQ_IQ2_XS -DB_F32
// variant: mul_mat_iq2_xs_half -DA_QX -DQ_IQ2_XS -DB_HALF
// variant: mul_mat_iq2_s_f32 -DA_QX -DQ_IQ2_S -DB_F32
// variant: mul_mat_iq2_s_half -DA_QX -DQ_IQ2_S -DB_HALF
// variant: mul_mat_iq3_xxs_f32 -DA_QX -DQ_IQ3_XXS -DB_F32
// variant: mul_mat_iq3_xxs_half -DA_QX -DQ_IQ3_XXS -DB_HALF
// variant: mul_mat_iq3_s_f32 -DA_QX -DQ_IQ3_S -DB_F32
// variant: mul_mat_iq3_s_half -DA_QX -DQ_IQ3_S -DB_HALF
// variant: mul_mat_iq1_s_f32 -DA_QX -DQ_IQ1_S -DB_F32
// variant: mul_mat_iq1_s_half -DA_QX -DQ_IQ1_S -DB_HALF
// variant: mul_mat_iq1_m_f32 -DA_QX -DQ_IQ1_M -DB_F32
// variant: mul_mat_iq1_m_half -DA_QX -DQ_IQ1_M -DB_HALF
// variant: mul_mat_narrow_q4_1_f32 -DNARROW -DA_QX -DQ_Q4_1 -DB_F32
// variant: mul_mat_narrow_q4_1_half -DNARROW -DA_QX -DQ_Q4_1 -DB_HALF
// variant: mul_mat_narrow_q5_0_f32 -DNARROW -DA_QX -DQ_Q5_0 -DB_F32
// variant: mul_mat_narrow_q5_0_half -DNARROW -DA_QX -DQ_Q5_0 -DB_HALF
// variant: mul_mat_narrow_q5_1_f32 -DNARROW -DA_QX -DQ_Q5_1 -DB_F32
// variant: mul_mat_narrow_q5_1_half -DNARROW -DA_QX -DQ_Q5_1 -DB_HALF
// variant: mul_mat_narrow_iq4_nl_f32 -DNARROW -DA_QX -DQ_IQ4_NL -DB_F32
// variant: mul_mat_narrow_iq4_nl_half -DNARROW -DA_QX -DQ_IQ4_NL -DB_HALF
// variant: mul_mat_narrow_mxfp4_f32 -DNARROW -DA_QX -DQ_MXFP4 -DB_F32
// variant: mul_mat_narrow_mxfp4_half -DNARROW -DA_QX -DQ_MXFP4 -DB_HALF
// variant: mul_mat_narrow_q2_K_f32 -DNARROW -DA_QX -DQ_Q2_K -DB_F32
// variant: mul_mat_narrow_q2_K_half -DNARROW -DA_QX -DQ_Q2_K -DB_HALF
// variant: mul_mat_narrow_q3_K_f32 -DNARROW -DA_QX -DQ_Q3_K -DB_F32
// variant: mul_mat_narrow_q3_K_half -DNARROW -DA_QX -DQ_Q3_K -DB_HALF
// variant: mul_mat_narrow_q4_K_f32 -DNARROW -DA_QX -DQ_Q4_K -DB_F32
// variant: mul_mat_narrow_q4_K_half -DNARROW -DA_QX -DQ_Q4_K -DB_HALF
// variant: mul_mat_narrow_q5_K_f32 -DNARROW -DA_QX -DQ_Q5_K -DB_F32
// variant: mul_mat_narrow_q5_K_half -DNARROW -DA_QX -DQ_Q5_K -DB_HALF
// variant: mul_mat_narrow_q6_K_f32 -DNARROW -DA_QX -DQ_Q6_K -DB_F32
// variant: mul_mat_narrow_q6_K_half -DNARROW -DA_QX -DQ_Q6_K -DB_HALF
// variant: mul_mat_narrow_q8_K_f32 -DNARROW -DA_QX -DQ_Q8_K -DB_F32
// variant: mul_mat_narrow_q8_K_half -DNARROW -DA_QX -DQ_Q8_K -DB_HALF
// variant: mul_mat_narrow_iq4_xs_f32 -DNARROW -DA_QX -DQ_IQ4_XS -DB_F32
// variant: mul_mat_narrow_iq4_xs_half -DNARROW -DA_QX -DQ_IQ4_XS -DB_HALF
// variant: mul_mat_narrow_tq1_0_f32 -DNARROW -DA_QX -DQ_TQ1_0 -DB_F32
// variant: mul_mat_narrow_tq1_0_half -DNARROW -DA_QX -DQ_TQ1_0 -DB_HALF
// variant: mul_mat_narrow_tq2_0_f32 -DNARROW -DA_QX -DQ_TQ2_0 -DB_F32
// variant: mul_mat_narrow_tq2_0_half -DNARROW -DA_QX -DQ_TQ2_0 -DB_HALF
// variant: mul_mat_narrow_iq2_xxs_f32 -DNARROW -DA_QX -DQ_IQ2_XXS -DB_F32
// variant: mul_mat_narrow_iq2_xxs_half -DNARROW -DA_QX -DQ_IQ2_XXS -DB_HALF
// variant: mul_mat_narrow_iq2_xs_f32 -DNARROW -DA_QX -DQ_IQ2_XS -DB_F32
// variant: mul_mat_narrow_iq2_xs_half -DNARROW -DA_QX -DQ_IQ2_XS -DB_HALF
// variant: mul_mat_narrow_iq2_s_f32 -DNARROW -DA_QX -DQ_IQ2_S -DB_F32
// variant: mul_mat_narrow_iq2_s_half -DNARROW -DA_QX -DQ_IQ2_S -DB_HALF
// variant: mul_mat_narrow_iq3_xxs_f32 -DNARROW -DA_QX -DQ_IQ3_XXS -DB_F32
// variant: mul_mat_narrow_iq3_xxs_half -DNARROW -DA_QX -DQ_IQ3_XXS -DB_HALF
// variant: mul_mat_narrow_iq3_s_f32 -DNARROW -DA_QX -DQ_IQ3_S -DB_F32
// variant: mul_mat_narrow_iq3_s_half -DNARROW -DA_QX -DQ_IQ3_S -DB_HALF
// variant: mul_mat_narrow_iq1_s_f32 -DNARROW -DA_QX -DQ_IQ1_S -DB_F32
// variant: mul_mat_narrow_iq1_s_half -DNARROW -DA_QX -DQ_IQ1_S -DB_HALF
// variant: mul_mat_narrow_iq1_m_f32 -DNARROW -DA_QX -DQ_IQ1_M -DB_F32
// variant: mul_mat_narrow_iq1_m_half -DNARROW -DA_QX -DQ_IQ1_M -DB_HALF
// variant: mul_mat_vec_q4_1_f32 -DMV -DA_QX -DQ_Q4_1 -DB_F32
// variant: mul_mat_vec_q4_1_half -DMV -DA_QX -DQ_Q4_1 -DB_HALF
// variant: mul_mat_vec_q5_0_f32 -DMV -DA_QX -DQ_Q5_0 -DB_F32
// variant: mul_mat_vec_q5_0_half -DMV -DA_QX -DQ_Q5_0 -DB_HALF
// variant: mul_mat_vec_q5_1_f32 -DMV -DA_QX -DQ_Q5_1 -DB_F32
// variant: mul_mat_vec_q5_1_half -DMV -DA_QX -DQ_Q5_1 -DB_HALF
// variant: mul_mat_vec_iq4_nl_f32 -DMV -DA_QX -DQ_IQ4_NL -DB_F32
// variant: mul_mat_vec_iq4_nl_half -DMV -DA_QX -DQ_IQ4_NL -DB_HALF
// variant: mul_mat_vec_mxfp4_f32 -DMV -DA_QX -DQ_MXFP4 -DB_F32
// variant: mul_mat_vec_mxfp4_half -DMV -DA_QX -DQ_MXFP4 -DB_HALF
// variant: mul_mat_vec_q2_K_f32 -DMV -DA_QX -DQ_Q2_K -DB_F32
// variant: mul_mat_vec_q2_K_half -DMV -DA_QX -DQ_Q2_K -DB_HALF
// variant: mul_mat_vec_q3_K_f32 -DMV -DA_QX -DQ_Q3_K -DB_F32
// variant: mul_mat_vec_q3_K_half -DMV -DA_QX -DQ_Q3_K -DB_HALF
// variant: mul_mat_vec_q4_K_f32 -DMV -DA_QX -DQ_Q4_K -DB_F32
// variant: mul_mat_vec_q4_K_half -DMV -DA_QX -DQ_Q4_K -DB_HALF
// variant: mul_mat_vec_q5_K_f32 -DMV -DA_QX -DQ_Q5_K -DB_F32
// variant: mul_mat_vec_q5_K_half -DMV -DA_QX -DQ_Q5_K -DB_HALF
// variant: mul_mat_vec_q6_K_f32 -DMV -DA_QX -DQ_Q6_K -DB_F32
// variant: mul_mat_vec_q6_K_half -DMV -DA_QX -DQ_Q6_K -DB_HALF
// variant: mul_mat_vec_q8_K_f32 -DMV -DA_QX -DQ_Q8_K -DB_F32
// variant: mul_mat_vec_q8_K_half -DMV -DA_QX -DQ_Q8_K -DB_HALF
// variant: mul_mat_vec_iq4_xs_f32 -DMV -DA_QX -DQ_IQ4_XS -DB_F32
// variant: mul_mat_vec_iq4_xs_half -DMV -DA_QX -DQ_IQ4_XS -DB_HALF
// variant: mul_mat_vec_tq1_0_f32 -DMV -DA_QX -DQ_TQ1_0 -DB_F32
// variant: mul_mat_vec_tq1_0_half -DMV -DA_QX -DQ_TQ1_0 -DB_HALF
// variant: mul_mat_vec_tq2_0_f32 -DMV -DA_QX -DQ_TQ2_0 -DB_F32
// variant: mul_mat_vec_tq2_0_half -DMV -DA_QX -DQ_TQ2_0 -DB_HALF
// variant: mul_mat_vec_iq2_xxs_f32 -DMV -DA_QX -DQ_IQ2_XXS -DB_F32
// variant: mul_mat_vec_iq2_xxs_half -DMV -DA_QX -DQ_IQ2_XXS -DB_HALF
// variant: mul_mat_vec_iq2_xs_f32 -DMV -DA_QX -DQ_IQ2_XS -DB_F32
// variant: mul_mat_vec_iq2_xs_half -DMV -DA_QX -DQ_IQ2_XS -DB_HALF
// variant: mul_mat_vec_iq2_s_f32 -DMV -DA_QX -DQ_IQ2_S -DB_F32
// variant: mul_mat_vec_iq2_s_half -DMV -DA_QX -DQ_IQ2_S -DB_HALF
// variant: mul_mat_vec_iq3_xxs_f32 -DMV -DA_QX -DQ_IQ3_XXS -DB_F32
// variant: mul_mat_vec_iq3_xxs_half -DMV -DA_QX -DQ_IQ3_XXS -DB_HALF
// variant: mul_mat_vec_iq3_s_f32 -DMV -DA_QX -DQ_IQ3_S -DB_F32
// variant: mul_mat_vec_iq3_s_half -DMV -DA_QX -DQ_IQ3_S -DB_HALF
// variant: mul_mat_vec_iq1_s_f32 -DMV -DA_QX -DQ_IQ1_S -DB_F32
// variant: mul_mat_vec_iq1_s_half -DMV -DA_QX -DQ_IQ1_S -DB_HALF
// variant: mul_mat_vec_iq1_m_f32 -DMV -DA_QX -DQ_IQ1_M -DB_F32
// variant: mul_mat_vec_iq1_m_half -DMV -DA_QX -DQ_IQ1_M -DB_HALF
// variant: mul_mat_id_q4_1_f32 -DMV -DMUL_MAT_ID -DA_QX -DQ_Q4_1 -DB_F32
// variant: mul_mat_id_q4_1_half -DMV -DMUL_MAT_ID -DA_QX -DQ_Q4_1 -DB_HALF
// variant: mul_mat_id_q5_0_f32 -DMV -DMUL_MAT_ID -DA_QX -DQ_Q5_0 -DB_F32
// variant: mul_mat_id_q5_0_half -DMV -DMUL_MAT_ID -DA_QX -DQ_Q5_0 -DB_HALF
// variant: mul_mat_id_q5_1_f32 -DMV -DMUL_MAT_ID -DA_QX -DQ_Q5_1 -DB_F32
// variant: mul_mat_id_q5_1_half -DMV -DMUL_MAT_ID -DA_QX -DQ_Q5_1 -DB_HALF
// variant: mul_mat_id_iq4_nl_f32 -DMV -DMUL_MAT_ID -DA_QX -DQ_IQ4_NL -DB_F32
// variant: mul_mat_id_iq4_nl_half -DMV -DMUL_MAT_ID -DA_QX -DQ_IQ4_NL -DB_HALF
// variant: mul_mat_id_mxfp4_f32 -DMV -DMUL_MAT_ID -DA_QX -DQ_MXFP4 -DB_F32
// variant: mul_mat_id_mxfp4_half -DMV -DMUL_MAT_ID -DA_QX -DQ_MXFP4 -DB_HALF
// variant: mul_mat_id_q2_K_f32 -DMV -DMUL_MAT_ID -DA_QX -DQ_Q2_K -DB_F32
// variant: mul_mat_id_q2_K_half -DMV -DMUL_MAT_ID -DA_QX -DQ_Q2_K -DB_HALF
// variant: mul_mat_id_q3_K_f32 -DMV -DMUL_MAT_ID -DA_QX -DQ_Q3_K -DB_F32
// variant: mul_mat_id_q3_K_half -DMV -DMUL_MAT_ID -DA_QX -DQ_Q3_K -DB_HALF
// variant: mul_mat_id_q4_K_f32 -DMV -DMUL_MAT_ID -DA_QX -DQ_Q4_K -DB_F32
// variant: mul_mat_id_q4_K_half -DMV -DMUL_MAT_ID -DA_QX -DQ_Q4_K -DB_HALF
// variant: mul_mat_id_q5_K_f32 -DMV -DMUL_MAT_ID -DA_QX -DQ_Q5_K -DB_F32
// variant: mul_mat_id_q5_K_half -DMV -DMUL_MAT_ID -DA_QX -DQ_Q5_K -DB_HALF
// variant: mul_mat_id_q6_K_f32 -DMV -DMUL_MAT_ID -DA_QX -DQ_Q6_K -DB_F32
// variant: mul_mat_id_q6_K_half -DMV -DMUL_MAT_ID -DA_QX -DQ_Q6_K -DB_HALF
// variant: mul_mat_id_q8_K_f32 -DMV -DMUL_MAT_ID -DA_QX -DQ_Q8_K -DB_F32
// variant: mul_mat_id_q8_K_half -DMV -DMUL_MAT_ID -DA_QX -DQ_Q8_K -DB_HALF
#include "common.glsl"

#extension GL_EXT_control_flow_attributes : require
#if !defined(A_F32) || !defined(B_F32)
#extension GL_EXT_shader_16bit_storage : require
#endif
#if defined(Q_MXFP4)
#extension GL_EXT_shader_8bit_storage : require
#endif

// The kernels' shapes; ops/mul_mat.hpp relies on them.
#if defined(MV)
#define WG 16
#define NR 8 // a multiple of 4, at most WG
#elif defined(NARROW)
#define BM 128
#define BN 32
#define BK 16
#define TM 8
#define TN 8
#define WG ((BM / TM) * (BN / TN))
#else
#define BM 128
#define BN 128
#define BK 16
#define TM 16
#define TN 16
#define WG ((BM / TM) * (BN / TN))
#endif

#if defined(A_Q8_0) || defined(A_Q4_0) || defined(A_QX)
#define A_QUANT
#endif

layout(local_size_x = WG) in;

// ---- element access -----------------------------------------------------------------

// a 16-bit float (f16, or bf16 when `bf`), and four of them packed in two words
float half_value(uint h, bool bf) { return bf ? uintBitsToFloat(h << 16) : unpackHalf2x16(h).x; }
vec4 half_quad(uvec2 w, bool bf) {
    return bf ? uintBitsToFloat(uvec4(w.x << 16, w.x & 0xffff0000u, w.y << 16, w.y & 0xffff0000u))
              : vec4(unpackHalf2x16(w.x), unpackHalf2x16(w.y));
}

// Source 0; a_quad(i): elements 4 i .. 4 i + 3 of the binding.
#if defined(A_F32)
layout(binding = 0, std430) readonly buffer A { float a[]; };
layout(binding = 0, std430) readonly buffer AV { vec4 a_v[]; };
float a_elem(uint i) { return a[i]; }
vec4 a_quad(uint i) { return a_v[i]; }
#elif defined(A_HALF)
layout(binding = 0, std430) readonly buffer A { uint16_t a[]; };
layout(binding = 0, std430) readonly buffer AV { uvec2 a_v[]; };
float a_elem(uint i) { return half_value(uint(a[i]), (p.prm.x & 1u) != 0); }
vec4 a_quad(uint i) { return half_quad(a_v[i], (p.prm.x & 1u) != 0); }
#elif defined(Q_MXFP4)
layout(binding = 0, std430) readonly buffer A { uint8_t a[]; };
#else
layout(binding = 0, std430) readonly buffer A { uint16_t a[]; };
#endif
#if defined(A_QX)
#include "convert.glsl"
#define Q_UNIT(i) uint(a[i])
#define Q_HALF(h) unpackHalf2x16(h).x
#include "quants.glsl"
#endif

// Source 1.
#if defined(B_F32)
layout(binding = 1, std430) readonly buffer B { float b[]; };
layout(binding = 1, std430) readonly buffer BV { vec4 b_v[]; };
float b_elem(uint i) { return b[i]; }
vec4 b_quad(uint i) { return b_v[i]; }
#else
layout(binding = 1, std430) readonly buffer B { uint16_t b[]; };
layout(binding = 1, std430) readonly buffer BV { uvec2 b_v[]; };
float b_elem(uint i) { return half_value(uint(b[i]), (p.prm.x & 2u) != 0); }
vec4 b_quad(uint i) { return half_quad(b_v[i], (p.prm.x & 2u) != 0); }
#endif

layout(binding = 2, std430) writeonly buffer D { float d[]; };

#if defined(MUL_MAT_ID)
// mul_mat_id: the stream's error word and the i32 ids (source 2, at offs.w; strides prm.z
// and prm.w in 4-byte units)
layout(binding = 3, std430) buffer E { uint error_word; };
layout(binding = 4, std430) readonly buffer I { int ids[]; };
float epilogue(float v, uint m, uint at_) { return v; }
#else
#include "activation.glsl"
// The fused groups (core/fusion.hpp) finish each result as it is stored; prm.z says how:
//   0  as it is
//   1  mul_mat_add: plus the bias e[offs.w + m] (source 2, one contiguous f32 row)
//   2  glu_pair: silu(g) * the result, g the gate product (source 2) at the same place in
//      its tensor as the result in dst (both laid out alike), at offs.w
layout(binding = 4, std430) readonly buffer X { float e[]; };
float epilogue(float v, uint m, uint at_) {
    if (p.prm.z == 1u) return v + e[p.offs.w + m];
    if (p.prm.z == 2u) return act_silu(e[at_ - p.offs.z + p.offs.w]) * v;
    return v;
}
#endif

// Whether rows are read in vectors (see the file comment): the planner vouches for the
// strides and K, the offsets are checked here (a quantized a has none to check).
bool vectors() {
#if defined(A_QUANT)
    const bool a_aligned = true;
#else
    const bool a_aligned = p.offs.x % 4 == 0;
#endif
    return p.prm.y != 0 && a_aligned && p.offs.y % 4 == 0;
}

// Elements k .. k + 3 (k < K) of the row of a or b at unit r; past K they read as 0.
// `vec`: the row is contiguous and r + k a multiple of 4, so one vector load.
#if !defined(A_QUANT)
vec4 a4(uint r, uint k, const bool vec) {
    if (vec) return a_quad((r + k) / 4);
    const uint K = p.a_ne.x, s = p.a_nb.x;
    const uvec4 kk = uvec4(k) + uvec4(0, 1, 2, 3), c = min(kk, uvec4(K - 1));
    const vec4 v = vec4(a_elem(r + c.x * s), a_elem(r + c.y * s), a_elem(r + c.z * s), a_elem(r + c.w * s));
    return mix(vec4(0.0), v, lessThan(kk, uvec4(K)));
}
#endif
vec4 b4(uint r, uint k, const bool vec) {
    if (vec) return b_quad((r + k) / 4);
    const uint K = p.b_ne.x, s = p.b_nb.x;
    const uvec4 kk = uvec4(k) + uvec4(0, 1, 2, 3), c = min(kk, uvec4(K - 1));
    const vec4 v = vec4(b_elem(r + c.x * s), b_elem(r + c.y * s), b_elem(r + c.z * s), b_elem(r + c.w * s));
    return mix(vec4(0.0), v, lessThan(kk, uvec4(K)));
}

// Quantized rows: elements k .. k + 7 (k < K, a multiple of 8) of the row at unit r.
#if defined(A_Q8_0)
// a block (17 units): f16 scale d, then 32 int8 q, two per unit (little endian); d * q
void a8(uint r, uint k, out vec4 lo, out vec4 hi) {
    const uint blk = r + (k / 32) * p.a_nb.x;
    const float d = unpackHalf2x16(uint(a[blk])).x;
    const uint q = blk + 1 + (k % 32) / 2;
    const int w0 = int(a[q]), w1 = int(a[q + 1]), w2 = int(a[q + 2]), w3 = int(a[q + 3]);
    lo = d * vec4(bitfieldExtract(w0, 0, 8), bitfieldExtract(w0, 8, 8), bitfieldExtract(w1, 0, 8),
                  bitfieldExtract(w1, 8, 8));
    hi = d * vec4(bitfieldExtract(w2, 0, 8), bitfieldExtract(w2, 8, 8), bitfieldExtract(w3, 0, 8),
                  bitfieldExtract(w3, 8, 8));
}
#elif defined(A_Q4_0)
// a block (9 units): f16 scale d, then 16 bytes; byte j holds element j in its low nibble
// and element j + 16 in its high nibble; d * (nibble - 8)
void a8(uint r, uint k, out vec4 lo, out vec4 hi) {
    const uint blk = r + (k / 32) * p.a_nb.x;
    const float d = unpackHalf2x16(uint(a[blk])).x;
    const uint j = k % 32;
    const uint q = blk + 1 + (j % 16) / 2, sh = j < 16 ? 0 : 4;
    const uvec4 w = uvec4(uint(a[q]), uint(a[q + 1]), uint(a[q + 2]), uint(a[q + 3])) >> sh;
    lo = d * (vec4(w.x & 15u, (w.x >> 8) & 15u, w.y & 15u, (w.y >> 8) & 15u) - 8.0);
    hi = d * (vec4(w.z & 15u, (w.z >> 8) & 15u, w.w & 15u, (w.w >> 8) & 15u) - 8.0);
}
#elif defined(A_QX)
// a block of Q_UNITS units, Q_BLOCK values (quants.glsl)
void a8(uint r, uint k, out vec4 lo, out vec4 hi) { q_eight(r + (k / Q_BLOCK) * p.a_nb.x, k % Q_BLOCK, lo, hi); }
#endif

#if defined(Q_Q4_K)
// q4_K in 32-bit words, for the mat-vec kernel: 6 loads per 8 values where 16-bit words
// take 9 (on lavapipe each is a gather, the kernel's main cost). The values are a8's.
layout(binding = 0, std430) readonly buffer AW { uint a_w[]; };

// Whether every block starts at a 32-bit word: a's offset and row strides even (its block
// stride, 72 units, is).
bool words_aligned() { return ((p.offs.x | p.a_nb.y | p.a_nb.z | p.a_nb.w) & 1u) == 0u; }

void a8w(uint r, uint k, out vec4 lo, out vec4 hi) {
    const uint w = (r + (k >> 8) * p.a_nb.x) >> 1; // the block's first word: d, dmin
    const uint j = k & 255u, sj = j >> 5, sh8 = (sj & 3u) * 8u;
    const vec2 dm = unpackHalf2x16(a_w[w]);
    // scales bytes 4 + i, 8 + i, 12 + i (i = sj % 4): byte i of words 1, 2, 3 (q_scale_min)
    const uint sa = (a_w[w + 1u] >> sh8) & 0xffu, sb = (a_w[w + 2u] >> sh8) & 0xffu;
    const uint sc = (a_w[w + 3u] >> sh8) & 0xffu;
    const uvec2 sm = sj < 4u ? uvec2(sa, sb) & 63u
                             : uvec2((sc & 15u) | ((sa >> 6) << 4), (sc >> 4) | ((sb >> 6) << 4));
    precise float dl = dm.x * float(sm.x);
    precise float ml = dm.y * float(sm.y);
    // qs bytes 16 + 32 (sj / 2) + j % 32 ...: words 4 + 8 (sj / 2) + (j % 32) / 4, two of them
    const uint q = w + 4u + 8u * (sj >> 1) + ((j & 31u) >> 2), sh = (sj & 1u) * 4u;
    const uvec4 c0 = (uvec4(a_w[q]) >> (uvec4(0u, 8u, 16u, 24u) + sh)) & 15u;
    const uvec4 c1 = (uvec4(a_w[q + 1u]) >> (uvec4(0u, 8u, 16u, 24u) + sh)) & 15u;
    precise vec4 x = dl * vec4(c0) - ml;
    precise vec4 y = dl * vec4(c1) - ml;
    lo = x;
    hi = y;
}
#endif

// Where batch (i2, i3)'s rows start in a (broadcast over b's batches) and in b.
uint a_batch(uint i2, uint i3) {
    return p.offs.x + (i2 / (p.b_ne.z / p.a_ne.z)) * p.a_nb.z + (i3 / (p.b_ne.w / p.a_ne.w)) * p.a_nb.w;
}
uint b_batch(uint i2, uint i3) { return p.offs.y + i2 * p.b_nb.z + i3 * p.b_nb.w; }

// This workgroup's linear index in the grid.
uint work_item() {
    return gl_WorkGroupID.x + gl_NumWorkGroups.x * (gl_WorkGroupID.y + gl_NumWorkGroups.y * gl_WorkGroupID.z);
}

#if !defined(MV)
// ---- tiled --------------------------------------------------------------------------

// sa[k * BM / 4 + i]: rows 4 i .. 4 i + 3 of the slice at depth k (sb likewise)
shared vec4 sa[BK * BM / 4];
shared vec4 sb[BK * BN / 4];

// Staging a slice: a unit is 4 rows x KC depths (KC: a's chunk), read, then stored as KC
// vec4s. Rows past M or N and depths past K are staged as 0 (read from a valid place).
#if defined(A_QUANT)
#define KC 8
#else
#define KC 4
#endif
const uint UA = (BM / 4) * (BK / KC), UB = (BN / 4) * (BK / 4);

void stage(uint k0, uint m0, uint n0, uint ab, uint bb, const bool vec) {
    const uint M = p.ne.x, N = p.ne.y, K = p.a_ne.x;
    for (uint u = gl_LocalInvocationID.x; u < UA; u += WG) {
        const uint r4 = u / (BK / KC), kc = (u % (BK / KC)) * KC;
        const bool k_in = k0 + kc < K;
        const uint k = k_in ? k0 + kc : 0;
        vec4 lo[4], hi[4];
        [[unroll]] for (uint i = 0; i < 4; ++i) {
            const uint m = m0 + 4 * r4 + i;
            const uint r = ab + min(m, M - 1) * p.a_nb.y;
#if defined(A_QUANT)
            a8(r, k, lo[i], hi[i]);
#else
            lo[i] = a4(r, k, vec);
            hi[i] = vec4(0.0);
#endif
            const bool keep = k_in && m < M;
            lo[i] = mix(vec4(0.0), lo[i], bvec4(keep));
            hi[i] = mix(vec4(0.0), hi[i], bvec4(keep));
        }
        [[unroll]] for (uint j = 0; j < 4; ++j) {
            sa[(kc + j) * (BM / 4) + r4] = vec4(lo[0][j], lo[1][j], lo[2][j], lo[3][j]);
#if defined(A_QUANT)
            sa[(kc + 4 + j) * (BM / 4) + r4] = vec4(hi[0][j], hi[1][j], hi[2][j], hi[3][j]);
#endif
        }
    }
    for (uint u = gl_LocalInvocationID.x; u < UB; u += WG) {
        const uint r4 = u / (BK / 4), kc = (u % (BK / 4)) * 4;
        const bool k_in = k0 + kc < K;
        const uint k = k_in ? k0 + kc : 0;
        vec4 x[4];
        [[unroll]] for (uint i = 0; i < 4; ++i) {
            const uint n = n0 + 4 * r4 + i;
            x[i] = mix(vec4(0.0), b4(bb + min(n, N - 1) * p.b_nb.y, k, vec), bvec4(k_in && n < N));
        }
        [[unroll]] for (uint j = 0; j < 4; ++j) sb[(kc + j) * (BN / 4) + r4] = vec4(x[0][j], x[1][j], x[2][j], x[3][j]);
    }
}

// The block at (m0, n0) over all of K into acc (this invocation's TM x TN share).
void block(uint m0, uint n0, uint ab, uint bb, const bool vec, inout vec4 acc[TN][TM / 4]) {
    const uint K = p.a_ne.x;
    const uint tm = gl_LocalInvocationID.x % (BM / TM), tn = gl_LocalInvocationID.x / (BM / TM);
    for (uint k0 = 0; k0 < K; k0 += BK) {
        stage(k0, m0, n0, ab, bb, vec);
        barrier();
        for (uint kk = 0; kk < BK; ++kk) {
            vec4 x[TM / 4], y[TN / 4];
            [[unroll]] for (uint i = 0; i < TM / 4; ++i) x[i] = sa[kk * (BM / 4) + tm * (TM / 4) + i];
            [[unroll]] for (uint j = 0; j < TN / 4; ++j) y[j] = sb[kk * (BN / 4) + tn * (TN / 4) + j];
            // left as loops: drivers unroll them; unrolled here the SPIR-V grows
            // several-fold and runs no faster on lavapipe
            for (uint j = 0; j < TN; ++j)
                for (uint i = 0; i < TM / 4; ++i) acc[j][i] = fma(x[i], vec4(y[j / 4][j % 4]), acc[j][i]);
        }
        barrier();
    }
}

void main() {
    const uint M = p.ne.x, N = p.ne.y;
    const uint tiles_m = (M + BM - 1) / BM, tiles_n = (N + BN - 1) / BN;
    uint w = work_item();
    if (w >= tiles_m * tiles_n * p.ne.z * p.ne.w) return; // the whole workgroup leaves
    const uint m0 = (w % tiles_m) * BM;
    w /= tiles_m;
    const uint n0 = (w % tiles_n) * BN;
    w /= tiles_n;
    const uint i2 = w % p.ne.z, i3 = w / p.ne.z;
    const uint ab = a_batch(i2, i3), bb = b_batch(i2, i3);

    vec4 acc[TN][TM / 4];
    [[unroll]] for (uint j = 0; j < TN; ++j)
        [[unroll]] for (uint i = 0; i < TM / 4; ++i) acc[j][i] = vec4(0.0);
    if (vectors()) block(m0, n0, ab, bb, true, acc);
    else block(m0, n0, ab, bb, false, acc);

    const uint tm = gl_LocalInvocationID.x % (BM / TM), tn = gl_LocalInvocationID.x / (BM / TM);
    const uint o = p.offs.z + i2 * p.nb.z + i3 * p.nb.w;
    for (uint j = 0; j < TN; ++j) {
        const uint n = n0 + tn * TN + j;
        for (uint i = 0; i < TM; ++i) {
            const uint m = m0 + tm * TM + i;
            const uint at_ = o + n * p.nb.y + m * p.nb.x;
            if (n < N && m < M) d[at_] = epilogue(acc[j][i / 4][i % 4], m, at_);
        }
    }
}

#else
// ---- mat-vec ------------------------------------------------------------------------

#define NQ (NR / 4)
shared vec4 red[NQ][WG]; // the partial sums of rows 4 q .. 4 q + 3 in red[q]

// This invocation's share of the dot products of the rows of a at units ar[] with the
// column of b at unit br, row r's in sums[r / 4][r % 4]: chunks at k = 4 tid,
// 4 (tid + WG), ... (8 tid, ... for a quantized a).
#if !defined(A_QUANT)
// Every row contiguous, K a multiple of 4: vector loads.
void partial_vec(const uint ar[NR], uint br, out vec4 sums[NQ]) {
    const uint K = p.a_ne.x;
    vec4 acc[NR];
    [[unroll]] for (uint r = 0; r < NR; ++r) acc[r] = vec4(0.0);
    for (uint k = gl_LocalInvocationID.x * 4; k < K; k += WG * 4) {
        const vec4 y = b4(br, k, true);
        [[unroll]] for (uint r = 0; r < NR; ++r) acc[r] = fma(a4(ar[r], k, true), y, acc[r]);
    }
    const vec4 one = vec4(1.0);
    [[unroll]] for (uint q = 0; q < NQ; ++q)
        sums[q] = vec4(dot(acc[4 * q], one), dot(acc[4 * q + 1], one), dot(acc[4 * q + 2], one),
                       dot(acc[4 * q + 3], one));
}
// Any strides, a row at a time: the pass the vector way costs this way when it is not
// taken is then one row's.
void partial_any(const uint ar[NR], uint br, out vec4 sums[NQ]) {
    const uint K = p.a_ne.x;
    [[unroll]] for (uint q = 0; q < NQ; ++q) sums[q] = vec4(0.0);
    for (uint r = 0; r < NR; ++r)
        for (uint k = gl_LocalInvocationID.x * 4; k < K; k += WG * 4)
            sums[r / 4][r % 4] += dot(a4(ar[r], k, false), b4(br, k, false));
}
void partial(const uint ar[NR], uint br, out vec4 sums[NQ]) {
    if (vectors()) partial_vec(ar, br, sums);
    else partial_any(ar, br, sums);
}
#else
// `words`: a's blocks may be read as 32-bit words (a8w; q4_K only).
void partial_q(const uint ar[NR], uint br, const bool vec, const bool words, out vec4 sums[NQ]) {
    const uint K = p.a_ne.x;
    [[unroll]] for (uint q = 0; q < NQ; ++q) sums[q] = vec4(0.0);
    for (uint k = gl_LocalInvocationID.x * 8; k < K; k += WG * 8) {
        const vec4 ylo = b4(br, k, vec), yhi = b4(br, k + 4, vec);
        [[unroll]] for (uint r = 0; r < NR; ++r) {
            vec4 lo, hi;
#if defined(Q_Q4_K)
            if (words) a8w(ar[r], k, lo, hi);
            else a8(ar[r], k, lo, hi);
#else
            a8(ar[r], k, lo, hi);
#endif
            sums[r / 4][r % 4] += dot(lo, ylo) + dot(hi, yhi);
        }
    }
}
void partial(const uint ar[NR], uint br, out vec4 sums[NQ]) {
#if defined(Q_Q4_K)
    // the common case (contiguous rows at an even offset) one way, everything else another
    if (vectors() && words_aligned()) partial_q(ar, br, true, true, sums);
    else partial_q(ar, br, false, false, sums);
#else
    if (vectors()) partial_q(ar, br, true, false, sums);
    else partial_q(ar, br, false, false, sums);
#endif
}
#endif

void main() {
    const uint M = p.ne.x, N = p.ne.y;
    const uint groups = (M + NR - 1) / NR;
    uint w = work_item();
    if (w >= groups * N * p.ne.z * p.ne.w) return; // the whole workgroup leaves
    const uint m0 = (w % groups) * NR;
    w /= groups;
    const uint n = w % N;
    w /= N;
    const uint i2 = w % p.ne.z, i3 = w / p.ne.z;
    const uint tid = gl_LocalInvocationID.x;

#if defined(MUL_MAT_ID)
    // column (n, i2) is expert ids[n, i2]'s matrix times column (n % b.ne1, i2) of b; an id
    // out of range reads nothing (the same for the whole workgroup): zeros, and the flag
    const int e = ids[p.offs.w + n * p.prm.z + i2 * p.prm.w];
    if (e < 0 || uint(e) >= p.a_ne.z) {
        if (tid < NR && m0 + tid < M) d[p.offs.z + (m0 + tid) * p.nb.x + n * p.nb.y + i2 * p.nb.z] = 0.0;
        if (tid == 0 && m0 == 0) atomicOr(error_word, ERROR_INDEX);
        return;
    }
    const uint ab = p.offs.x + uint(e) * p.a_nb.z;
    const uint br = p.offs.y + (n % p.b_ne.y) * p.b_nb.y + i2 * p.b_nb.z;
#else
    const uint ab = a_batch(i2, i3);
    const uint br = b_batch(i2, i3) + n * p.b_nb.y;
#endif
    uint ar[NR]; // rows past M read the last one, and are not written
    [[unroll]] for (uint r = 0; r < NR; ++r) ar[r] = ab + min(m0 + r, M - 1) * p.a_nb.y;
    vec4 sums[NQ];
    partial(ar, br, sums);

    [[unroll]] for (uint q = 0; q < NQ; ++q) red[q][tid] = sums[q];
    barrier();
    [[unroll]] for (uint s = WG / 2; s > 0; s >>= 1) {
        if (tid < s)
            [[unroll]] for (uint q = 0; q < NQ; ++q) red[q][tid] += red[q][tid + s];
        barrier();
    }
    if (tid < NR && m0 + tid < M) {
        const uint at_ = p.offs.z + (m0 + tid) * p.nb.x + n * p.nb.y + i2 * p.nb.z + i3 * p.nb.w;
        d[at_] = epilogue(red[tid / 4][0][tid % 4], m0 + tid, at_);
    }
}

#endif
