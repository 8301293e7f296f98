#pragma once
// BACKPLANE_UNROLL(n): a loop-unrolling hint for the host compiler. GCC reads
// `#pragma GCC unroll n`; nvcc's front end, which also reads the host code of a .cu file,
// does not know that pragma and warns, so under nvcc the hint is left out.

#define BACKPLANE_PRAGMA_(x) _Pragma(#x)
#if defined(__CUDACC__) || !defined(__GNUC__) || defined(__clang__)
#define BACKPLANE_UNROLL(n)
#else
#define BACKPLANE_UNROLL(n) BACKPLANE_PRAGMA_(GCC unroll n)
#endif
