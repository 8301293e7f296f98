#pragma once
// Run-time CPU feature dispatch.
//
// Kernels are compiled for several instruction sets in the same translation unit (GCC's
// target attribute), and the best one the running CPU supports is chosen at run time, so
// one binary built with baseline flags runs everywhere and uses AVX-512 where it exists.
// The portable level is plain C++ that the compiler vectorises for the baseline target;
// it is always compiled and always tested: set_isa_override(isa::portable) (or the
// environment variable BACKPLANE_CPU_ISA=portable) forces it on any machine.

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string_view>

namespace backplane::cpu {

/// Instruction-set levels the kernels are written for, in increasing order.
enum class isa : int {
    portable = 0, ///< plain C++ (baseline target)
    avx2 = 1,     ///< AVX2 + FMA + F16C
    avx512 = 2,   ///< AVX-512 F/BW/VL/DQ + VNNI (plus the avx2 set)
};

constexpr std::string_view to_string(isa i) noexcept {
    switch (i) {
    case isa::portable: return "portable";
    case isa::avx2: return "avx2";
    case isa::avx512: return "avx512";
    }
    return "?";
}

namespace detail {
inline isa detect_isa() noexcept {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
#if defined(__clang__) // clang's __builtin_cpu_supports does not know "f16c"; every AVX2 CPU has it
    const bool f16c = true;
#else
    const bool f16c = __builtin_cpu_supports("f16c");
#endif
    const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c;
    const bool avx512 = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
                        __builtin_cpu_supports("avx512vnni");
    return avx512 ? isa::avx512 : avx2 ? isa::avx2 : isa::portable;
#else
    return isa::portable;
#endif
}

inline isa env_cap(isa detected) noexcept {
    const char* e = std::getenv("BACKPLANE_CPU_ISA");
    if (e == nullptr) return detected;
    isa want = detected;
    if (std::strcmp(e, "portable") == 0) want = isa::portable;
    else if (std::strcmp(e, "avx2") == 0) want = isa::avx2;
    else if (std::strcmp(e, "avx512") == 0) want = isa::avx512;
    return static_cast<int>(want) < static_cast<int>(detected) ? want : detected; // never above the hardware
}

inline std::atomic<int>& isa_override() noexcept {
    static std::atomic<int> v{-1};
    return v;
}
} // namespace detail

/// The best level this CPU supports (detected once).
inline isa detected_isa() noexcept {
    static const isa level = detail::detect_isa();
    return level;
}

/// The level kernels use now: the detected one, capped by BACKPLANE_CPU_ISA and by
/// set_isa_override.
inline isa active_isa() noexcept {
    static const isa from_env = detail::env_cap(detected_isa());
    const int o = detail::isa_override().load(std::memory_order_relaxed);
    if (o >= 0 && o < static_cast<int>(from_env)) return static_cast<isa>(o);
    return from_env;
}

/// Caps the level kernels use (process-wide); a level above the hardware's is ignored.
/// clear_isa_override() returns to the detected level. Meant for tests and benchmarks.
inline void set_isa_override(isa level) noexcept {
    detail::isa_override().store(static_cast<int>(level), std::memory_order_relaxed);
}
inline void clear_isa_override() noexcept { detail::isa_override().store(-1, std::memory_order_relaxed); }

} // namespace backplane::cpu

// Function attributes for kernels of each level (GCC and Clang). A kernel compiled with
// one of these may only be called after checking active_isa().
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define BACKPLANE_TARGET_AVX2 __attribute__((target("avx2,fma,f16c")))
#define BACKPLANE_TARGET_AVX512 \
    __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")))
#define BACKPLANE_HAS_X86_KERNELS 1
#else
#define BACKPLANE_TARGET_AVX2
#define BACKPLANE_TARGET_AVX512
#define BACKPLANE_HAS_X86_KERNELS 0
#endif

// Brackets code that uses AVX-512 intrinsics: GCC 12's own intrinsic headers trigger
// -Wmaybe-uninitialized / -Wuninitialized when _mm512_sqrt_ps, _mm512_max_ps and others are inlined (they
// start from an "undefined" vector), a false positive that would otherwise reach every
// user's build.
#if defined(__GNUC__) && !defined(__clang__)
#define BACKPLANE_X86_KERNELS_BEGIN \
    _Pragma("GCC diagnostic push") _Pragma("GCC diagnostic ignored \"-Wmaybe-uninitialized\"") \
        _Pragma("GCC diagnostic ignored \"-Wuninitialized\"")
#define BACKPLANE_X86_KERNELS_END _Pragma("GCC diagnostic pop")
#else
#define BACKPLANE_X86_KERNELS_BEGIN
#define BACKPLANE_X86_KERNELS_END
#endif
