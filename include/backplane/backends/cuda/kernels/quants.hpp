#pragma once
// The values of the weight types beyond q8_0 and q4_0 as the CUDA kernels read them:
// q4_1, q5_0, q5_1, iq4_nl, mxfp4 (blocks of 32) and q2_K ... q6_K, q8_K (super-blocks
// of 256), layouts as core/quants.hpp and core/kquants.hpp document them.
//
// Every function is __host__ __device__ and gives exactly core's dequantize_row_* value:
// the same f32 operations in the same order, each rounded on its own (__fmul_rn,
// __fadd_rn on the device, so nvcc never contracts a multiply and an add into an FMA;
// plain operators on the host, as core is compiled). That is why this header is .hpp and
// not .cuh: g++ compiles it too, so a host-only test (tests/backends/cuda/
// test_cuda_quants.cpp) checks the kernels' arithmetic bit for bit without a GPU.
//
// The quantizers of q4_1, q5_0, q5_1 and iq4_nl (quantize<T>) likewise compute core's
// quantize_row_* blocks byte for byte, one block of 32 values per call (one thread per
// block on the device).
//
// Blocks are read byte by byte: mxfp4's 17-byte blocks have no alignment at all, and the
// others only 2 bytes. Tables are packed into integer constants, so device code reads no
// host array.

#include <backplane/core/kquants.hpp>
#include <backplane/core/quants.hpp>
#include <backplane/core/types.hpp>

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
    case elem_type::q8_K: return true;
    default: return false;
    }
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
    case elem_type::q8_K: return 256;
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

/// x rounded to f16 (to nearest even, as core's f32_to_f16) and stored at p, little-endian.
BACKPLANE_CUDA_HD inline void put_f16(u8* p, float x) {
#if defined(__CUDA_ARCH__)
    const std::uint16_t h = __half_as_ushort(__float2half_rn(x));
#else
    const std::uint16_t h = f32_to_f16(x).bits;
#endif
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

/// e8m0_to_f32_half (core/quants.hpp): 2^(e - 128).
BACKPLANE_CUDA_HD inline float e8m0_half(std::uint32_t e) {
    return from_bits(e < 2 ? std::uint32_t{0x00200000u} << e : (e - 1) << 23);
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

/// The first value of largest magnitude (0 when none is above 0), core's signed_max.
BACKPLANE_CUDA_HD inline float signed_max(const float* x) {
    float amax = 0.0f, vmax = 0.0f;
    for (int j = 0; j < 32; ++j) {
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

} // namespace detail

/// Whether quantize<T> exists for t.
constexpr bool quantizable(elem_type t) noexcept {
    return t == elem_type::q4_1 || t == elem_type::q5_0 || t == elem_type::q5_1 || t == elem_type::iq4_nl;
}

/// Quantizes 32 values x into the block of type T (q4_1, q5_0, q5_1 or iq4_nl) at blk,
/// byte for byte as core's quantize_row_* (finite x).
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
    } else {
        static_assert(T == elem_type::q4_1, "quant::quantize writes q4_1, q5_0, q5_1 or iq4_nl");
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
        const u8* sc = blk + 96;
        const int sj = j / 16;
        const int lo = sj < 8 ? sc[sj] & 15 : sc[sj - 8] >> 4;
        const int s = (lo | (((sc[8 + sj % 4] >> (2 * (sj / 4))) & 3) << 4)) - 32;
        const float dl = mul(f16_at(blk + 108), static_cast<float>(s));
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
    } else {
        static_assert(T == elem_type::q4_1, "quant::value reads the quantized types but q8_0 and q4_0");
        return 0.0f;
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
    default: return otherwise;
    }
}

/// Value i0 of a packed row of type t (extended(t)) starting at row.
BACKPLANE_CUDA_HD inline float row_value(elem_type t, const u8* row, std::int64_t i0) {
    const int bv = block_values(t);
    return value(t, row + (i0 / bv) * block_bytes(t), static_cast<int>(i0 % bv));
}

} // namespace backplane::cuda::quant
