#pragma once
// detail::unfused(x): the f32 value x, rounded as it is, which no later addition or
// subtraction may fuse with; detail::unfused(array): each value of an f32 array so.
//
// Why: a compiler may contract a * b + c into one fused multiply-add, rounded once instead
// of twice. g++ does so by default wherever the target has FMA (-march=native, -mfma,
// AArch64), clang++ with -ffp-contract=fast, both across statements and inlined calls.
// The reference quantizers give ggml's bytes only where they round as ggml's code rounds,
// and ggml's canonical bytes are those of its base library (what llama-quantize runs),
// which is built without FMA. A header-only library is compiled with its user's flags, so
// every product whose rounding the bytes depend on, and that an addition or subtraction
// consumes, is passed through unfused(); a product that is exact (an f16 scale times a
// small integer code) needs nothing, fused or not it is the same.
//
// How: an empty inline-asm statement that claims to read and write x in a register (x86
// "x", AArch64 "w"; elsewhere in memory, "m"), so the compiler must produce the rounded
// value and cannot look through it; it emits no instruction, but a loop that calls it is
// not vectorised. The array form is one such statement on the whole array in memory, so
// the loops that fill it (products) and read it (sums) stay vectorised. MSVC has no GNU asm and
// does not contract unless told to (/fp:contract): there it returns x. -ffast-math (reassociation)
// is beyond this; it changes the results anyway. tests/core/contraction checks it: the quantizers
// compiled with -march=native -ffp-contract=fast against a contraction-free build, byte for byte.

#include <cstddef>

namespace backplane::detail {

inline float unfused(float x) noexcept {
#if defined(__GNUC__) || defined(__clang__)
#if (defined(__x86_64__) || defined(__i386__)) && defined(__SSE_MATH__)
    asm("" : "+x"(x));
#elif defined(__aarch64__)
    asm("" : "+w"(x));
#else
    asm("" : "+m"(x));
#endif
#endif
    return x;
}

template <std::size_t N> void unfused(float (&v)[N]) noexcept {
#if defined(__GNUC__) || defined(__clang__)
    asm("" : "+m"(v));
#else
    (void)v;
#endif
}

} // namespace backplane::detail
