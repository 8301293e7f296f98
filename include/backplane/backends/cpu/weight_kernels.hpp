#pragma once
// The CPU backend's fast mul_mat and mul_mat_id kernels for the weight types of GGUF files
// beyond q8_0 and q4_0 (whose kernels are always there):
//  * the K-quants q2_K, q3_K, q4_K, q5_K, q6_K: integer dot products against b quantized
//    to q8_K (fast/kquant.hpp);
//  * q4_1, q5_0, q5_1, iq4_nl and mxfp4: the kernels of q8_0 and q4_0 with their decoders
//    (fast/quant_types.hpp).
// The i-quants but iq4_nl (iq4_xs, iq3_xxs ... iq1_m) and the ternary tq1_0, tq2_0 have no
// fast kernels yet: the reference kernel computes them, their rows dequantized by
// core/convert.hpp (to_float_row).
// AVX-512 VNNI, AVX2 and portable levels, chosen at run time.
//
// Include it in one translation unit of a program (any one: it fills tables the CPU
// backend reads, fast/kquant_entry.hpp and fast/quant.hpp's quant_more_jobs, before main)
// and every CPU backend of the program computes these weights with them; without it they
// run the reference kernel, whose results agree but which is many times slower. It stays
// out of <backplane/backplane.hpp> for that header's compile time (each weight type's
// kernels cost about 0.04 s of every translation unit that parses them);
// <backplane/runtime.hpp> and the conformance headers (whose parity batches run the CPU
// backend) include it.

#include <backplane/backends/cpu/fast/kquant.hpp>
#include <backplane/backends/cpu/fast/quant_types.hpp>
