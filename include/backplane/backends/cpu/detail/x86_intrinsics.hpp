#pragma once
// The x86 intrinsics the CPU kernels use: SSE4.1, AVX, AVX2, FMA, F16C and AVX-512 F, VL,
// BW, DQ and VNNI, the instruction sets of BACKPLANE_TARGET_AVX2 and
// BACKPLANE_TARGET_AVX512 (isa.hpp). Every kernel header includes this one instead of
// <immintrin.h>.
//
// With GCC 11 to 14, only the headers of those sets: <immintrin.h> also brings AMX,
// AVX-512 FP16 and BF16, key locker and two dozen others the kernels never use, and costs
// every translation unit that includes <backplane/backplane.hpp> about 0.28 s and 19 MB of
// the compiler's memory more (g++ 12 -O2, a TU with the header alone: 0.69 s against
// 0.41 s). GCC's per-set headers refuse to be included on their own unless
// _IMMINTRIN_H_INCLUDED is defined, which <immintrin.h> itself does; it is defined around
// them and removed after, so a later #include <backplane/backends/cpu/detail/x86_intrinsics.hpp> still brings the rest (each
// per-set header has its own guard). Other compilers, and a program that included
// <immintrin.h> first, take <immintrin.h>.

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 11 && __GNUC__ <= 14 && \
    !defined(_IMMINTRIN_H_INCLUDED)
#include <smmintrin.h>
#define _IMMINTRIN_H_INCLUDED
#include <avxintrin.h>
#include <avx2intrin.h>
#include <avx512fintrin.h>
#include <avx512vlintrin.h>
#include <avx512bwintrin.h>
#include <avx512dqintrin.h>
#include <avx512vlbwintrin.h>
#include <avx512vldqintrin.h>
#include <avx512vnniintrin.h>
#include <avx512vnnivlintrin.h>
#include <fmaintrin.h>
#include <f16cintrin.h>
#undef _IMMINTRIN_H_INCLUDED
#elif defined(__x86_64__)
#include <immintrin.h>
#endif
