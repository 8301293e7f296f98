#pragma once
// Fast element-wise and row-wise kernels for f32 tensors whose rows are contiguous:
// add, sub, mul, div (b broadcast over a), scale, sqr, sqrt, silu, gelu, relu, rms_norm,
// norm, soft_max (no mask or an f32 mask; ALiBi and sinks too) and glu's swiglu (silu(x) *
// g, fused or split).
//
// Each op is written once per instruction-set level (AVX-512, AVX2, portable) for one
// contiguous row; the driver walks the thread's share of rows. Other types and layouts
// use the reference kernels (rowwise_applies says which).
//
// Numerics against the reference kernels: add, sub, mul, div, sqr, sqrt and relu are
// bit-identical (the same IEEE operation per element); scale may round once instead of
// twice (the compiler fuses its multiply-add); exp-based ops (silu, gelu,
// soft_max) use a polynomial exp accurate to about 1 ulp; reductions (norms, soft_max's
// sum) accumulate in f32 over several vector lanes instead of double.
//
// In place (dst sharing a's memory with a's layout): every pass reads an element before
// writing it, and later passes read dst only.

#include <backplane/backends/cpu/compute_params.hpp>
#include <backplane/backends/cpu/isa.hpp>
#include <backplane/backends/cpu/kernels/common.hpp>
#include <backplane/core/alibi.hpp>
#include <backplane/core/error.hpp>
#include <backplane/core/glu_functions.hpp>
#include <backplane/core/op_traits.hpp>
#include <backplane/core/tensor.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>

#if BACKPLANE_HAS_X86_KERNELS
#include <immintrin.h>
#endif

namespace backplane::cpu::fast {

namespace rowwise_detail {

using i64 = std::int64_t;

enum class bin_op { add, sub, mul, div };
enum class un_op { scale, sqr, sqrt, silu, gelu, relu };

inline constexpr float sqrt_2_over_pi = 0.79788456080286535588f;

// ---------------------------------------------------------------------------------------
// portable: plain loops, the same formulas as the reference kernels

inline float bin1(bin_op op, float x, float y) noexcept {
    switch (op) {
    case bin_op::add: return x + y;
    case bin_op::sub: return x - y;
    case bin_op::mul: return x * y;
    case bin_op::div: return x / y;
    }
    return 0.0f;
}

inline float un1(un_op op, float x, float s, float bias) noexcept {
    switch (op) {
    case un_op::scale: return x * s + bias;
    case un_op::sqr: return x * x;
    case un_op::sqrt: return std::sqrt(x);
    case un_op::silu: return x / (1.0f + std::exp(-x));
    case un_op::gelu: {
        const float u = sqrt_2_over_pi * x * (1.0f + 0.044715f * x * x);
        return x / (1.0f + std::exp(-2.0f * u));
    }
    case un_op::relu: return x > 0.0f ? x : 0.0f;
    }
    return 0.0f;
}

struct portable {
    static void bin_row(bin_op op, const float* a, const float* b, float* d, i64 n) noexcept {
        for (i64 i = 0; i < n; ++i) d[i] = bin1(op, a[i], b[i]);
    }
    static void bin_row_scalar(bin_op op, const float* a, float y, float* d, i64 n) noexcept {
        for (i64 i = 0; i < n; ++i) d[i] = bin1(op, a[i], y);
    }
    static void un_row(un_op op, const float* a, float* d, i64 n, float s, float bias) noexcept {
        for (i64 i = 0; i < n; ++i) d[i] = un1(op, a[i], s, bias);
    }
    static float sum(const float* a, i64 n) noexcept {
        float acc[8] = {};
        i64 i = 0;
        for (; i + 8 <= n; i += 8)
            for (int j = 0; j < 8; ++j) acc[j] += a[i + j];
        for (int j = 0; i < n; ++i, ++j) acc[j] += a[i];
        return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    }
    static float sum_sq_dev(const float* a, i64 n, float mean) noexcept {
        float acc[8] = {};
        i64 i = 0;
        for (; i + 8 <= n; i += 8)
            for (int j = 0; j < 8; ++j) acc[j] += (a[i + j] - mean) * (a[i + j] - mean);
        for (int j = 0; i < n; ++i, ++j) acc[j] += (a[i] - mean) * (a[i] - mean);
        return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    }
    static void shift_scale(const float* a, float* d, i64 n, float mean, float s) noexcept {
        for (i64 i = 0; i < n; ++i) d[i] = (a[i] - mean) * s;
    }
    /// d = a * scale (+ mask); returns the row's maximum.
    static float logits(const float* a, const float* mask, float* d, i64 n, float scale, float slope) noexcept {
        float m = -std::numeric_limits<float>::infinity();
        for (i64 i = 0; i < n; ++i) {
            const float v = a[i] * scale + (mask ? slope * mask[i] : 0.0f);
            d[i] = v;
            m = std::fmax(m, v);
        }
        return m;
    }
    /// d = exp(d - max); returns the sum.
    static float exp_shift(float* d, i64 n, float max) noexcept {
        double s = 0.0;
        for (i64 i = 0; i < n; ++i) {
            d[i] = std::exp(d[i] - max);
            s += d[i];
        }
        return static_cast<float>(s);
    }
    static void scale_row(float* d, i64 n, float s) noexcept {
        for (i64 i = 0; i < n; ++i) d[i] *= s;
    }
};

#if BACKPLANE_HAS_X86_KERNELS

BACKPLANE_X86_KERNELS_BEGIN

// ---------------------------------------------------------------------------------------
// AVX-512: 16 lanes, masked loads and stores for the tail of each row

struct avx512 {
    BACKPLANE_TARGET_AVX512 static inline __mmask16 tail(i64 n) noexcept {
        return static_cast<__mmask16>((1u << n) - 1u);
    }
    // horizontal reductions through AVX2 (GCC 12's _mm512_reduce_* warn spuriously)
    BACKPLANE_TARGET_AVX512 static inline float hsum(__m512 v) noexcept {
        __m256 h = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
        __m128 s = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
        s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        s = _mm_add_ss(s, _mm_movehdup_ps(s));
        return _mm_cvtss_f32(s);
    }
    BACKPLANE_TARGET_AVX512 static inline float hmax(__m512 v) noexcept {
        __m256 h = _mm256_max_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
        __m128 s = _mm_max_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
        s = _mm_max_ps(s, _mm_movehl_ps(s, s));
        s = _mm_max_ss(s, _mm_movehdup_ps(s));
        return _mm_cvtss_f32(s);
    }

    /// exp with range reduction by ln 2 and a degree-6 polynomial; scalef rebuilds 2^n
    /// with correct underflow to denormals and zero.
    BACKPLANE_TARGET_AVX512 static inline __m512 exp(__m512 x) noexcept {
        x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-104.0f)), _mm512_set1_ps(89.0f));
        const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                              _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
        r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
        __m512 p = _mm512_set1_ps(1.9875691500e-4f);
        p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
        p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
        p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
        p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
        p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
        const __m512 y = _mm512_add_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.0f));
        return _mm512_scalef_ps(y, n);
    }

    BACKPLANE_TARGET_AVX512 static inline __m512 bin(bin_op op, __m512 x, __m512 y) noexcept {
        switch (op) {
        case bin_op::add: return _mm512_add_ps(x, y);
        case bin_op::sub: return _mm512_sub_ps(x, y);
        case bin_op::mul: return _mm512_mul_ps(x, y);
        case bin_op::div: return _mm512_div_ps(x, y);
        }
        return x;
    }

    BACKPLANE_TARGET_AVX512 static inline __m512 un(un_op op, __m512 x, float s, float bias) noexcept {
        switch (op) {
        case un_op::scale: return _mm512_add_ps(_mm512_mul_ps(x, _mm512_set1_ps(s)), _mm512_set1_ps(bias));
        case un_op::sqr: return _mm512_mul_ps(x, x);
        case un_op::sqrt: return _mm512_sqrt_ps(x);
        case un_op::silu:
            return _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), exp(_mm512_sub_ps(_mm512_setzero_ps(), x))));
        case un_op::gelu: {
            const __m512 x2 = _mm512_mul_ps(x, x);
            const __m512 u = _mm512_mul_ps(
                _mm512_mul_ps(_mm512_set1_ps(sqrt_2_over_pi), x),
                _mm512_add_ps(_mm512_set1_ps(1.0f), _mm512_mul_ps(_mm512_set1_ps(0.044715f), x2)));
            return _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), exp(_mm512_mul_ps(_mm512_set1_ps(-2.0f), u))));
        }
        case un_op::relu: return _mm512_max_ps(x, _mm512_setzero_ps());
        }
        return x;
    }

    BACKPLANE_TARGET_AVX512 static void bin_row(bin_op op, const float* a, const float* b, float* d, i64 n) noexcept {
        i64 i = 0;
        for (; i + 16 <= n; i += 16)
            _mm512_storeu_ps(d + i, bin(op, _mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i)));
        if (i < n) {
            const __mmask16 m = tail(n - i);
            // masked-off lanes load 1.0 so that a division there raises nothing
            const __m512 one = _mm512_set1_ps(1.0f);
            _mm512_mask_storeu_ps(d + i, m, bin(op, _mm512_mask_loadu_ps(one, m, a + i), _mm512_mask_loadu_ps(one, m, b + i)));
        }
    }
    BACKPLANE_TARGET_AVX512 static void bin_row_scalar(bin_op op, const float* a, float y, float* d, i64 n) noexcept {
        const __m512 vy = _mm512_set1_ps(y);
        i64 i = 0;
        for (; i + 16 <= n; i += 16) _mm512_storeu_ps(d + i, bin(op, _mm512_loadu_ps(a + i), vy));
        if (i < n) {
            const __mmask16 m = tail(n - i);
            _mm512_mask_storeu_ps(d + i, m, bin(op, _mm512_mask_loadu_ps(_mm512_set1_ps(1.0f), m, a + i), vy));
        }
    }
    BACKPLANE_TARGET_AVX512 static void un_row(un_op op, const float* a, float* d, i64 n, float s, float bias) noexcept {
        i64 i = 0;
        for (; i + 16 <= n; i += 16) _mm512_storeu_ps(d + i, un(op, _mm512_loadu_ps(a + i), s, bias));
        if (i < n) {
            const __mmask16 m = tail(n - i);
            _mm512_mask_storeu_ps(d + i, m, un(op, _mm512_maskz_loadu_ps(m, a + i), s, bias));
        }
    }
    BACKPLANE_TARGET_AVX512 static float sum(const float* a, i64 n) noexcept {
        __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
        i64 i = 0;
        for (; i + 32 <= n; i += 32) {
            s0 = _mm512_add_ps(s0, _mm512_loadu_ps(a + i));
            s1 = _mm512_add_ps(s1, _mm512_loadu_ps(a + i + 16));
        }
        for (; i < n; i += 16) s0 = _mm512_add_ps(s0, _mm512_maskz_loadu_ps(tail(n - i < 16 ? n - i : 16), a + i));
        return hsum(_mm512_add_ps(s0, s1));
    }
    BACKPLANE_TARGET_AVX512 static float sum_sq_dev(const float* a, i64 n, float mean) noexcept {
        const __m512 vm = _mm512_set1_ps(mean);
        __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
        i64 i = 0;
        for (; i + 32 <= n; i += 32) {
            const __m512 x0 = _mm512_sub_ps(_mm512_loadu_ps(a + i), vm);
            const __m512 x1 = _mm512_sub_ps(_mm512_loadu_ps(a + i + 16), vm);
            s0 = _mm512_fmadd_ps(x0, x0, s0);
            s1 = _mm512_fmadd_ps(x1, x1, s1);
        }
        for (; i < n; i += 16) {
            const __mmask16 m = tail(n - i < 16 ? n - i : 16);
            const __m512 x = _mm512_maskz_sub_ps(m, _mm512_maskz_loadu_ps(m, a + i), vm);
            s0 = _mm512_fmadd_ps(x, x, s0);
        }
        return hsum(_mm512_add_ps(s0, s1));
    }
    BACKPLANE_TARGET_AVX512 static void shift_scale(const float* a, float* d, i64 n, float mean, float s) noexcept {
        const __m512 vm = _mm512_set1_ps(mean), vs = _mm512_set1_ps(s);
        i64 i = 0;
        for (; i + 16 <= n; i += 16) _mm512_storeu_ps(d + i, _mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(a + i), vm), vs));
        if (i < n) {
            const __mmask16 m = tail(n - i);
            _mm512_mask_storeu_ps(d + i, m, _mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, a + i), vm), vs));
        }
    }
    BACKPLANE_TARGET_AVX512 static float logits(const float* a, const float* mask, float* d, i64 n, float scale,
                                                float slope) noexcept {
        const __m512 vs = _mm512_set1_ps(scale);
        const __m512 vslope = _mm512_set1_ps(slope);
        const __m512 ninf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
        __m512 vmax = ninf;
        i64 i = 0;
        for (; i < n; i += 16) {
            const __mmask16 m = tail(n - i < 16 ? n - i : 16);
            __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, a + i), vs);
            if (mask) v = _mm512_add_ps(v, _mm512_mul_ps(vslope, _mm512_maskz_loadu_ps(m, mask + i)));
            _mm512_mask_storeu_ps(d + i, m, v);
            vmax = _mm512_mask_max_ps(vmax, m, vmax, v);
        }
        return hmax(vmax);
    }
    BACKPLANE_TARGET_AVX512 static float exp_shift(float* d, i64 n, float max) noexcept {
        const __m512 vmax = _mm512_set1_ps(max);
        __m512 s = _mm512_setzero_ps();
        for (i64 i = 0; i < n; i += 16) {
            const __mmask16 m = tail(n - i < 16 ? n - i : 16);
            const __m512 e = exp(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, d + i), vmax));
            _mm512_mask_storeu_ps(d + i, m, e);
            s = _mm512_mask_add_ps(s, m, s, e);
        }
        return hsum(s);
    }
    BACKPLANE_TARGET_AVX512 static void scale_row(float* d, i64 n, float s) noexcept {
        const __m512 vs = _mm512_set1_ps(s);
        i64 i = 0;
        for (; i + 16 <= n; i += 16) _mm512_storeu_ps(d + i, _mm512_mul_ps(_mm512_loadu_ps(d + i), vs));
        if (i < n) {
            const __mmask16 m = tail(n - i);
            _mm512_mask_storeu_ps(d + i, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, d + i), vs));
        }
    }
};

// ---------------------------------------------------------------------------------------
// AVX2 + FMA: 8 lanes, scalar tails (the portable formulas)

struct avx2 {
    BACKPLANE_TARGET_AVX2 static inline float hsum(__m256 v) noexcept {
        __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
        s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        s = _mm_add_ss(s, _mm_movehdup_ps(s));
        return _mm_cvtss_f32(s);
    }
    BACKPLANE_TARGET_AVX2 static inline float hmax(__m256 v) noexcept {
        __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
        s = _mm_max_ps(s, _mm_movehl_ps(s, s));
        s = _mm_max_ss(s, _mm_movehdup_ps(s));
        return _mm_cvtss_f32(s);
    }

    /// exp as avx512::exp; 2^n is built in the exponent field, with n kept in the normal
    /// range and results below exp(-87.33) (the smallest normal float) flushed to zero.
    BACKPLANE_TARGET_AVX2 static inline __m256 exp(__m256 x) noexcept {
        const __m256 lo = _mm256_set1_ps(-87.33654475f);
        const __m256 under = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
        x = _mm256_min_ps(_mm256_max_ps(x, lo), _mm256_set1_ps(88.3762626647949f));
        const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
        r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
        __m256 p = _mm256_set1_ps(1.9875691500e-4f);
        p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
        p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
        p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
        p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
        p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
        const __m256 y = _mm256_add_ps(_mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r), _mm256_set1_ps(1.0f));
        // n in [-126, 128): 2^n split as 2^(n/2) * 2^(n - n/2) keeps both factors normal
        const __m256i ni = _mm256_cvtps_epi32(n);
        const __m256i h = _mm256_srai_epi32(ni, 1);
        const __m256 p1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(h, _mm256_set1_epi32(127)), 23));
        const __m256 p2 = _mm256_castsi256_ps(
            _mm256_slli_epi32(_mm256_add_epi32(_mm256_sub_epi32(ni, h), _mm256_set1_epi32(127)), 23));
        return _mm256_andnot_ps(under, _mm256_mul_ps(_mm256_mul_ps(y, p1), p2));
    }

    BACKPLANE_TARGET_AVX2 static inline __m256 bin(bin_op op, __m256 x, __m256 y) noexcept {
        switch (op) {
        case bin_op::add: return _mm256_add_ps(x, y);
        case bin_op::sub: return _mm256_sub_ps(x, y);
        case bin_op::mul: return _mm256_mul_ps(x, y);
        case bin_op::div: return _mm256_div_ps(x, y);
        }
        return x;
    }
    BACKPLANE_TARGET_AVX2 static inline __m256 un(un_op op, __m256 x, float s, float bias) noexcept {
        switch (op) {
        case un_op::scale: return _mm256_add_ps(_mm256_mul_ps(x, _mm256_set1_ps(s)), _mm256_set1_ps(bias));
        case un_op::sqr: return _mm256_mul_ps(x, x);
        case un_op::sqrt: return _mm256_sqrt_ps(x);
        case un_op::silu:
            return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), exp(_mm256_sub_ps(_mm256_setzero_ps(), x))));
        case un_op::gelu: {
            const __m256 x2 = _mm256_mul_ps(x, x);
            const __m256 u = _mm256_mul_ps(
                _mm256_mul_ps(_mm256_set1_ps(sqrt_2_over_pi), x),
                _mm256_add_ps(_mm256_set1_ps(1.0f), _mm256_mul_ps(_mm256_set1_ps(0.044715f), x2)));
            return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), exp(_mm256_mul_ps(_mm256_set1_ps(-2.0f), u))));
        }
        case un_op::relu: return _mm256_max_ps(x, _mm256_setzero_ps());
        }
        return x;
    }

    BACKPLANE_TARGET_AVX2 static void bin_row(bin_op op, const float* a, const float* b, float* d, i64 n) noexcept {
        i64 i = 0;
        for (; i + 8 <= n; i += 8) _mm256_storeu_ps(d + i, bin(op, _mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
        for (; i < n; ++i) d[i] = bin1(op, a[i], b[i]);
    }
    BACKPLANE_TARGET_AVX2 static void bin_row_scalar(bin_op op, const float* a, float y, float* d, i64 n) noexcept {
        const __m256 vy = _mm256_set1_ps(y);
        i64 i = 0;
        for (; i + 8 <= n; i += 8) _mm256_storeu_ps(d + i, bin(op, _mm256_loadu_ps(a + i), vy));
        for (; i < n; ++i) d[i] = bin1(op, a[i], y);
    }
    BACKPLANE_TARGET_AVX2 static void un_row(un_op op, const float* a, float* d, i64 n, float s, float bias) noexcept {
        i64 i = 0;
        for (; i + 8 <= n; i += 8) _mm256_storeu_ps(d + i, un(op, _mm256_loadu_ps(a + i), s, bias));
        if (i < n) { // the tail through a padded vector, so it gets the same exp as the body
            alignas(32) float buf[8] = {};
            for (i64 j = i; j < n; ++j) buf[j - i] = a[j];
            _mm256_store_ps(buf, un(op, _mm256_load_ps(buf), s, bias));
            for (i64 j = i; j < n; ++j) d[j] = buf[j - i];
        }
    }
    BACKPLANE_TARGET_AVX2 static float sum(const float* a, i64 n) noexcept {
        __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
        i64 i = 0;
        for (; i + 16 <= n; i += 16) {
            s0 = _mm256_add_ps(s0, _mm256_loadu_ps(a + i));
            s1 = _mm256_add_ps(s1, _mm256_loadu_ps(a + i + 8));
        }
        float s = hsum(_mm256_add_ps(s0, s1));
        for (; i < n; ++i) s += a[i];
        return s;
    }
    BACKPLANE_TARGET_AVX2 static float sum_sq_dev(const float* a, i64 n, float mean) noexcept {
        const __m256 vm = _mm256_set1_ps(mean);
        __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
        i64 i = 0;
        for (; i + 16 <= n; i += 16) {
            const __m256 x0 = _mm256_sub_ps(_mm256_loadu_ps(a + i), vm);
            const __m256 x1 = _mm256_sub_ps(_mm256_loadu_ps(a + i + 8), vm);
            s0 = _mm256_fmadd_ps(x0, x0, s0);
            s1 = _mm256_fmadd_ps(x1, x1, s1);
        }
        float s = hsum(_mm256_add_ps(s0, s1));
        for (; i < n; ++i) s += (a[i] - mean) * (a[i] - mean);
        return s;
    }
    BACKPLANE_TARGET_AVX2 static void shift_scale(const float* a, float* d, i64 n, float mean, float s) noexcept {
        const __m256 vm = _mm256_set1_ps(mean), vs = _mm256_set1_ps(s);
        i64 i = 0;
        for (; i + 8 <= n; i += 8) _mm256_storeu_ps(d + i, _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(a + i), vm), vs));
        for (; i < n; ++i) d[i] = (a[i] - mean) * s;
    }
    BACKPLANE_TARGET_AVX2 static float logits(const float* a, const float* mask, float* d, i64 n, float scale,
                                              float slope) noexcept {
        const __m256 vs = _mm256_set1_ps(scale);
        const __m256 vslope = _mm256_set1_ps(slope);
        __m256 vmax = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
        i64 i = 0;
        for (; i + 8 <= n; i += 8) {
            __m256 v = _mm256_mul_ps(_mm256_loadu_ps(a + i), vs);
            if (mask) v = _mm256_add_ps(v, _mm256_mul_ps(vslope, _mm256_loadu_ps(mask + i)));
            _mm256_storeu_ps(d + i, v);
            vmax = _mm256_max_ps(vmax, v);
        }
        float m = hmax(vmax);
        for (; i < n; ++i) {
            const float v = a[i] * scale + (mask ? slope * mask[i] : 0.0f);
            d[i] = v;
            m = std::fmax(m, v);
        }
        return m;
    }
    BACKPLANE_TARGET_AVX2 static float exp_shift(float* d, i64 n, float max) noexcept {
        const __m256 vmax = _mm256_set1_ps(max);
        __m256 s = _mm256_setzero_ps();
        i64 i = 0;
        for (; i + 8 <= n; i += 8) {
            const __m256 e = exp(_mm256_sub_ps(_mm256_loadu_ps(d + i), vmax));
            _mm256_storeu_ps(d + i, e);
            s = _mm256_add_ps(s, e);
        }
        float sum = hsum(s);
        if (i < n) {
            alignas(32) float buf[8];
            for (int j = 0; j < 8; ++j) buf[j] = i + j < n ? d[i + j] - max : -std::numeric_limits<float>::infinity();
            _mm256_store_ps(buf, exp(_mm256_load_ps(buf)));
            for (i64 j = i; j < n; ++j) {
                d[j] = buf[j - i];
                sum += buf[j - i];
            }
        }
        return sum;
    }
    BACKPLANE_TARGET_AVX2 static void scale_row(float* d, i64 n, float s) noexcept {
        const __m256 vs = _mm256_set1_ps(s);
        i64 i = 0;
        for (; i + 8 <= n; i += 8) _mm256_storeu_ps(d + i, _mm256_mul_ps(_mm256_loadu_ps(d + i), vs));
        for (; i < n; ++i) d[i] *= s;
    }
};

BACKPLANE_X86_KERNELS_END

#endif // BACKPLANE_HAS_X86_KERNELS

// ---------------------------------------------------------------------------------------
// drivers: the thread's share of rows, one row function call per row (or segment)

// rows are addressed with the reference kernels' helpers (kernels/common.hpp)
using kernels::row_of;
inline const float* frow(const tensor& t, i64 i1, i64 i2, i64 i3) noexcept {
    return reinterpret_cast<const float*>(kernels::row_ptr(t, i1, i2, i3));
}
inline float* frow_mut(tensor& t, i64 i1, i64 i2, i64 i3) noexcept {
    return reinterpret_cast<float*>(kernels::row_ptr(t, i1, i2, i3));
}

template <class V>
void run_binary(const compute_params& p, tensor& dst, bin_op op) noexcept {
    const tensor& a = *dst.src[0];
    const tensor& b = *dst.src[1];
    const i64 n = dst.ne[0], nb0 = b.ne[0];
    const auto [r0, r1] = split_work(dst.nrows(), p);
    for (i64 r = r0; r < r1; ++r) {
        const auto [i1, i2, i3] = row_of(r, dst.ne);
        const float* pa = frow(a, i1, i2, i3);
        const float* pb = frow(b, i1 % b.ne[1], i2 % b.ne[2], i3 % b.ne[3]);
        float* pd = frow_mut(dst, i1, i2, i3);
        if (nb0 == n) {
            V::bin_row(op, pa, pb, pd, n);
        } else if (nb0 == 1) {
            V::bin_row_scalar(op, pa, pb[0], pd, n);
        } else {
            for (i64 s = 0; s < n; s += nb0) V::bin_row(op, pa + s, pb, pd + s, nb0);
        }
    }
}

template <class V>
void run_unary(const compute_params& p, tensor& dst, un_op op, float s, float bias) noexcept {
    const tensor& a = *dst.src[0];
    const auto [r0, r1] = split_work(dst.nrows(), p);
    for (i64 r = r0; r < r1; ++r) {
        const auto [i1, i2, i3] = row_of(r, dst.ne);
        V::un_row(op, frow(a, i1, i2, i3), frow_mut(dst, i1, i2, i3), dst.ne[0], s, bias);
    }
}

/// swiglu: silu of a piece of x into a buffer, times the same piece of g, so that dst may
/// share x's or g's memory (each element is read before the same one is written).
template <class V>
void run_swiglu(const compute_params& p, tensor& dst) noexcept {
    const tensor& a = *dst.src[0];
    const tensor& b = dst.src[1] != nullptr ? *dst.src[1] : a;
    const i64 nc = dst.ne[0];
    const auto [x0, g0] = glu_fn::halves_of(dst);
    constexpr i64 piece = 256;
    float act[piece];
    const auto [r0, r1] = split_work(dst.nrows(), p);
    for (i64 r = r0; r < r1; ++r) {
        const auto [i1, i2, i3] = row_of(r, dst.ne);
        const float* px = frow(a, i1, i2, i3) + x0;
        const float* pg = frow(b, i1, i2, i3) + g0;
        float* pd = frow_mut(dst, i1, i2, i3);
        for (i64 i = 0; i < nc; i += piece) {
            const i64 n = nc - i < piece ? nc - i : piece;
            V::un_row(un_op::silu, px + i, act, n, 0, 0);
            V::bin_row(bin_op::mul, act, pg + i, pd + i, n);
        }
    }
}

template <class V>
void run_norm(const compute_params& p, tensor& dst, bool rms) noexcept {
    const tensor& a = *dst.src[0];
    const i64 n = a.ne[0];
    const float eps = dst.param<float>(0);
    const auto [r0, r1] = split_work(dst.nrows(), p);
    for (i64 r = r0; r < r1; ++r) {
        const auto [i1, i2, i3] = row_of(r, dst.ne);
        const float* pa = frow(a, i1, i2, i3);
        const float mean = rms ? 0.0f : V::sum(pa, n) / static_cast<float>(n);
        const float var = V::sum_sq_dev(pa, n, mean) / static_cast<float>(n);
        V::shift_scale(pa, frow_mut(dst, i1, i2, i3), n, mean, 1.0f / std::sqrt(var + eps));
    }
}

template <class V>
void run_soft_max(const compute_params& p, tensor& dst) noexcept {
    const tensor& a = *dst.src[0];
    const tensor* mask = dst.src[1];
    const tensor* sinks = dst.src[2];
    const i64 n = a.ne[0];
    const float scale = dst.param<float>(0);
    const float max_bias = dst.param<float>(1);
    constexpr float ninf = -std::numeric_limits<float>::infinity();
    const auto [r0, r1] = split_work(dst.nrows(), p);
    for (i64 r = r0; r < r1; ++r) {
        const auto [i1, i2, i3] = row_of(r, dst.ne);
        const float* pm = mask ? frow(*mask, i1, i2 % mask->ne[2], i3 % mask->ne[3]) : nullptr;
        const float slope = mask ? alibi::slope(max_bias, static_cast<int>(a.ne[2]), static_cast<int>(i2)) : 1.0f;
        float* pd = frow_mut(dst, i1, i2, i3);
        const float sink = sinks ? kernels::load<float>(static_cast<const std::byte*>(sinks->data) +
                                                        static_cast<std::size_t>(i2) * sinks->nb[0])
                                 : ninf;
        const float max = std::fmax(V::logits(frow(a, i1, i2, i3), pm, pd, n, scale, slope), sink);
        if (max == ninf) { // every position masked, no sink
            for (i64 i = 0; i < n; ++i) pd[i] = 0.0f;
            continue;
        }
        float sum = V::exp_shift(pd, n, max);
        if (sinks) sum += std::exp(sink - max);
        V::scale_row(pd, n, 1.0f / sum);
    }
}

/// The row operation of an element-wise op here: bin for an op of two operands, un for
/// one of one; `has` false for an op without one (neg: the reference kernel computes it).
struct elementwise_row {
    bool has = false;
    bin_op bin = bin_op::add;
    un_op un = un_op::scale;
};
constexpr elementwise_row elementwise_row_of(op_kind op) noexcept {
    switch (op) {
    case op_kind::add: return {true, bin_op::add};
    case op_kind::sub: return {true, bin_op::sub};
    case op_kind::mul: return {true, bin_op::mul};
    case op_kind::div: return {true, bin_op::div};
    case op_kind::scale: return {true, {}, un_op::scale};
    case op_kind::sqr: return {true, {}, un_op::sqr};
    case op_kind::sqrt: return {true, {}, un_op::sqrt};
    case op_kind::silu: return {true, {}, un_op::silu};
    case op_kind::gelu: return {true, {}, un_op::gelu};
    case op_kind::relu: return {true, {}, un_op::relu};
    default: return {};
    }
}

template <class V>
errc run(const compute_params& p, tensor& dst) noexcept {
    if (dst.op == op_kind::glu) {
        run_swiglu<V>(p, dst);
        return errc::ok;
    }
    if (is_elementwise(dst.op)) {
        const elementwise_row r = elementwise_row_of(dst.op);
        if (!r.has) return errc::not_supported;
        if (is_binary_elementwise(dst.op)) {
            run_binary<V>(p, dst, r.bin);
        } else if (r.un == un_op::scale) {
            run_unary<V>(p, dst, r.un, dst.param<float>(0), dst.param<float>(1));
        } else {
            run_unary<V>(p, dst, r.un, 0, 0);
        }
        return errc::ok;
    }
    switch (dst.op) {
    case op_kind::rms_norm: run_norm<V>(p, dst, true); break;
    case op_kind::norm: run_norm<V>(p, dst, false); break;
    case op_kind::soft_max: run_soft_max<V>(p, dst); break;
    default: return errc::not_supported;
    }
    return errc::ok;
}

inline bool f32_rows(const tensor* t) noexcept {
    // rows read through float pointers: the data and every row step must be float-aligned
    return t != nullptr && t->type == elem_type::f32 && t->nb[0] == sizeof(float) &&
           reinterpret_cast<std::uintptr_t>(t->data) % alignof(float) == 0 && t->nb[1] % alignof(float) == 0 &&
           t->nb[2] % alignof(float) == 0 && t->nb[3] % alignof(float) == 0;
}

} // namespace rowwise_detail

/// True when rowwise() computes this node: an op of this family on f32 tensors whose
/// rows are contiguous (a pure function of the node).
inline bool rowwise_applies(const tensor& dst) noexcept {
    using rowwise_detail::f32_rows;
    if (dst.nelements() == 0 || !f32_rows(&dst) || !f32_rows(dst.src[0])) return false;
    if (dst.op == op_kind::glu)
        return dst.param<std::int32_t>(0) == static_cast<std::int32_t>(glu_op::swiglu) &&
               (dst.src[1] == nullptr || f32_rows(dst.src[1]));
    if (is_elementwise(dst.op))
        return rowwise_detail::elementwise_row_of(dst.op).has &&
               (!is_binary_elementwise(dst.op) || f32_rows(dst.src[1]));
    switch (dst.op) {
    case op_kind::rms_norm:
    case op_kind::norm: return true;
    case op_kind::soft_max: return dst.src[1] == nullptr || f32_rows(dst.src[1]);
    default: return false;
    }
}

/// Thread p.ith's share of the node at instruction-set level p.level. Call only when
/// rowwise_applies(dst).
template <class = void>
inline errc rowwise(const compute_params& p, tensor& dst) noexcept {
#if BACKPLANE_HAS_X86_KERNELS
    if (p.level == isa::avx512) return rowwise_detail::run<rowwise_detail::avx512>(p, dst);
    if (p.level == isa::avx2) return rowwise_detail::run<rowwise_detail::avx2>(p, dst);
#endif
    return rowwise_detail::run<rowwise_detail::portable>(p, dst);
}

} // namespace backplane::cpu::fast
