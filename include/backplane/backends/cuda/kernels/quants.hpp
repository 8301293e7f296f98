#pragma once
// The values of the weight types beyond q8_0 and q4_0 as the CUDA kernels read them:
// q4_1, q5_0, q5_1, iq4_nl, mxfp4 (blocks of 32) and q2_K ... q6_K, q8_K, iq4_xs, tq1_0,
// tq2_0 and the lattice i-quants iq2_xxs, iq2_xs, iq2_s, iq3_xxs, iq3_s, iq1_s, iq1_m
// (super-blocks of 256), layouts as core/quants.hpp, core/kquants.hpp and
// core/iquants.hpp document them.
//
// Every function is __host__ __device__ and gives exactly core's dequantize_row_* value:
// the same f32 operations in the same order, each rounded on its own (__fmul_rn,
// __fadd_rn on the device, so nvcc never contracts a multiply and an add into an FMA;
// plain operators on the host, as core is compiled). That is why this header is .hpp and
// not .cuh: g++ compiles it too, so a host-only test (tests/backends/cuda/
// test_cuda_quants.cpp) checks the kernels' arithmetic bit for bit without a GPU.
//
// The quantizers (quantize<T>: q4_1, q5_0, q5_1, iq4_nl, mxfp4 and q2_K ... q6_K)
// likewise compute core's quantize_row_* blocks byte for byte, one block per call (one
// thread per block on the device): the K-quants' scale searches with the same iteration
// counts, comparisons and ties, divisions and square roots correctly rounded
// (__fdiv_rn, __fsqrt_rn), and mxfp4's floor(log2(max |x|)) from the exponent bits
// exactly as core's f32 log2 rounds it (detail::floor_log2).
//
// Blocks are read byte by byte: mxfp4's 17-byte blocks have no alignment at all, and the
// others only 2 bytes. Tables are packed into integer constants, so device code reads no
// host array; the lattice grids are device arrays made of the same lists as core's
// (core/detail/iq_grids.hpp), which the host reads.

#include <backplane/core/detail/iq_grids.hpp>
#include <backplane/core/iquants.hpp>
#include <backplane/core/kquants.hpp>
#include <backplane/core/quants.hpp>
#include <backplane/core/types.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#if defined(__CUDACC__)
#include <cuda_fp16.h>
#define BACKPLANE_CUDA_HD __host__ __device__
#else
#define BACKPLANE_CUDA_HD
#endif

namespace backplane::cuda::quant {

using u8 = unsigned char;

/// Whether t is a lattice i-quant (its values index a grid of core/detail/iq_grids.hpp).
constexpr bool lattice(elem_type t) noexcept {
    return t == elem_type::iq2_xxs || t == elem_type::iq2_xs || t == elem_type::iq2_s || t == elem_type::iq3_xxs ||
           t == elem_type::iq3_s || t == elem_type::iq1_s || t == elem_type::iq1_m;
}

/// Whether t is one of the types this header reads (the quantized types but q8_0, q4_0).
constexpr bool extended(elem_type t) noexcept {
    switch (t) {
    case elem_type::q4_1:
    case elem_type::q5_0:
    case elem_type::q5_1:
    case elem_type::iq4_nl:
    case elem_type::mxfp4:
    case elem_type::q2_K:
    case elem_type::q3_K:
    case elem_type::q4_K:
    case elem_type::q5_K:
    case elem_type::q6_K:
    case elem_type::q8_K:
    case elem_type::iq4_xs:
    case elem_type::tq1_0:
    case elem_type::tq2_0: return true;
    default: return lattice(t);
    }
}

/// The types here that are read but never written by quantize<T>: q8_K (the K-quants'
/// activation type), iq4_xs, tq1_0, tq2_0 and the lattice i-quants.
constexpr bool read_only(elem_type t) noexcept {
    return t == elem_type::q8_K || t == elem_type::iq4_xs || t == elem_type::tq1_0 || t == elem_type::tq2_0 ||
           lattice(t);
}

/// Values per block of a quantized type (core's block_size, as a switch device code can
/// call: core's traits table lives in host memory).
BACKPLANE_CUDA_HD constexpr int block_values(elem_type t) noexcept {
    switch (t) {
    case elem_type::q2_K:
    case elem_type::q3_K:
    case elem_type::q4_K:
    case elem_type::q5_K:
    case elem_type::q6_K:
    case elem_type::q8_K:
    case elem_type::iq4_xs:
    case elem_type::iq3_xxs:
    case elem_type::iq3_s:
    case elem_type::iq2_xxs:
    case elem_type::iq2_xs:
    case elem_type::iq2_s:
    case elem_type::iq1_s:
    case elem_type::iq1_m:
    case elem_type::tq1_0:
    case elem_type::tq2_0: return 256;
    default: return 32;
    }
}

/// Bytes per block of a quantized type (core's type_size).
BACKPLANE_CUDA_HD constexpr int block_bytes(elem_type t) noexcept {
    switch (t) {
    case elem_type::q8_0: return 34;
    case elem_type::q4_0: return 18;
    case elem_type::q4_1: return 20;
    case elem_type::q5_0: return 22;
    case elem_type::q5_1: return 24;
    case elem_type::iq4_nl: return 18;
    case elem_type::mxfp4: return 17;
    case elem_type::q2_K: return 84;
    case elem_type::q3_K: return 110;
    case elem_type::q4_K: return 144;
    case elem_type::q5_K: return 176;
    case elem_type::q6_K: return 210;
    case elem_type::q8_K: return 292;
    case elem_type::iq4_xs: return 136;
    case elem_type::iq3_xxs: return 98;
    case elem_type::iq3_s: return 110;
    case elem_type::iq2_xxs: return 66;
    case elem_type::iq2_xs: return 74;
    case elem_type::iq2_s: return 82;
    case elem_type::iq1_s: return 50;
    case elem_type::iq1_m: return 56;
    case elem_type::tq1_0: return 54;
    case elem_type::tq2_0: return 66;
    default: return 0;
    }
}

namespace detail {

// f32 arithmetic rounded after each operation, as core's expressions are evaluated.
BACKPLANE_CUDA_HD inline float mul(float a, float b) {
#if defined(__CUDA_ARCH__)
    return __fmul_rn(a, b);
#else
    return a * b;
#endif
}
BACKPLANE_CUDA_HD inline float add(float a, float b) {
#if defined(__CUDA_ARCH__)
    return __fadd_rn(a, b);
#else
    return a + b;
#endif
}
BACKPLANE_CUDA_HD inline float sub(float a, float b) {
#if defined(__CUDA_ARCH__)
    return __fsub_rn(a, b);
#else
    return a - b;
#endif
}

BACKPLANE_CUDA_HD inline float div(float a, float b) {
#if defined(__CUDA_ARCH__)
    return __fdiv_rn(a, b);
#else
    return a / b;
#endif
}

BACKPLANE_CUDA_HD inline float sqrt_rn(float a) {
#if defined(__CUDA_ARCH__)
    return __fsqrt_rn(a);
#else
    return std::sqrt(a);
#endif
}

BACKPLANE_CUDA_HD inline std::uint32_t to_bits(float f) {
#if defined(__CUDA_ARCH__)
    return __float_as_uint(f);
#else
    std::uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    return u;
#endif
}

BACKPLANE_CUDA_HD inline float from_bits(std::uint32_t u) {
#if defined(__CUDA_ARCH__)
    return __uint_as_float(u);
#else
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
#endif
}

BACKPLANE_CUDA_HD inline std::uint32_t u16_at(const u8* p) { return static_cast<std::uint32_t>(p[0]) | static_cast<std::uint32_t>(p[1]) << 8; }
BACKPLANE_CUDA_HD inline std::uint32_t u32_at(const u8* p) { return u16_at(p) | u16_at(p + 2) << 16; }

/// The f16 at p (little-endian, any alignment), widened exactly.
BACKPLANE_CUDA_HD inline float f16_at(const u8* p) {
    const auto h = static_cast<std::uint16_t>(u16_at(p));
#if defined(__CUDA_ARCH__)
    return __half2float(__ushort_as_half(h));
#else
    return f16_to_f32(f16_t{h});
#endif
}

/// x rounded to f16 by core's f32_to_f16 (to nearest even) and stored at p, little-endian.
/// The device runs core's integer rounding too: with __float2half_rn, the byte stores of
/// its 16-bit result wrote 0 as the low byte in the 32-value quantizers' kernels on sm_90
/// (nvcc 13.0), where the same function inlined into the K-quants' stored both bytes.
BACKPLANE_CUDA_HD inline void put_f16(u8* p, float x) {
    const std::uint16_t h = f32_to_f16(x).bits;
    p[0] = static_cast<u8>(h & 0xffu);
    p[1] = static_cast<u8>(h >> 8);
}

/// 16 signed bytes packed into two words, entry i in byte i % 8 of word i / 8.
constexpr std::uint64_t pack8(const std::int8_t* v) noexcept {
    std::uint64_t w = 0;
    for (int i = 0; i < 8; ++i) w |= static_cast<std::uint64_t>(static_cast<std::uint8_t>(v[i])) << (8 * i);
    return w;
}
inline constexpr std::uint64_t iq4nl_lo = pack8(iq4nl_values), iq4nl_hi = pack8(iq4nl_values + 8);
inline constexpr std::uint64_t mxfp4_lo = pack8(mxfp4_values), mxfp4_hi = pack8(mxfp4_values + 8);

BACKPLANE_CUDA_HD inline float table(std::uint64_t lo, std::uint64_t hi, int q) {
    const auto byte = static_cast<std::uint8_t>(((q < 8 ? lo : hi) >> (8 * (q & 7))) & 0xffu);
    return static_cast<float>(static_cast<std::int8_t>(byte));
}

/// Code j (0..31) of a 32-value block's nibbles qs: low nibble of byte j, high of j - 16.
BACKPLANE_CUDA_HD inline int nibble(const u8* qs, int j) { return j < 16 ? (qs[j] & 0x0f) : (qs[j - 16] >> 4); }

/// tq1_0's base-3 digit k (0 the most significant) of byte q, as core's detail::trit: the
/// byte times 3^k kept to 8 bits, times 3, over 256.
BACKPLANE_CUDA_HD inline int trit(int q, int k) {
    const int pow3 = k == 0 ? 1 : k == 1 ? 3 : k == 2 ? 9 : k == 3 ? 27 : 81;
    return (((q * pow3) & 255) * 3) >> 8;
}

#if defined(__CUDACC__)
// The lattice grids in device memory, made of core's lists (cached reads; the constant
// bank would serialize the threads of a warp that read different entries).
static __device__ const std::uint64_t dev_iq2xxs_grid[256] = {BACKPLANE_IQ2XXS_GRID};
static __device__ const std::uint64_t dev_iq2xs_grid[512] = {BACKPLANE_IQ2XS_GRID};
static __device__ const std::uint64_t dev_iq2s_grid[1024] = {BACKPLANE_IQ2S_GRID};
static __device__ const std::uint32_t dev_iq3xxs_grid[256] = {BACKPLANE_IQ3XXS_GRID};
static __device__ const std::uint32_t dev_iq3s_grid[512] = {BACKPLANE_IQ3S_GRID};
static __device__ const std::uint64_t dev_iq1s_grid[2048] = {BACKPLANE_IQ1S_GRID};
#endif

/// Entry i of the grid of lattice type T (an iq3 type's 32-bit entries widened).
template <elem_type T> BACKPLANE_CUDA_HD inline std::uint64_t grid(unsigned i) {
#if defined(__CUDA_ARCH__)
    if constexpr (T == elem_type::iq2_xxs) return dev_iq2xxs_grid[i];
    else if constexpr (T == elem_type::iq2_xs) return dev_iq2xs_grid[i];
    else if constexpr (T == elem_type::iq2_s) return dev_iq2s_grid[i];
    else if constexpr (T == elem_type::iq3_xxs) return dev_iq3xxs_grid[i];
    else if constexpr (T == elem_type::iq3_s) return dev_iq3s_grid[i];
    else return dev_iq1s_grid[i];
#else
    if constexpr (T == elem_type::iq2_xxs) return backplane::detail::iq2xxs_grid[i];
    else if constexpr (T == elem_type::iq2_xs) return backplane::detail::iq2xs_grid[i];
    else if constexpr (T == elem_type::iq2_s) return backplane::detail::iq2s_grid[i];
    else if constexpr (T == elem_type::iq3_xxs) return backplane::detail::iq3xxs_grid[i];
    else if constexpr (T == elem_type::iq3_s) return backplane::detail::iq3s_grid[i];
    else return backplane::detail::iq1s_grid[i];
#endif
}

/// Sign k of a 7-bit group standing for 8 signs of even parity (core's detail::even_signs).
BACKPLANE_CUDA_HD inline bool even_sign(std::uint32_t group, int k) {
    group &= 127u;
    if (k < 7) return (group >> k) & 1u;
#if defined(__CUDA_ARCH__)
    return __popc(group) & 1;
#else
    return std::popcount(group) & 1;
#endif
}

/// Byte k of a grid entry.
BACKPLANE_CUDA_HD inline int grid_byte(std::uint64_t entry, int k) { return static_cast<int>((entry >> (8 * k)) & 0xffu); }

/// Value j (0..255) of a block of lattice type T, as core's dequantize_row_<T>: the grid
/// byte times the group's scale, negated by its sign (iq2, iq3), or the scale times the
/// signed grid byte plus a shift of +-1/8 (iq1).
template <elem_type T> BACKPLANE_CUDA_HD inline float lattice_value(const u8* blk, int j) {
    const int ib = j / 32, l = (j / 8) % 4, k = j % 8;
    float scale = 0.0f;
    std::uint64_t entry = 0;
    bool negative = false;
    if constexpr (T == elem_type::iq2_xxs) { // d (idx[4] aux u32)[8]
        const std::uint32_t aux = u32_at(blk + 6 + 8 * ib);
        scale = mul(mul(f16_at(blk), add(0.5f, static_cast<float>(aux >> 28))), 0.25f);
        entry = grid<T>(blk[2 + 8 * ib + l]);
        negative = even_sign(aux >> (7 * l), k);
    } else if constexpr (T == elem_type::iq2_xs) { // d qs u16[32] scales[8]
        const std::uint32_t q = u16_at(blk + 2 + 2 * (4 * ib + l));
        const int sc = (blk[66 + ib] >> (4 * (l / 2))) & 15;
        scale = mul(mul(f16_at(blk), add(0.5f, static_cast<float>(sc))), 0.25f);
        entry = grid<T>(q & 511u);
        negative = even_sign(q >> 9, k);
    } else if constexpr (T == elem_type::iq2_s) { // d qs[32] signs[32] qh[8] scales[8]
        const int sc = (blk[74 + ib] >> (4 * (l / 2))) & 15;
        scale = mul(mul(f16_at(blk), add(0.5f, static_cast<float>(sc))), 0.25f);
        entry = grid<T>(blk[2 + 4 * ib + l] | ((static_cast<unsigned>(blk[66 + ib]) << (8 - 2 * l)) & 0x300u));
        negative = (blk[34 + 4 * ib + l] >> k) & 1;
    } else if constexpr (T == elem_type::iq3_xxs) { // d qs[64] aux u32[8]
        const std::uint32_t aux = u32_at(blk + 66 + 4 * ib);
        scale = mul(mul(f16_at(blk), add(0.5f, static_cast<float>(aux >> 28))), 0.5f);
        entry = grid<T>(blk[2 + 8 * ib + 2 * l + k / 4]) << (32 * (k / 4));
        negative = even_sign(aux >> (7 * l), k);
    } else if constexpr (T == elem_type::iq3_s) { // d qs[64] qh[8] signs[32] scales[4]
        const int s = (blk[106 + ib / 2] >> (4 * (ib % 2))) & 15;
        scale = mul(f16_at(blk), static_cast<float>(1 + 2 * s));
        const unsigned qh = blk[66 + ib];
        const unsigned index = k < 4 ? blk[2 + 8 * ib + 2 * l] | ((qh << (8 - 2 * l)) & 256u)
                                     : blk[3 + 8 * ib + 2 * l] | ((qh << (7 - 2 * l)) & 256u);
        entry = grid<T>(index) << (32 * (k / 4));
        negative = (blk[74 + 4 * ib + l] >> k) & 1;
    } else { // iq1_s: d qs[32] qh u16[8]; iq1_m: qs[32] qh[16] scales u16[4]
        float d;
        unsigned index, shift_negative, s;
        if constexpr (T == elem_type::iq1_s) {
            const unsigned qh = u16_at(blk + 34 + 2 * ib);
            d = f16_at(blk);
            s = (qh >> 12) & 7u;
            index = blk[2 + 4 * ib + l] | (((qh >> (3 * l)) & 7u) << 8);
            shift_negative = qh & 0x8000u;
        } else {
            const std::uint32_t sc0 = u16_at(blk + 48), sc1 = u16_at(blk + 50), sc2 = u16_at(blk + 52),
                                sc3 = u16_at(blk + 54);
            const auto dbits = static_cast<std::uint16_t>((sc0 >> 12) | ((sc1 >> 8) & 0x00f0u) |
                                                          ((sc2 >> 4) & 0x0f00u) | (sc3 & 0xf000u));
            const u8 dbytes[2] = {static_cast<u8>(dbits & 0xffu), static_cast<u8>(dbits >> 8)};
            d = f16_at(dbytes);
            const std::uint32_t sc = u16_at(blk + 48 + 2 * (ib / 2));
            s = (sc >> (6 * (ib % 2) + 3 * (l / 2))) & 7u;
            const unsigned h = blk[32 + 2 * ib + l / 2] >> (4 * (l % 2));
            index = blk[4 * ib + l] | ((h & 7u) << 8);
            shift_negative = h & 8u;
        }
        const float dl = mul(d, static_cast<float>(2 * s + 1));
        const float shift = shift_negative ? -iq1_delta : iq1_delta;
        const auto g = static_cast<std::int8_t>(grid_byte(grid<T>(index), k));
        return mul(dl, add(static_cast<float>(g), shift));
    }
    const float v = mul(scale, static_cast<float>(grid_byte(entry, k)));
    return negative ? -v : v;
}

/// e8m0_to_f32_half (core/quants.hpp): 2^(e - 128).
BACKPLANE_CUDA_HD inline float e8m0_half(std::uint32_t e) {
    return from_bits(e < 2 ? std::uint32_t{0x00200000u} << e : (e - 1) << 23);
}

/// q3_K's signed scale of sub-block sj (0..15) from its 12 packed bytes sc: low 4 bits
/// from byte sj % 8 (the high nibble from sj = 8 on), high 2 bits from byte 8 + sj % 4 at
/// bit 2 (sj / 4), minus 32.
BACKPLANE_CUDA_HD inline int q3_scale(const u8* sc, int sj) {
    const int lo = sj < 8 ? sc[sj] & 15 : sc[sj - 8] >> 4;
    return (lo | (((sc[8 + sj % 4] >> (2 * (sj / 4))) & 3) << 4)) - 32;
}

/// q4_K / q5_K's 6-bit scale and minimum of sub-block j (kquants' scale_min).
BACKPLANE_CUDA_HD inline void scale_min(int j, const u8* q, int& sc, int& m) {
    if (j < 4) {
        sc = q[j] & 63;
        m = q[j + 4] & 63;
    } else {
        sc = (q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4);
        m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

/// The 2-bit code of value e (q2_K, q3_K).
BACKPLANE_CUDA_HD inline int code_2bit(const u8* qs, int e) { return (qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3; }

BACKPLANE_CUDA_HD inline float abs_of(float x) { return from_bits(to_bits(x) & 0x7fffffffu); }

/// The first of n values of largest magnitude (0 when none is above 0), core's signed_max.
BACKPLANE_CUDA_HD inline float signed_max(const float* x, int n = 32) {
    float amax = 0.0f, vmax = 0.0f;
    for (int j = 0; j < n; ++j) {
        const float a = abs_of(x[j]);
        if (a > amax) {
            amax = a;
            vmax = x[j];
        }
    }
    return vmax;
}

/// Packs 32 codes of up to 5 bits: low nibbles into qs, fifth bits into qh (when given),
/// as core's pack_codes.
BACKPLANE_CUDA_HD inline void pack_codes(const int* q, u8* qs, u8* qh) {
    std::uint32_t high = 0;
    for (int j = 0; j < 16; ++j) {
        qs[j] = static_cast<u8>((q[j] & 0x0f) | ((q[j + 16] & 0x0f) << 4));
        high |= static_cast<std::uint32_t>((q[j] >> 4) & 1) << j;
        high |= static_cast<std::uint32_t>((q[j + 16] >> 4) & 1) << (j + 16);
    }
    if (qh != nullptr)
        for (int i = 0; i < 4; ++i) qh[i] = static_cast<u8>(high >> (8 * i));
}

/// The index of iq4_nl's table value nearest to x (a tie takes the upper), as core's
/// nearest_iq4nl.
BACKPLANE_CUDA_HD inline int nearest_iq4nl(float x) {
    if (x <= table(iq4nl_lo, iq4nl_hi, 0)) return 0;
    if (x >= table(iq4nl_lo, iq4nl_hi, 15)) return 15;
    int lo = 0, hi = 15;
    while (hi - lo > 1) {
        const int mid = (lo + hi) / 2;
        if (x < table(iq4nl_lo, iq4nl_hi, mid))
            hi = mid;
        else
            lo = mid;
    }
    return sub(x, table(iq4nl_lo, iq4nl_hi, hi - 1)) < sub(table(iq4nl_lo, iq4nl_hi, hi), x) ? hi - 1 : hi;
}

/// The index of mxfp4's table value that times d is nearest to x (a tie takes the lower),
/// as core's nearest_mxfp4.
BACKPLANE_CUDA_HD inline int nearest_mxfp4(float x, float d) {
    int best = 0;
    float best_err = abs_of(sub(mul(table(mxfp4_lo, mxfp4_hi, 0), d), x));
    for (int i = 1; i < 16; ++i) {
        const float err = abs_of(sub(mul(table(mxfp4_lo, mxfp4_hi, i), d), x));
        if (err < best_err) {
            best = i;
            best_err = err;
        }
    }
    return best;
}

/// floor(log2(a)) for a positive normal a as core's f32 log2 rounds it: the exponent k of
/// a, or k + 1 where log2(a) (just below k + 1) rounds up to k + 1. That happens when a's
/// significand is within j ulps of 2, j no more than ln 2 * 2^P, 2^P the spacing of the
/// floats just beyond k + 1 in units of 2^-23 (checked against glibc's log2f on every
/// significand near 2 of every exponent).
BACKPLANE_CUDA_HD inline int floor_log2(float a) {
    const std::uint32_t bits = to_bits(a);
    const int k = static_cast<int>((bits >> 23) & 0xffu) - 127;
    const std::uint32_t j = 0x800000u - (bits & 0x7fffffu);
    const int up = k + 1, mag = up < 0 ? -up : up;
    if (mag == 0) return k;
    int p = 0;
    while ((mag >> (p + 1)) != 0) ++p;
    if (up > 0 && (mag & (mag - 1)) == 0) --p;
    constexpr std::uint64_t limits = 0x58'2c'16'0b'05'02'01'00ull; // floor(ln 2 * 2^P), P = 0 .. 7
    return p >= 0 && j <= ((limits >> (8 * p)) & 0xffu) ? k + 1 : k;
}

/// mxfp4's shared exponent of 32 values as core's quantize_row_mxfp4 computes it:
/// floor(log2(max |x|)) - 2 + 127, clamped to [0, 255] (0 for a block of zeros or of
/// subnormals).
BACKPLANE_CUDA_HD inline std::uint32_t mxfp4_exponent(const float* x) {
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j)
        if (amax < abs_of(x[j])) amax = abs_of(x[j]);
    const std::uint32_t field = (to_bits(amax) >> 23) & 0xffu;
    if (field == 0u) return 0u;     // zero or subnormal: below 2^-125
    if (field == 0xffu) return 255u; // infinite
    const int e = floor_log2(amax) - 2 + 127;
    return static_cast<std::uint32_t>(e < 0 ? 0 : (e > 255 ? 255 : e));
}

// ---------------------------------------------------------------------------------------
// The K-quants' fits (core/kquants.hpp's kquant_detail), operation for operation.

/// x rounded to the nearest integer, ties to even, by core's float trick (|x| < 2^22).
BACKPLANE_CUDA_HD inline int nearest_int(float x) {
    return static_cast<int>(to_bits(add(x, 12582912.0f)) & 0x007fffffu) - 0x00400000;
}

BACKPLANE_CUDA_HD inline int clamp_int(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }

/// The error a fit weighs: absolute (q2_K) or squared.
BACKPLANE_CUDA_HD inline float fit_error(float diff, bool absolute) { return absolute ? abs_of(diff) : mul(diff, diff); }

/// core's fit_scale_min (make_qkx2_quants): codes 0..nmax of n values (n <= 32) with a
/// scale (returned) and a minimum (`neg_min` = -minimum).
BACKPLANE_CUDA_HD inline float fit_scale_min(int n, int nmax, const float* x, const float* w, u8* L, float& neg_min,
                                             float rmin, float rdelta, int nstep, bool absolute) {
    float min = x[0], max = x[0], sum_w = w[0], sum_x = mul(sum_w, x[0]);
    for (int i = 1; i < n; ++i) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        sum_w = add(sum_w, w[i]);
        sum_x = add(sum_x, mul(w[i], x[i]));
    }
    if (min > 0) min = 0;
    if (max == min) {
        for (int i = 0; i < n; ++i) L[i] = 0;
        neg_min = -min;
        return 0.0f;
    }
    float iscale = div(static_cast<float>(nmax), sub(max, min));
    float scale = div(1.0f, iscale);
    float best_error = 0;
    for (int i = 0; i < n; ++i) {
        L[i] = static_cast<u8>(clamp_int(nearest_int(mul(iscale, sub(x[i], min))), 0, nmax));
        best_error = add(best_error, mul(w[i], fit_error(sub(add(mul(scale, L[i]), min), x[i]), absolute)));
    }
    u8 aux[32];
    for (int is = 0; is <= nstep; ++is) {
        iscale = div(add(add(rmin, mul(rdelta, static_cast<float>(is))), static_cast<float>(nmax)), sub(max, min));
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; ++i) {
            const int l = clamp_int(nearest_int(mul(iscale, sub(x[i], min))), 0, nmax);
            aux[i] = static_cast<u8>(l);
            const float fl = static_cast<float>(l);
            sum_l = add(sum_l, mul(w[i], fl));
            sum_l2 = add(sum_l2, mul(mul(w[i], fl), fl));
            sum_xl = add(sum_xl, mul(mul(w[i], fl), x[i]));
        }
        const float D = sub(mul(sum_w, sum_l2), mul(sum_l, sum_l));
        if (D > 0) {
            float this_scale = div(sub(mul(sum_w, sum_xl), mul(sum_x, sum_l)), D);
            float this_min = div(sub(mul(sum_l2, sum_x), mul(sum_l, sum_xl)), D);
            if (this_min > 0) {
                this_min = 0;
                this_scale = div(sum_xl, sum_l2);
            }
            float cur_error = 0;
            for (int i = 0; i < n; ++i)
                cur_error = add(cur_error, mul(w[i], fit_error(sub(add(mul(this_scale, aux[i]), this_min), x[i]), absolute)));
            if (cur_error < best_error) {
                for (int i = 0; i < n; ++i) L[i] = aux[i];
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    neg_min = -min;
    return scale;
}

/// core's centred_fit: codes around 0 in [-nmax, nmax - 1], weights x^2.
struct centred_fit {
    int nmax;
    float max = 0, sumlx = 0, suml2 = 0;

    BACKPLANE_CUDA_HD int code(float iscale, float x) const { return clamp_int(nearest_int(mul(iscale, x)), -nmax, nmax - 1); }

    /// The first fit, codes l (not offset) in L; false, with L zeros, when every |x| is
    /// below 1e-15.
    BACKPLANE_CUDA_HD bool first(int n, const float* x, int* L) {
        max = signed_max(x, n);
        if (abs_of(max) < 1e-15f) {
            for (int i = 0; i < n; ++i) L[i] = 0;
            return false;
        }
        const float iscale = div(-static_cast<float>(nmax), max);
        for (int i = 0; i < n; ++i) {
            const int l = code(iscale, x[i]);
            L[i] = l;
            const float w = mul(x[i], x[i]), fl = static_cast<float>(l);
            sumlx = add(sumlx, mul(mul(w, x[i]), fl));
            suml2 = add(suml2, mul(mul(w, fl), fl));
        }
        return true;
    }
};

/// core's fit_scale (make_qx_quants, weights x^2): codes L = l + nmax, the scale refit
/// over 18 trial scales.
BACKPLANE_CUDA_HD inline float fit_scale(int n, int nmax, const float* x, int* L) {
    centred_fit f{nmax};
    if (!f.first(n, x, L)) return 0.0f;
    for (int i = 0; i < n; ++i) L[i] += nmax;
    float scale = f.suml2 != 0.0f ? div(f.sumlx, f.suml2) : 0.0f;
    float best = mul(scale, f.sumlx);
    for (int is = -9; is <= 9; ++is) {
        if (is == 0) continue;
        const float iscale = div(-add(static_cast<float>(nmax), mul(0.1f, static_cast<float>(is))), f.max);
        float sumlx = 0, suml2 = 0;
        for (int i = 0; i < n; ++i) {
            const float fl = static_cast<float>(f.code(iscale, x[i]));
            const float w = mul(x[i], x[i]);
            sumlx = add(sumlx, mul(mul(w, x[i]), fl));
            suml2 = add(suml2, mul(mul(w, fl), fl));
        }
        if (suml2 > 0 && mul(sumlx, sumlx) > mul(best, suml2)) {
            for (int i = 0; i < n; ++i) L[i] = nmax + f.code(iscale, x[i]);
            scale = div(sumlx, suml2);
            best = mul(scale, sumlx);
        }
    }
    return scale;
}

/// core's fit_scale_refined (make_q3_quants with its refinement): codes l + nmax.
BACKPLANE_CUDA_HD inline float fit_scale_refined(int n, int nmax, const float* x, int* L) {
    centred_fit f{nmax};
    if (!f.first(n, x, L)) return 0.0f;
    float sumlx = f.sumlx, suml2 = f.suml2;
    for (int pass = 0; pass < 5; ++pass) {
        int changed = 0;
        for (int i = 0; i < n; ++i) {
            const float w = mul(x[i], x[i]), li = static_cast<float>(L[i]);
            float slx = sub(sumlx, mul(mul(w, x[i]), li));
            if (!(slx > 0)) continue;
            float sl2 = sub(suml2, mul(mul(w, li), li));
            const int l = clamp_int(nearest_int(div(mul(x[i], sl2), slx)), -nmax, nmax - 1);
            if (l == L[i]) continue;
            const float fl = static_cast<float>(l);
            slx = add(slx, mul(mul(w, x[i]), fl));
            sl2 = add(sl2, mul(mul(w, fl), fl));
            if (sl2 > 0 && mul(mul(slx, slx), suml2) > mul(mul(sumlx, sumlx), sl2)) {
                L[i] = l;
                sumlx = slx;
                suml2 = sl2;
                ++changed;
            }
        }
        if (changed == 0) break;
    }
    for (int i = 0; i < n; ++i) L[i] += nmax;
    return suml2 > 0.0f ? div(sumlx, suml2) : 0.0f;
}

/// Packs 256 2-bit codes (q2_K, q3_K): byte 32 h + l holds values 128 h + l + 32 s at
/// bits 2 s.
BACKPLANE_CUDA_HD inline void pack_2bit(const u8* L, u8* qs) {
    for (int h = 0; h < 2; ++h)
        for (int l = 0; l < 32; ++l) {
            const u8* q = L + 128 * h + l;
            qs[32 * h + l] = static_cast<u8>(q[0] | (q[32] << 2) | (q[64] << 4) | (q[96] << 6));
        }
}

/// q4_K and q5_K (core's quantize_scales_mins): each sub-block of 32 fitted, scales and
/// minimums quantized to 6 bits and packed into the 12 bytes at `scales`, d and dmin at
/// dd, then every code again from the stored scales, left in L.
BACKPLANE_CUDA_HD inline void quantize_scales_mins(const float* x, int nmax, float rmin, int nstep, u8* dd, u8* scales,
                                                   u8* L) {
    float sc[8], mn[8], w[32];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; ++j) {
        const float* xb = x + 32 * j;
        float sum_x2 = 0;
        for (int l = 0; l < 32; ++l) sum_x2 = add(sum_x2, mul(xb[l], xb[l]));
        const float av_x = sqrt_rn(div(sum_x2, 32.0f));
        for (int l = 0; l < 32; ++l) w[l] = add(av_x, abs_of(xb[l]));
        sc[j] = fit_scale_min(32, nmax, xb, w, L + 32 * j, mn[j], rmin, 0.1f, nstep, false);
        if (sc[j] > max_scale) max_scale = sc[j];
        if (mn[j] > max_min) max_min = mn[j];
    }
    const float inv_scale = max_scale > 0 ? div(63.0f, max_scale) : 0.0f;
    const float inv_min = max_min > 0 ? div(63.0f, max_min) : 0.0f;
    for (int j = 0; j < 12; ++j) scales[j] = 0;
    for (int j = 0; j < 8; ++j) {
        const int ls = clamp_int(nearest_int(mul(inv_scale, sc[j])) & 0xff, 0, 63);
        const int lm = clamp_int(nearest_int(mul(inv_min, mn[j])) & 0xff, 0, 63);
        if (j < 4) {
            scales[j] = static_cast<u8>(scales[j] | ls);
            scales[j + 4] = static_cast<u8>(scales[j + 4] | lm);
        } else {
            scales[j + 4] = static_cast<u8>((ls & 0x0f) | ((lm & 0x0f) << 4));
            scales[j - 4] = static_cast<u8>(scales[j - 4] | ((ls >> 4) << 6));
            scales[j] = static_cast<u8>(scales[j] | ((lm >> 4) << 6));
        }
    }
    put_f16(dd, div(max_scale, 63.0f));
    put_f16(dd + 2, div(max_min, 63.0f));
    for (int j = 0; j < 8; ++j) {
        int s, m;
        scale_min(j, scales, s, m);
        const float dl = mul(f16_at(dd), static_cast<float>(s));
        if (dl == 0.0f) continue;
        const float dm = mul(f16_at(dd + 2), static_cast<float>(m));
        for (int i = 0; i < 32; ++i)
            L[32 * j + i] = static_cast<u8>(clamp_int(nearest_int(div(add(x[32 * j + i], dm), dl)), 0, nmax));
    }
}

/// mxfp4 (core's quantize_row_mxfp4): e 0, qs 1.
BACKPLANE_CUDA_HD inline void quantize_mxfp4(const float* x, u8* blk) {
    const std::uint32_t e = mxfp4_exponent(x);
    blk[0] = static_cast<u8>(e);
    const float d = e8m0_half(e);
    int q[32];
    for (int j = 0; j < 32; ++j) q[j] = nearest_mxfp4(x[j], d);
    pack_codes(q, blk + 1, nullptr);
}

/// q2_K (core's quantize_row_q2_K): scales 0, qs 16, d 80, dmin 82.
BACKPLANE_CUDA_HD inline void quantize_q2_K(const float* x, u8* blk) {
    u8 L[256];
    float sc[16], mn[16], w[16];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < 16; ++j) {
        for (int l = 0; l < 16; ++l) w[l] = abs_of(x[16 * j + l]);
        sc[j] = fit_scale_min(16, 3, x + 16 * j, w, L + 16 * j, mn[j], -0.5f, 0.1f, 15, true);
        if (sc[j] > max_scale) max_scale = sc[j];
        if (mn[j] > max_min) max_min = mn[j];
    }
    u8* scales = blk;
    put_f16(blk + 80, 0.0f);
    put_f16(blk + 82, 0.0f);
    for (int j = 0; j < 16; ++j) scales[j] = 0;
    if (max_scale > 0) {
        const float iscale = div(15.0f, max_scale);
        for (int j = 0; j < 16; ++j) scales[j] = static_cast<u8>(nearest_int(mul(iscale, sc[j])));
        put_f16(blk + 80, div(max_scale, 15.0f));
    }
    if (max_min > 0) {
        const float iscale = div(15.0f, max_min);
        for (int j = 0; j < 16; ++j) scales[j] = static_cast<u8>(scales[j] | (nearest_int(mul(iscale, mn[j])) << 4));
        put_f16(blk + 82, div(max_min, 15.0f));
    }
    for (int j = 0; j < 16; ++j) {
        const float d = mul(f16_at(blk + 80), static_cast<float>(scales[j] & 15));
        if (d == 0.0f) continue;
        const float dm = mul(f16_at(blk + 82), static_cast<float>(scales[j] >> 4));
        for (int i = 0; i < 16; ++i) L[16 * j + i] = static_cast<u8>(clamp_int(nearest_int(div(add(x[16 * j + i], dm), d)), 0, 3));
    }
    pack_2bit(L, blk + 16);
}

/// q3_K (core's quantize_row_q3_K): hmask 0, qs 32, scales 96, d 108.
BACKPLANE_CUDA_HD inline void quantize_q3_K(const float* x, u8* blk) {
    int L[256];
    float sc[16];
    for (int j = 0; j < 16; ++j) sc[j] = fit_scale_refined(16, 4, x + 16 * j, L + 16 * j);
    const float max_scale = signed_max(sc, 16);
    u8* scales = blk + 96;
    for (int j = 0; j < 12; ++j) scales[j] = 0;
    put_f16(blk + 108, 0.0f);
    if (max_scale != 0.0f) {
        const float iscale = div(-32.0f, max_scale);
        for (int j = 0; j < 16; ++j) {
            const int l8 = static_cast<std::int8_t>(nearest_int(mul(iscale, sc[j])) & 0xff);
            const int l = clamp_int(l8, -32, 31) + 32;
            if (j < 8)
                scales[j] = static_cast<u8>(l & 15);
            else
                scales[j - 8] = static_cast<u8>(scales[j - 8] | ((l & 15) << 4));
            scales[j % 4 + 8] = static_cast<u8>(scales[j % 4 + 8] | ((l >> 4) << (2 * (j / 4))));
        }
        put_f16(blk + 108, div(1.0f, iscale));
    }
    for (int j = 0; j < 16; ++j) {
        const int lo = j < 8 ? scales[j] & 15 : scales[j - 8] >> 4;
        const int s = (lo | (((scales[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32;
        const float d = mul(f16_at(blk + 108), static_cast<float>(s));
        if (d == 0.0f) continue;
        for (int i = 0; i < 16; ++i) L[16 * j + i] = clamp_int(nearest_int(div(x[16 * j + i], d)), -4, 3) + 4;
    }
    u8 low[256];
    for (int e = 0; e < 32; ++e) blk[e] = 0;
    for (int e = 0; e < 256; ++e) {
        if (L[e] > 3) blk[e % 32] = static_cast<u8>(blk[e % 32] | (1 << (e / 32)));
        low[e] = static_cast<u8>(L[e] > 3 ? L[e] - 4 : L[e]);
    }
    pack_2bit(low, blk + 32);
}

/// q4_K (core's quantize_row_q4_K): d 0, dmin 2, scales 4, qs 16 (64 values per 32 bytes,
/// low nibbles the first 32).
BACKPLANE_CUDA_HD inline void quantize_q4_K(const float* x, u8* blk) {
    u8 L[256];
    quantize_scales_mins(x, 15, -1.0f, 20, blk, blk + 4, L);
    for (int c = 0; c < 4; ++c)
        for (int l = 0; l < 32; ++l) blk[16 + 32 * c + l] = static_cast<u8>(L[64 * c + l] | (L[64 * c + 32 + l] << 4));
}

/// q5_K (core's quantize_row_q5_K): d 0, dmin 2, scales 4, qh 16, qs 48.
BACKPLANE_CUDA_HD inline void quantize_q5_K(const float* x, u8* blk) {
    u8 L[256];
    quantize_scales_mins(x, 31, -0.5f, 15, blk, blk + 4, L);
    u8* qh = blk + 16;
    for (int l = 0; l < 32; ++l) qh[l] = 0;
    for (int c = 0; c < 4; ++c)
        for (int l = 0; l < 32; ++l) {
            const int lo = L[64 * c + l], hi = L[64 * c + 32 + l];
            blk[48 + 32 * c + l] = static_cast<u8>((lo & 15) | ((hi & 15) << 4));
            qh[l] = static_cast<u8>(qh[l] | ((lo >> 4) << (2 * c)) | ((hi >> 4) << (2 * c + 1)));
        }
}

/// q6_K (core's quantize_row_q6_K): ql 0, qh 128, scales 192 (i8), d 208; a block whose
/// sub-block scales are all below 1e-15 is zeros.
BACKPLANE_CUDA_HD inline void quantize_q6_K(const float* x, u8* blk) {
    int L[256];
    float scales[16];
    for (int ib = 0; ib < 16; ++ib) scales[ib] = fit_scale(16, 32, x + 16 * ib, L + 16 * ib);
    const float max_scale = signed_max(scales, 16);
    if (abs_of(max_scale) < 1e-15f) {
        for (int i = 0; i < 210; ++i) blk[i] = 0;
        return;
    }
    const float iscale = div(-128.0f, max_scale);
    put_f16(blk + 208, div(1.0f, iscale));
    for (int ib = 0; ib < 16; ++ib) {
        const int s = nearest_int(mul(iscale, scales[ib]));
        blk[192 + ib] = static_cast<u8>(s < 127 ? s : 127);
    }
    for (int j = 0; j < 16; ++j) {
        const float d = mul(f16_at(blk + 208), static_cast<float>(static_cast<std::int8_t>(blk[192 + j])));
        if (d == 0.0f) continue;
        for (int i = 0; i < 16; ++i) L[16 * j + i] = clamp_int(nearest_int(div(x[16 * j + i], d)), -32, 31) + 32;
    }
    for (int h = 0; h < 2; ++h)
        for (int l = 0; l < 32; ++l) {
            const int* q = L + 128 * h + l;
            blk[64 * h + l] = static_cast<u8>((q[0] & 15) | ((q[64] & 15) << 4));
            blk[64 * h + 32 + l] = static_cast<u8>((q[32] & 15) | ((q[96] & 15) << 4));
            blk[128 + 32 * h + l] = static_cast<u8>((q[0] >> 4) | ((q[32] >> 4) << 2) | ((q[64] >> 4) << 4) | ((q[96] >> 4) << 6));
        }
}

} // namespace detail

/// Whether quantize<T> exists for t: every type here but the read-only ones.
constexpr bool quantizable(elem_type t) noexcept { return extended(t) && !read_only(t); }

/// Quantizes block_values(T) values x (32, or 256 for the K-quants) into the block of
/// type T (quantizable) at blk, byte for byte as core's quantize_row_* (finite x).
template <elem_type T> BACKPLANE_CUDA_HD inline void quantize(const float* x, u8* blk) {
    using namespace detail;
    int q[32];
    if constexpr (T == elem_type::q4_1 || T == elem_type::q5_1) { // d = (max - min) / levels, m = min
        constexpr int levels = T == elem_type::q4_1 ? 15 : 31;
        float lo = 3.40282347e+38f, hi = -3.40282347e+38f;
        for (int j = 0; j < 32; ++j) {
            if (x[j] < lo) lo = x[j];
            if (x[j] > hi) hi = x[j];
        }
        const float d = div(sub(hi, lo), static_cast<float>(levels));
        const float id = d != 0.0f ? div(1.0f, d) : 0.0f;
        put_f16(blk, d);
        put_f16(blk + 2, lo);
        for (int j = 0; j < 32; ++j) {
            const int v = static_cast<int>(add(mul(sub(x[j], lo), id), 0.5f));
            q[j] = v < levels ? v : levels;
        }
        if constexpr (T == elem_type::q4_1)
            pack_codes(q, blk + 4, nullptr);
        else
            pack_codes(q, blk + 8, blk + 4);
    } else if constexpr (T == elem_type::q5_0) { // d = signed max / -16
        const float d = div(signed_max(x), -16.0f);
        const float id = d != 0.0f ? div(1.0f, d) : 0.0f;
        put_f16(blk, d);
        for (int j = 0; j < 32; ++j) {
            const int v = static_cast<int>(add(mul(x[j], id), 16.5f));
            q[j] = v < 31 ? v : 31;
        }
        pack_codes(q, blk + 6, blk + 2);
    } else if constexpr (T == elem_type::iq4_nl) { // the refit d = sum(w q x) / sum(w q^2), w = x^2
        const float vmax = signed_max(x);
        float d = 0.0f;
        for (int j = 0; j < 32; ++j) q[j] = 0;
        if (abs_of(vmax) >= 1e-15f) {
            const float id = div(1.0f, div(vmax, -127.0f));
            float sumqx = 0.0f, sumq2 = 0.0f;
            for (int j = 0; j < 32; ++j) {
                const int l = nearest_iq4nl(mul(id, x[j]));
                q[j] = l;
                const float v = table(iq4nl_lo, iq4nl_hi, l);
                const float w = mul(x[j], x[j]);
                sumqx = add(sumqx, mul(mul(w, v), x[j]));
                sumq2 = add(sumq2, mul(mul(w, v), v));
            }
            d = sumq2 > 0.0f ? div(sumqx, sumq2) : 0.0f;
        }
        put_f16(blk, d);
        pack_codes(q, blk + 2, nullptr);
    } else if constexpr (T == elem_type::mxfp4) {
        quantize_mxfp4(x, blk);
    } else if constexpr (T == elem_type::q2_K) {
        quantize_q2_K(x, blk);
    } else if constexpr (T == elem_type::q3_K) {
        quantize_q3_K(x, blk);
    } else if constexpr (T == elem_type::q4_K) {
        quantize_q4_K(x, blk);
    } else if constexpr (T == elem_type::q5_K) {
        quantize_q5_K(x, blk);
    } else if constexpr (T == elem_type::q6_K) {
        quantize_q6_K(x, blk);
    } else {
        static_assert(T == elem_type::q4_1, "quant::quantize writes the quantizable types");
    }
}

/// Value j (0 .. block_values(T) - 1) of the block of type T at blk, exactly as core's
/// dequantize_row_* computes it.
template <elem_type T> BACKPLANE_CUDA_HD inline float value(const u8* blk, int j) {
    using namespace detail;
    if constexpr (T == elem_type::q4_1) { // d m qs[16]
        return add(mul(static_cast<float>(nibble(blk + 4, j)), f16_at(blk)), f16_at(blk + 2));
    } else if constexpr (T == elem_type::q5_0) { // d qh[4] qs[16]
        const int q = nibble(blk + 6, j) | static_cast<int>((u32_at(blk + 2) >> j) & 1u) << 4;
        return mul(static_cast<float>(q - 16), f16_at(blk));
    } else if constexpr (T == elem_type::q5_1) { // d m qh[4] qs[16]
        const int q = nibble(blk + 8, j) | static_cast<int>((u32_at(blk + 4) >> j) & 1u) << 4;
        return add(mul(static_cast<float>(q), f16_at(blk)), f16_at(blk + 2));
    } else if constexpr (T == elem_type::iq4_nl) { // d qs[16]
        return mul(f16_at(blk), table(iq4nl_lo, iq4nl_hi, nibble(blk + 2, j)));
    } else if constexpr (T == elem_type::mxfp4) { // e qs[16]
        return mul(table(mxfp4_lo, mxfp4_hi, nibble(blk + 1, j)), e8m0_half(blk[0]));
    } else if constexpr (T == elem_type::q2_K) { // scales[16] qs[64] d dmin
        const int s = blk[j / 16];
        const float dl = mul(f16_at(blk + 80), static_cast<float>(s & 15));
        const float ml = mul(f16_at(blk + 82), static_cast<float>(s >> 4));
        return sub(mul(dl, static_cast<float>(code_2bit(blk + 16, j))), ml);
    } else if constexpr (T == elem_type::q3_K) { // hmask[32] qs[64] scales[12] d
        const float dl = mul(f16_at(blk + 108), static_cast<float>(q3_scale(blk + 96, j / 16)));
        const int high = (blk[j % 32] >> (j / 32)) & 1;
        return mul(dl, static_cast<float>(code_2bit(blk + 32, j) - (high ? 0 : 4)));
    } else if constexpr (T == elem_type::q4_K || T == elem_type::q5_K) { // d dmin scales[12] (qh[32]) qs[128]
        const int sj = j / 32, l = j % 32;
        int s, m;
        scale_min(sj, blk + 4, s, m);
        const float dl = mul(f16_at(blk), static_cast<float>(s));
        const float ml = mul(f16_at(blk + 2), static_cast<float>(m));
        constexpr int qs_at = T == elem_type::q4_K ? 16 : 48;
        const int byte = blk[qs_at + 32 * (sj / 2) + l];
        int v = sj % 2 ? byte >> 4 : byte & 15;
        if constexpr (T == elem_type::q5_K) v += 16 * ((blk[16 + l] >> sj) & 1);
        return sub(mul(dl, static_cast<float>(v)), ml);
    } else if constexpr (T == elem_type::q6_K) { // ql[128] qh[64] scales[16] d
        const int h = j / 128, r = j % 128, l = r % 32, part = r / 32;
        const int lo = blk[64 * h + 32 * (part % 2) + l];
        const int q = ((part < 2 ? lo & 15 : lo >> 4) | (((blk[128 + 32 * h + l] >> (2 * part)) & 3) << 4)) - 32;
        const auto sc = static_cast<std::int8_t>(blk[192 + j / 16]);
        return mul(mul(f16_at(blk + 208), static_cast<float>(sc)), static_cast<float>(q));
    } else if constexpr (T == elem_type::q8_K) { // d (f32) qs[256] bsums[16]
        return mul(from_bits(u32_at(blk)), static_cast<float>(static_cast<std::int8_t>(blk[4 + j])));
    } else if constexpr (T == elem_type::iq4_xs) { // d scales_h scales_l[4] qs[128]
        const int ib = j / 32, l = j % 32;
        const int sc = ((blk[4 + ib / 2] >> (4 * (ib % 2))) & 15) | (((u16_at(blk + 2) >> (2 * ib)) & 3) << 4);
        const float dl = mul(f16_at(blk), static_cast<float>(sc - 32));
        return mul(dl, table(iq4nl_lo, iq4nl_hi, nibble(blk + 8 + 16 * ib, l)));
    } else if constexpr (T == elem_type::tq1_0) { // qs[48] qh[4] d
        // value 32 k + m (< 160): trit k of byte m; 160 + 16 k + m (< 240): of byte
        // 32 + m; 240 + 4 k + m: of byte 48 + m
        const int at = j < 160 ? j % 32 : j < 240 ? 32 + (j - 160) % 16 : 48 + (j - 240) % 4;
        const int k = j < 160 ? j / 32 : j < 240 ? (j - 160) / 16 : (j - 240) / 4;
        return mul(static_cast<float>(trit(blk[at], k) - 1), f16_at(blk + 52));
    } else if constexpr (T == elem_type::tq2_0) { // qs[64] d
        const int q = (blk[32 * (j / 128) + j % 32] >> (2 * ((j / 32) % 4))) & 3;
        return mul(static_cast<float>(q - 1), f16_at(blk + 64));
    } else if constexpr (lattice(T)) {
        return lattice_value<T>(blk, j);
    } else {
        static_assert(T == elem_type::q4_1, "quant::value reads the quantized types but q8_0 and q4_0");
        return 0.0f;
    }
}

/// Values j0 .. j0 + 31 of the block of type T at blk (j0 a multiple of 32: 0 for the
/// 32-value types), each exactly value<T>(blk, j0 + jj); the scales of the slice and the
/// bytes of its codes are read once, not once per value.
template <elem_type T> BACKPLANE_CUDA_HD inline void values32(const u8* blk, int j0, float (&x)[32]) {
    using namespace detail;
    if constexpr (T == elem_type::q4_1 || T == elem_type::q5_0 || T == elem_type::q5_1) {
        constexpr bool has_min = T != elem_type::q5_0, has_high = T != elem_type::q4_1;
        constexpr int qs_at = T == elem_type::q4_1 ? 4 : T == elem_type::q5_0 ? 6 : 8;
        const float d = f16_at(blk);
        const float m = has_min ? f16_at(blk + 2) : 0.0f;
        const std::uint32_t qh = has_high ? u32_at(blk + qs_at - 4) : 0u;
        for (int jj = 0; jj < 16; ++jj) {
            const int b = blk[qs_at + jj];
            const int q0 = (b & 15) | static_cast<int>((qh >> jj) & 1u) << 4;
            const int q1 = (b >> 4) | static_cast<int>((qh >> (jj + 16)) & 1u) << 4;
            if constexpr (has_min) {
                x[jj] = add(mul(static_cast<float>(q0), d), m);
                x[jj + 16] = add(mul(static_cast<float>(q1), d), m);
            } else {
                x[jj] = mul(static_cast<float>(q0 - 16), d);
                x[jj + 16] = mul(static_cast<float>(q1 - 16), d);
            }
        }
    } else if constexpr (T == elem_type::iq4_nl || T == elem_type::mxfp4) {
        constexpr bool nl = T == elem_type::iq4_nl;
        const float s = nl ? f16_at(blk) : e8m0_half(blk[0]);
        const std::uint64_t lo = nl ? iq4nl_lo : mxfp4_lo, hi = nl ? iq4nl_hi : mxfp4_hi;
        for (int jj = 0; jj < 16; ++jj) {
            const int b = blk[(nl ? 2 : 1) + jj];
            x[jj] = nl ? mul(s, table(lo, hi, b & 15)) : mul(table(lo, hi, b & 15), s);
            x[jj + 16] = nl ? mul(s, table(lo, hi, b >> 4)) : mul(table(lo, hi, b >> 4), s);
        }
    } else if constexpr (T == elem_type::q2_K) {
        const int shift = 2 * ((j0 % 128) / 32);
        const u8* qs = blk + 16 + 32 * (j0 / 128);
        for (int half = 0; half < 2; ++half) {
            const int s = blk[j0 / 16 + half];
            const float dl = mul(f16_at(blk + 80), static_cast<float>(s & 15));
            const float ml = mul(f16_at(blk + 82), static_cast<float>(s >> 4));
            for (int jj = 16 * half; jj < 16 * half + 16; ++jj)
                x[jj] = sub(mul(dl, static_cast<float>((qs[jj] >> shift) & 3)), ml);
        }
    } else if constexpr (T == elem_type::q3_K) {
        const int shift = 2 * ((j0 % 128) / 32), hbit = j0 / 32;
        const u8* qs = blk + 32 + 32 * (j0 / 128);
        for (int half = 0; half < 2; ++half) {
            const float dl = mul(f16_at(blk + 108), static_cast<float>(q3_scale(blk + 96, j0 / 16 + half)));
            for (int jj = 16 * half; jj < 16 * half + 16; ++jj) {
                const int high = (blk[jj] >> hbit) & 1;
                x[jj] = mul(dl, static_cast<float>(((qs[jj] >> shift) & 3) - (high ? 0 : 4)));
            }
        }
    } else if constexpr (T == elem_type::q4_K || T == elem_type::q5_K) {
        const int sj = j0 / 32;
        int s, m;
        scale_min(sj, blk + 4, s, m);
        const float dl = mul(f16_at(blk), static_cast<float>(s));
        const float ml = mul(f16_at(blk + 2), static_cast<float>(m));
        constexpr int qs_at = T == elem_type::q4_K ? 16 : 48;
        const u8* qs = blk + qs_at + 32 * (sj / 2);
        const int shift = sj % 2 ? 4 : 0;
        for (int jj = 0; jj < 32; ++jj) {
            int v = (qs[jj] >> shift) & 15;
            if constexpr (T == elem_type::q5_K) v += 16 * ((blk[16 + jj] >> sj) & 1);
            x[jj] = sub(mul(dl, static_cast<float>(v)), ml);
        }
    } else if constexpr (T == elem_type::q6_K) {
        const int h = j0 / 128, part = (j0 % 128) / 32;
        const u8* ql = blk + 64 * h + 32 * (part % 2);
        const u8* qh = blk + 128 + 32 * h;
        const float d = f16_at(blk + 208);
        for (int half = 0; half < 2; ++half) {
            const float dl = mul(d, static_cast<float>(static_cast<std::int8_t>(blk[192 + j0 / 16 + half])));
            for (int jj = 16 * half; jj < 16 * half + 16; ++jj) {
                const int lo = part < 2 ? ql[jj] & 15 : ql[jj] >> 4;
                const int q = (lo | (((qh[jj] >> (2 * part)) & 3) << 4)) - 32;
                x[jj] = mul(dl, static_cast<float>(q));
            }
        }
    } else if constexpr (T == elem_type::q8_K) {
        const float d = from_bits(u32_at(blk));
        for (int jj = 0; jj < 32; ++jj) x[jj] = mul(d, static_cast<float>(static_cast<std::int8_t>(blk[4 + j0 + jj])));
    } else if constexpr (T == elem_type::iq4_xs || T == elem_type::tq1_0 || T == elem_type::tq2_0 || lattice(T)) {
        for (int jj = 0; jj < 32; ++jj) x[jj] = value<T>(blk, j0 + jj);
    } else {
        static_assert(T == elem_type::q4_1, "quant::values32 reads the quantized types but q8_0 and q4_0");
    }
}

/// value<T> chosen at run time (extended(t)); 0 for any other type.
BACKPLANE_CUDA_HD inline float value(elem_type t, const u8* blk, int j) {
    switch (t) {
    case elem_type::q4_1: return value<elem_type::q4_1>(blk, j);
    case elem_type::q5_0: return value<elem_type::q5_0>(blk, j);
    case elem_type::q5_1: return value<elem_type::q5_1>(blk, j);
    case elem_type::iq4_nl: return value<elem_type::iq4_nl>(blk, j);
    case elem_type::mxfp4: return value<elem_type::mxfp4>(blk, j);
    case elem_type::q2_K: return value<elem_type::q2_K>(blk, j);
    case elem_type::q3_K: return value<elem_type::q3_K>(blk, j);
    case elem_type::q4_K: return value<elem_type::q4_K>(blk, j);
    case elem_type::q5_K: return value<elem_type::q5_K>(blk, j);
    case elem_type::q6_K: return value<elem_type::q6_K>(blk, j);
    case elem_type::q8_K: return value<elem_type::q8_K>(blk, j);
    case elem_type::iq4_xs: return value<elem_type::iq4_xs>(blk, j);
    case elem_type::tq1_0: return value<elem_type::tq1_0>(blk, j);
    case elem_type::tq2_0: return value<elem_type::tq2_0>(blk, j);
    case elem_type::iq2_xxs: return value<elem_type::iq2_xxs>(blk, j);
    case elem_type::iq2_xs: return value<elem_type::iq2_xs>(blk, j);
    case elem_type::iq2_s: return value<elem_type::iq2_s>(blk, j);
    case elem_type::iq3_xxs: return value<elem_type::iq3_xxs>(blk, j);
    case elem_type::iq3_s: return value<elem_type::iq3_s>(blk, j);
    case elem_type::iq1_s: return value<elem_type::iq1_s>(blk, j);
    case elem_type::iq1_m: return value<elem_type::iq1_m>(blk, j);
    default: return 0.0f;
    }
}

/// Calls f(std::integral_constant<elem_type, T>{}) for the type T that t names among the
/// extended types; returns `otherwise` for any other type.
template <class F, class R> R visit(elem_type t, F&& f, R otherwise) {
    switch (t) {
    case elem_type::q4_1: return f(std::integral_constant<elem_type, elem_type::q4_1>{});
    case elem_type::q5_0: return f(std::integral_constant<elem_type, elem_type::q5_0>{});
    case elem_type::q5_1: return f(std::integral_constant<elem_type, elem_type::q5_1>{});
    case elem_type::iq4_nl: return f(std::integral_constant<elem_type, elem_type::iq4_nl>{});
    case elem_type::mxfp4: return f(std::integral_constant<elem_type, elem_type::mxfp4>{});
    case elem_type::q2_K: return f(std::integral_constant<elem_type, elem_type::q2_K>{});
    case elem_type::q3_K: return f(std::integral_constant<elem_type, elem_type::q3_K>{});
    case elem_type::q4_K: return f(std::integral_constant<elem_type, elem_type::q4_K>{});
    case elem_type::q5_K: return f(std::integral_constant<elem_type, elem_type::q5_K>{});
    case elem_type::q6_K: return f(std::integral_constant<elem_type, elem_type::q6_K>{});
    case elem_type::q8_K: return f(std::integral_constant<elem_type, elem_type::q8_K>{});
    case elem_type::iq4_xs: return f(std::integral_constant<elem_type, elem_type::iq4_xs>{});
    case elem_type::tq1_0: return f(std::integral_constant<elem_type, elem_type::tq1_0>{});
    case elem_type::tq2_0: return f(std::integral_constant<elem_type, elem_type::tq2_0>{});
    case elem_type::iq2_xxs: return f(std::integral_constant<elem_type, elem_type::iq2_xxs>{});
    case elem_type::iq2_xs: return f(std::integral_constant<elem_type, elem_type::iq2_xs>{});
    case elem_type::iq2_s: return f(std::integral_constant<elem_type, elem_type::iq2_s>{});
    case elem_type::iq3_xxs: return f(std::integral_constant<elem_type, elem_type::iq3_xxs>{});
    case elem_type::iq3_s: return f(std::integral_constant<elem_type, elem_type::iq3_s>{});
    case elem_type::iq1_s: return f(std::integral_constant<elem_type, elem_type::iq1_s>{});
    case elem_type::iq1_m: return f(std::integral_constant<elem_type, elem_type::iq1_m>{});
    default: return otherwise;
    }
}

/// Value i0 of a packed row of type t (extended(t)) starting at row.
BACKPLANE_CUDA_HD inline float row_value(elem_type t, const u8* row, std::int64_t i0) {
    const int bv = block_values(t);
    return value(t, row + (i0 / bv) * block_bytes(t), static_cast<int>(i0 % bv));
}

} // namespace backplane::cuda::quant
