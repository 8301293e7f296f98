#pragma once
// Fast element-wise and row-wise kernels for f32 tensors whose rows are contiguous:
// add, sub, mul, div (b broadcast over a), the unary ops (scale, sqr, sqrt, silu, gelu,
// relu, neg and every function of core/unary_functions.hpp; f16 rows too, converted
// through an f32 buffer), rms_norm, norm, soft_max (no mask or an f32 mask; ALiBi and
// sinks too) and glu's swiglu (silu(x) * g, fused or split).
//
// Each op is written once per instruction-set level (AVX-512, AVX2, portable) for one
// contiguous row; the driver walks the thread's share of rows. The unary functions
// without a vector form here (softplus, gelu_erf, log, ...) call their functor of
// core/unary_functions.hpp in a plain loop over the row, the same at every level. Other
// types and layouts use the reference kernels (rowwise_applies says which).
//
// Numerics against the reference kernels: add, sub, mul, div, sqr, sqrt, relu, neg, abs
// and the functor loops are bit-identical (the same IEEE operations per element); scale
// may round once instead of twice (the compiler fuses its multiply-add); the portable
// level calls the reference functors; the vector exp-based ops (silu, gelu, gelu_quick,
// sigmoid, tanh, exp, soft_max) use a polynomial exp accurate to about 1 ulp (tanh: an
// odd polynomial below |x| = 0.35, about 2 ulp); reductions (norms, soft_max's sum)
// accumulate in f32 over several vector lanes instead of double.
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
#include <backplane/core/types.hpp>
#include <backplane/core/unary_functions.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>

#if BACKPLANE_HAS_X86_KERNELS
#include <backplane/backends/cpu/detail/x86_intrinsics.hpp>
#endif

namespace backplane::cpu::fast {

namespace rowwise_detail {

using i64 = std::int64_t;

enum class bin_op { add, sub, mul, div };
enum class un_op { scale, sqr, sqrt, silu, gelu, relu, neg, abs, sigmoid, gelu_quick, tanh, exp };

// tanh below |x| = 0.35: x + x^3 (c3 + x^2 (c5 + ...)), its Taylor series to x^11 (the
// next term is below 5e-9 there)
inline constexpr float tanh_small = 0.35f;
inline constexpr float tanh_c3 = -3.33333333e-1f, tanh_c5 = 1.33333333e-1f, tanh_c7 = -5.39682540e-2f,
                       tanh_c9 = 2.18694885e-2f, tanh_c11 = -8.86323552e-3f;

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
    case un_op::silu: return unary_fn::silu_fn{}(x);
    case un_op::gelu: return unary_fn::gelu_fn{}(x);
    case un_op::relu: return unary_fn::relu_fn{}(x);
    case un_op::neg: return -x;
    case un_op::abs: return unary_fn::abs_fn{}(x);
    case un_op::sigmoid: return unary_fn::sigmoid_fn{}(x);
    case un_op::gelu_quick: return unary_fn::gelu_quick_fn{}(x);
    case un_op::tanh: return unary_fn::tanh_fn{}(x);
    case un_op::exp: return unary_fn::exp_fn{}(x);
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

    /// x / (1 + exp(-k x)): silu (k = 1), gelu_quick, and sigmoid's denominator
    BACKPLANE_TARGET_AVX512 static inline __m512 over_one_plus_exp(__m512 x, __m512 kx) noexcept {
        return _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), exp(_mm512_sub_ps(_mm512_setzero_ps(), kx))));
    }
    /// NaN where x is NaN (exp clamps its argument, which loses a NaN)
    BACKPLANE_TARGET_AVX512 static inline __m512 keep_nan(__m512 x, __m512 y) noexcept {
        return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), y, x);
    }
    /// sign(x) (1 - e) / (1 + e) with e = exp(-2|x|); the odd Taylor polynomial below 0.35
    BACKPLANE_TARGET_AVX512 static inline __m512 tanh(__m512 x) noexcept {
        const __m512 sign = _mm512_set1_ps(-0.0f), one = _mm512_set1_ps(1.0f);
        const __m512 ax = _mm512_andnot_ps(sign, x);
        const __m512 e = exp(_mm512_mul_ps(ax, _mm512_set1_ps(-2.0f)));
        const __m512 big = _mm512_div_ps(_mm512_sub_ps(one, e), _mm512_add_ps(one, e));
        const __m512 x2 = _mm512_mul_ps(ax, ax);
        __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(tanh_c11), x2, _mm512_set1_ps(tanh_c9));
        p = _mm512_fmadd_ps(p, x2, _mm512_set1_ps(tanh_c7));
        p = _mm512_fmadd_ps(p, x2, _mm512_set1_ps(tanh_c5));
        p = _mm512_fmadd_ps(p, x2, _mm512_set1_ps(tanh_c3));
        const __m512 small = _mm512_fmadd_ps(_mm512_mul_ps(p, x2), ax, ax);
        const __m512 t = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(ax, _mm512_set1_ps(tanh_small), _CMP_LT_OQ), big, small);
        return keep_nan(x, _mm512_or_ps(t, _mm512_and_ps(x, sign)));
    }

    BACKPLANE_TARGET_AVX512 static inline __m512 un(un_op op, __m512 x, float s, float bias) noexcept {
        switch (op) {
        case un_op::scale: return _mm512_add_ps(_mm512_mul_ps(x, _mm512_set1_ps(s)), _mm512_set1_ps(bias));
        case un_op::sqr: return _mm512_mul_ps(x, x);
        case un_op::sqrt: return _mm512_sqrt_ps(x);
        case un_op::silu: return over_one_plus_exp(x, x);
        case un_op::gelu: {
            const __m512 x2 = _mm512_mul_ps(x, x);
            const __m512 u = _mm512_mul_ps(
                _mm512_mul_ps(_mm512_set1_ps(unary_fn::gelu_sqrt_2_over_pi), x),
                _mm512_add_ps(_mm512_set1_ps(1.0f), _mm512_mul_ps(_mm512_set1_ps(unary_fn::gelu_cubic), x2)));
            return over_one_plus_exp(x, _mm512_add_ps(u, u));
        }
        case un_op::relu: return _mm512_max_ps(x, _mm512_setzero_ps());
        case un_op::neg: return _mm512_xor_ps(x, _mm512_set1_ps(-0.0f));
        case un_op::abs: return _mm512_andnot_ps(_mm512_set1_ps(-0.0f), x);
        case un_op::sigmoid: return keep_nan(x, over_one_plus_exp(_mm512_set1_ps(1.0f), x));
        case un_op::gelu_quick:
            return over_one_plus_exp(x, _mm512_mul_ps(_mm512_set1_ps(unary_fn::gelu_quick_slope), x));
        case un_op::tanh: return tanh(x);
        case un_op::exp: return keep_nan(x, exp(x));
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
    /// range and results below exp(-87.33) (the smallest normal float) flushed to zero;
    /// above log(FLT_MAX) the product overflows to +inf.
    BACKPLANE_TARGET_AVX2 static inline __m256 exp(__m256 x) noexcept {
        const __m256 lo = _mm256_set1_ps(-87.33654475f);
        const __m256 under = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
        x = _mm256_min_ps(_mm256_max_ps(x, lo), _mm256_set1_ps(89.0f));
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
        // n in [-126, 128]: 2^n split as 2^(n/2) * 2^(n - n/2) keeps both factors normal
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
    /// as avx512::over_one_plus_exp
    BACKPLANE_TARGET_AVX2 static inline __m256 over_one_plus_exp(__m256 x, __m256 kx) noexcept {
        return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), exp(_mm256_sub_ps(_mm256_setzero_ps(), kx))));
    }
    BACKPLANE_TARGET_AVX2 static inline __m256 keep_nan(__m256 x, __m256 y) noexcept {
        return _mm256_blendv_ps(y, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
    }
    /// as avx512::tanh
    BACKPLANE_TARGET_AVX2 static inline __m256 tanh(__m256 x) noexcept {
        const __m256 sign = _mm256_set1_ps(-0.0f), one = _mm256_set1_ps(1.0f);
        const __m256 ax = _mm256_andnot_ps(sign, x);
        const __m256 e = exp(_mm256_mul_ps(ax, _mm256_set1_ps(-2.0f)));
        const __m256 big = _mm256_div_ps(_mm256_sub_ps(one, e), _mm256_add_ps(one, e));
        const __m256 x2 = _mm256_mul_ps(ax, ax);
        __m256 p = _mm256_fmadd_ps(_mm256_set1_ps(tanh_c11), x2, _mm256_set1_ps(tanh_c9));
        p = _mm256_fmadd_ps(p, x2, _mm256_set1_ps(tanh_c7));
        p = _mm256_fmadd_ps(p, x2, _mm256_set1_ps(tanh_c5));
        p = _mm256_fmadd_ps(p, x2, _mm256_set1_ps(tanh_c3));
        const __m256 small = _mm256_fmadd_ps(_mm256_mul_ps(p, x2), ax, ax);
        const __m256 t = _mm256_blendv_ps(big, small, _mm256_cmp_ps(ax, _mm256_set1_ps(tanh_small), _CMP_LT_OQ));
        return keep_nan(x, _mm256_or_ps(t, _mm256_and_ps(x, sign)));
    }
    BACKPLANE_TARGET_AVX2 static inline __m256 un(un_op op, __m256 x, float s, float bias) noexcept {
        switch (op) {
        case un_op::scale: return _mm256_add_ps(_mm256_mul_ps(x, _mm256_set1_ps(s)), _mm256_set1_ps(bias));
        case un_op::sqr: return _mm256_mul_ps(x, x);
        case un_op::sqrt: return _mm256_sqrt_ps(x);
        case un_op::silu: return over_one_plus_exp(x, x);
        case un_op::gelu: {
            const __m256 x2 = _mm256_mul_ps(x, x);
            const __m256 u = _mm256_mul_ps(
                _mm256_mul_ps(_mm256_set1_ps(unary_fn::gelu_sqrt_2_over_pi), x),
                _mm256_add_ps(_mm256_set1_ps(1.0f), _mm256_mul_ps(_mm256_set1_ps(unary_fn::gelu_cubic), x2)));
            return over_one_plus_exp(x, _mm256_add_ps(u, u));
        }
        case un_op::relu: return _mm256_max_ps(x, _mm256_setzero_ps());
        case un_op::neg: return _mm256_xor_ps(x, _mm256_set1_ps(-0.0f));
        case un_op::abs: return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x);
        case un_op::sigmoid: return keep_nan(x, over_one_plus_exp(_mm256_set1_ps(1.0f), x));
        case un_op::gelu_quick:
            return over_one_plus_exp(x, _mm256_mul_ps(_mm256_set1_ps(unary_fn::gelu_quick_slope), x));
        case un_op::tanh: return tanh(x);
        case un_op::exp: return keep_nan(x, exp(x));
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

/// Calls row(in, out, n) for the thread's share of a unary node's rows: f32 rows as they
/// are, f16 rows converted to f32 and back piece by piece through a buffer (in place: a
/// piece is read before it is written).
template <class Row>
void for_unary_rows(const compute_params& p, tensor& dst, Row row) noexcept {
    const tensor& a = *dst.src[0];
    const i64 n = dst.ne[0];
    constexpr i64 piece = 256;
    float buf[piece];
    const auto [r0, r1] = split_work(dst.nrows(), p);
    for (i64 r = r0; r < r1; ++r) {
        const auto [i1, i2, i3] = row_of(r, dst.ne);
        const std::byte* pa = kernels::row_ptr(a, i1, i2, i3);
        std::byte* pd = kernels::row_ptr(dst, i1, i2, i3);
        if (dst.type == elem_type::f32) {
            row(reinterpret_cast<const float*>(pa), reinterpret_cast<float*>(pd), n);
            continue;
        }
        for (i64 i = 0; i < n; i += piece) {
            const i64 m = n - i < piece ? n - i : piece;
            const auto at = static_cast<std::size_t>(i) * sizeof(f16_t);
            to_float_row(elem_type::f16, pa + at, buf, m);
            row(buf, buf, m);
            from_float_row(elem_type::f16, buf, pd + at, m);
        }
    }
}

/// A unary op with a row operation here (un_op), or else a function of
/// core/unary_functions.hpp: its functor over the row, the same at every level.
template <class V>
void run_unary(const compute_params& p, tensor& dst, bool has_un, un_op op) noexcept {
    if (has_un) {
        const bool scale = op == un_op::scale;
        const float s = scale ? dst.param<float>(0) : 0.0f, bias = scale ? dst.param<float>(1) : 0.0f;
        for_unary_rows(p, dst, [&](const float* in, float* out, i64 n) { V::un_row(op, in, out, n, s, bias); });
        return;
    }
    unary_fn::with_unary_function(dst, [&](auto fn) {
        for_unary_rows(p, dst, [fn](const float* in, float* out, i64 n) {
            for (i64 i = 0; i < n; ++i) out[i] = fn(in[i]);
        });
    });
}

/// swiglu: silu of a piece of x into a buffer, times the same piece of g, so that dst may
/// share x's or g's memory (each element is read before the same one is written).
template <class V>
void swiglu_span(const float* x, const float* g, float* d, i64 nc) noexcept {
    constexpr i64 piece = 256;
    float act[piece];
    for (i64 i = 0; i < nc; i += piece) {
        const i64 n = nc - i < piece ? nc - i : piece;
        V::un_row(un_op::silu, x + i, act, n, 0, 0);
        V::bin_row(bin_op::mul, act, g + i, d + i, n);
    }
}

template <class V>
void run_swiglu(const compute_params& p, tensor& dst) noexcept {
    const tensor& a = *dst.src[0];
    const tensor& b = dst.src[1] != nullptr ? *dst.src[1] : a;
    const auto [x0, g0] = glu_fn::halves_of(dst);
    const auto [r0, r1] = split_work(dst.nrows(), p);
    for (i64 r = r0; r < r1; ++r) {
        const auto [i1, i2, i3] = row_of(r, dst.ne);
        swiglu_span<V>(frow(a, i1, i2, i3) + x0, frow(b, i1, i2, i3) + g0, frow_mut(dst, i1, i2, i3), dst.ne[0]);
    }
}

/// norm or rms_norm of a's rows (eps) into dst; with w (the fused rms_norm_mul), times
/// w's row (broadcast over dst's rows), a piece at a time through a buffer, so that dst
/// may be a's or w's own memory (each element is read before the same one is written).
template <class V>
void run_norm(const compute_params& p, tensor& dst, const tensor& a, const tensor* w, float eps, bool rms) noexcept {
    const i64 n = a.ne[0];
    constexpr i64 piece = 256;
    float normed[piece];
    const auto [r0, r1] = split_work(dst.nrows(), p);
    for (i64 r = r0; r < r1; ++r) {
        const auto [i1, i2, i3] = row_of(r, dst.ne);
        const float* pa = frow(a, i1, i2, i3);
        const float mean = rms ? 0.0f : V::sum(pa, n) / static_cast<float>(n);
        const float var = V::sum_sq_dev(pa, n, mean) / static_cast<float>(n);
        const float scale = 1.0f / std::sqrt(var + eps);
        float* pd = frow_mut(dst, i1, i2, i3);
        if (w == nullptr) {
            V::shift_scale(pa, pd, n, mean, scale);
            continue;
        }
        const float* pw = frow(*w, i1 % w->ne[1], i2 % w->ne[2], i3 % w->ne[3]);
        for (i64 i = 0; i < n; i += piece) {
            const i64 m = n - i < piece ? n - i : piece;
            V::shift_scale(pa + i, normed, m, mean, scale);
            V::bin_row(bin_op::mul, normed, pw + i, pd + i, m);
        }
    }
}

/// soft_max of a's rows into dst with this scale, mask and the node's other parameters
/// (soft_max_ext; the fused soft_max_scale_mask passes its scale and mask).
template <class V>
void run_soft_max(const compute_params& p, tensor& dst, const tensor& a, const tensor* mask, float scale) noexcept {
    const tensor* sinks = dst.src[2];
    const i64 n = a.ne[0];
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
/// one of one; `has` false for an op without one (the functions of
/// core/unary_functions.hpp that have no vector form here: run_unary's functor loop).
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
    case op_kind::neg: return {true, {}, un_op::neg};
    case op_kind::abs: return {true, {}, un_op::abs};
    case op_kind::sigmoid: return {true, {}, un_op::sigmoid};
    case op_kind::gelu_quick: return {true, {}, un_op::gelu_quick};
    case op_kind::tanh: return {true, {}, un_op::tanh};
    case op_kind::exp: return {true, {}, un_op::exp};
    default: return {};
    }
}

template <class V>
errc run(const compute_params& p, tensor& dst) noexcept {
    if (dst.op == op_kind::glu) {
        run_swiglu<V>(p, dst);
        return errc::ok;
    }
    if (is_unary_elementwise(dst.op)) {
        const elementwise_row r = elementwise_row_of(dst.op);
        run_unary<V>(p, dst, r.has, r.un);
        return errc::ok;
    }
    if (is_binary_elementwise(dst.op)) {
        const elementwise_row r = elementwise_row_of(dst.op);
        if (!r.has) return errc::not_supported;
        run_binary<V>(p, dst, r.bin);
        return errc::ok;
    }
    switch (dst.op) {
    case op_kind::rms_norm: run_norm<V>(p, dst, *dst.src[0], nullptr, dst.param<float>(0), true); break;
    case op_kind::norm: run_norm<V>(p, dst, *dst.src[0], nullptr, dst.param<float>(0), false); break;
    case op_kind::soft_max: run_soft_max<V>(p, dst, *dst.src[0], dst.src[1], dst.param<float>(0)); break;
    default: return errc::not_supported;
    }
    return errc::ok;
}

/// t's rows are contiguous elements of type `type`, each row aligned to its element
inline bool rows_of(const tensor* t, elem_type type, std::size_t size) noexcept {
    return t != nullptr && t->type == type && t->nb[0] == size &&
           reinterpret_cast<std::uintptr_t>(t->data) % size == 0 && t->nb[1] % size == 0 &&
           t->nb[2] % size == 0 && t->nb[3] % size == 0;
}
// rows read through float pointers: the data and every row step must be float-aligned
inline bool f32_rows(const tensor* t) noexcept { return rows_of(t, elem_type::f32, sizeof(float)); }
inline bool f16_rows(const tensor* t) noexcept { return rows_of(t, elem_type::f16, sizeof(f16_t)); }

/// A unary op computed here: a row operation or a function of core/unary_functions.hpp,
/// on f32 rows or f16 rows (dst of a's type).
inline bool unary_applies(const tensor& dst) noexcept {
    const bool computed = elementwise_row_of(dst.op).has || unary_fn::with_unary_function(dst, [](auto) {});
    return computed && ((f32_rows(&dst) && f32_rows(dst.src[0])) || (f16_rows(&dst) && f16_rows(dst.src[0])));
}

} // namespace rowwise_detail

/// True when rowwise() computes this node: an op of this family on f32 tensors whose
/// rows are contiguous (a pure function of the node).
inline bool rowwise_applies(const tensor& dst) noexcept {
    using rowwise_detail::f32_rows;
    if (dst.nelements() == 0) return false;
    if (is_unary_elementwise(dst.op)) return rowwise_detail::unary_applies(dst);
    if (!f32_rows(&dst) || !f32_rows(dst.src[0])) return false;
    if (dst.op == op_kind::glu)
        return dst.param<std::int32_t>(0) == static_cast<std::int32_t>(glu_op::swiglu) &&
               (dst.src[1] == nullptr || f32_rows(dst.src[1]));
    if (is_binary_elementwise(dst.op))
        return rowwise_detail::elementwise_row_of(dst.op).has && f32_rows(dst.src[1]);
    switch (dst.op) {
    case op_kind::rms_norm:
    case op_kind::norm: return true;
    case op_kind::soft_max: return dst.src[1] == nullptr || f32_rows(dst.src[1]);
    default: return false;
    }
}

namespace rowwise_detail {
/// f(V{}) with the row kernels of instruction-set level `level`.
template <class F> decltype(auto) at_level(isa level, F&& f) noexcept {
#if BACKPLANE_HAS_X86_KERNELS
    if (level == isa::avx512) return f(avx512{});
    if (level == isa::avx2) return f(avx2{});
#endif
    (void)level;
    return f(portable{});
}
} // namespace rowwise_detail

/// Thread p.ith's share of the node at instruction-set level p.level. Call only when
/// rowwise_applies(dst).
template <class = void>
inline errc rowwise(const compute_params& p, tensor& dst) noexcept {
    return rowwise_detail::at_level(p.level, [&](auto v) { return rowwise_detail::run<decltype(v)>(p, dst); });
}

/// The fused rms_norm_mul (core/fusion.hpp): thread p.ith's rows of mul = rms_norm(x) * w,
/// where rowwise_applies holds for both nodes.
template <class = void>
inline void rms_norm_mul(const compute_params& p, const tensor& norm, tensor& mul) noexcept {
    const tensor* w = mul.src[0] == &norm ? mul.src[1] : mul.src[0];
    rowwise_detail::at_level(p.level, [&](auto v) {
        rowwise_detail::run_norm<decltype(v)>(p, mul, *norm.src[0], w, norm.param<float>(0), true);
    });
}

/// The fused soft_max_scale_mask: thread p.ith's rows of soft_max, which reads
/// x * scale + mask (mask may be null), as soft_max_ext would. x, mask and soft_max are
/// f32 rows.
template <class = void>
inline void soft_max_of(const compute_params& p, tensor& soft_max, const tensor& x, const tensor* mask,
                        float scale) noexcept {
    rowwise_detail::at_level(p.level,
                             [&](auto v) { rowwise_detail::run_soft_max<decltype(v)>(p, soft_max, x, mask, scale); });
}

/// silu(x[i]) * g[i] for i < n (the fused glu_pair's rows of results) at level `level`.
template <class = void>
inline void swiglu_span(isa level, const float* x, const float* g, float* d, std::int64_t n) noexcept {
    rowwise_detail::at_level(level, [&](auto v) { rowwise_detail::swiglu_span<decltype(v)>(x, g, d, n); });
}

/// d[i] = a[i] + b[i] for i < n at level `level` (the fused mul_mat_add's blocks).
template <class = void>
inline void add_span(isa level, const float* a, const float* b, float* d, std::int64_t n) noexcept {
    rowwise_detail::at_level(level, [&](auto v) { decltype(v)::bin_row(rowwise_detail::bin_op::add, a, b, d, n); });
}

/// The row kernels can read t as f32 rows (f32, unit stride, float-aligned).
inline bool f32_rows(const tensor* t) noexcept { return rowwise_detail::f32_rows(t); }

} // namespace backplane::cpu::fast
