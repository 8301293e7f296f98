#pragma once
// Step 1 of a quantized mul_mat: the activations b, quantized to q8_0 into the work
// buffer (layout in plan.hpp), each thread a share of b's rows.
//
// Every level produces the same bits as quantize_activation_block below (ggml's x86 CPU
// backend's q8_0 of activations), so results do not depend on the instruction set beyond
// the order of float additions, and the quantized b is exactly what ggml's dot products
// read on x86. Next to each block go the f16 scale widened to
// f32 and corr (plan.hpp): -c * sum(q), which the unsigned-by-signed byte products of the
// kernels need (c, the weight type's offset, > 0), or d * sum(q) in f32 (c = 0: the
// weights' minimum term).

#include <backplane/backends/cpu/compute_params.hpp>
#include <backplane/backends/cpu/fast/quant/plan.hpp>
#include <backplane/backends/cpu/isa.hpp>
#include <backplane/core/tensor.hpp>
#include <backplane/core/types.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#if BACKPLANE_HAS_X86_KERNELS
#include <backplane/backends/cpu/detail/x86_intrinsics.hpp>
#endif

namespace backplane::cpu::fast::quant {

inline void put_block_extras(const column_ref& col, i64 kb, float d, std::int32_t sum, std::int32_t c) noexcept {
    std::memcpy(col.d + kb * col.dstep, &d, sizeof d);
    if (c == 0) {
        const float s = d * static_cast<float>(sum);
        std::memcpy(col.corr + kb * col.dstep, &s, sizeof s);
    } else {
        const std::int32_t corr = -c * sum;
        std::memcpy(col.corr + kb * col.dstep, &corr, sizeof corr);
    }
}

/// Below this largest magnitude a block's scale is 0 in f16, so its codes multiply zero,
/// and 127 / amax may overflow: such blocks get codes 0 (ggml's, saturated ones).
inline constexpr float tiny_amax = 0x1p-100f;

/// One block of activations to q8_0 as ggml's CPU backend quantizes them for its dot
/// products on x86: d = amax / 127 stored in f16, q = x * (127 / amax) rounded to nearest
/// even. The inverse scale 127 / amax is not always core's 1 / d (quantize_row_q8_0,
/// ggml's reference quantizer of weights) to the last bit, and a last-bit difference moves
/// a code by one now and then: such a code changed the logits of a llama.cpp file by an
/// NMSE of 1e-6 against llama.cpp's, where they otherwise agree to 1e-14.
inline void quantize_activation_block(const float* x, block_q8_0& y) noexcept {
    float amax = 0.0f;
    for (int j = 0; j < qk; ++j) amax = std::fmax(amax, std::fabs(x[j]));
    const float id = amax > tiny_amax ? 127.0f / amax : 0.0f;
    y.d = f32_to_f16(amax / 127.0f);
    for (int j = 0; j < qk; ++j) y.qs[j] = static_cast<std::int8_t>(std::nearbyint(x[j] * id));
}

/// Portable: quantize_activation_block, block by block.
inline void quantize_row_portable(const float* x, i64 nblk, const column_ref& col, std::int32_t c) noexcept {
    for (i64 kb = 0; kb < nblk; ++kb) {
        block_q8_0 blk;
        quantize_activation_block(x + kb * qk, blk);
        std::int32_t sum = 0;
        for (int j = 0; j < qk; ++j) sum += blk.qs[j];
        std::memcpy(col.qs + kb * col.step, blk.qs, qk);
        put_block_extras(col, kb, f16_to_f32(blk.d), sum, c);
    }
}

#if BACKPLANE_HAS_X86_KERNELS
BACKPLANE_X86_KERNELS_BEGIN

/// d rounded to f16 and back, as the stored scale (round to nearest even, like f32_to_f16).
BACKPLANE_TARGET_AVX2 inline float f16_round(float d) noexcept {
    // (the vector forms: clang's _cvtss_sh macro is a C99 compound literal)
    return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtps_ph(_mm_set_ss(d), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)));
}

BACKPLANE_TARGET_AVX2 inline void quantize_row_avx2(const float* x, i64 nblk, const column_ref& col,
                                                    std::int32_t c) noexcept {
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (i64 kb = 0; kb < nblk; ++kb) {
        const float* xb = x + kb * qk;
        __m256 v[4];
        for (int i = 0; i < 4; ++i) v[i] = _mm256_loadu_ps(xb + 8 * i);
        __m256 m = _mm256_max_ps(_mm256_max_ps(_mm256_and_ps(v[0], abs_mask), _mm256_and_ps(v[1], abs_mask)),
                                 _mm256_max_ps(_mm256_and_ps(v[2], abs_mask), _mm256_and_ps(v[3], abs_mask)));
        __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        h = _mm_max_ps(h, _mm_movehl_ps(h, h));
        h = _mm_max_ss(h, _mm_movehdup_ps(h));
        const float amax = _mm_cvtss_f32(h);
        const float d = amax / 127.0f;
        const float id = amax > tiny_amax ? 127.0f / amax : 0.0f;
        const __m256 s = _mm256_set1_ps(id);
        __m256i q[4];
        for (int i = 0; i < 4; ++i) q[i] = _mm256_cvtps_epi32(_mm256_mul_ps(v[i], s)); // MXCSR: nearest even
        // |q| <= 127, so the saturating packs are exact
        __m256i sum = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
        const __m256i p16 = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(col.qs + kb * col.step),
                            _mm256_permutevar8x32_epi32(p16, perm));
        __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256(sum, 1));
        s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4e));
        s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xb1));
        put_block_extras(col, kb, f16_round(d), _mm_cvtsi128_si32(s4), c);
    }
}

BACKPLANE_TARGET_AVX512 inline void quantize_row_avx512(const float* x, i64 nblk, const column_ref& col,
                                                        std::int32_t c) noexcept {
    for (i64 kb = 0; kb < nblk; ++kb) {
        const float* xb = x + kb * qk;
        const __m512 v0 = _mm512_loadu_ps(xb);
        const __m512 v1 = _mm512_loadu_ps(xb + 16);
        const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
        const float d = amax / 127.0f;
        const float id = amax > tiny_amax ? 127.0f / amax : 0.0f;
        const __m512 s = _mm512_set1_ps(id);
        const __m512i q0 = _mm512_cvtps_epi32(_mm512_mul_ps(v0, s)); // MXCSR: nearest even
        const __m512i q1 = _mm512_cvtps_epi32(_mm512_mul_ps(v1, s));
        std::byte* qs = col.qs + kb * col.step;
        _mm_storeu_si128(reinterpret_cast<__m128i*>(qs), _mm512_cvtepi32_epi8(q0));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(qs + 16), _mm512_cvtepi32_epi8(q1));
        put_block_extras(col, kb, f16_round(d), _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1)), c);
    }
}

BACKPLANE_X86_KERNELS_END
#endif // BACKPLANE_HAS_X86_KERNELS

/// nblk blocks of x quantized into the column col at the given level (exposed for tests).
inline void quantize_row(isa level, const float* x, i64 nblk, const column_ref& col, std::int32_t c) noexcept {
#if BACKPLANE_HAS_X86_KERNELS
    if (level == isa::avx512) return quantize_row_avx512(x, nblk, col, c);
    if (level == isa::avx2) return quantize_row_avx2(x, nblk, col, c);
#endif
    (void)level;
    quantize_row_portable(x, nblk, col, c);
}

/// Thread p.ith's share of b's rows quantized into qb (layout of `level`).
inline void quantize_b(const compute_params& p, const plan& pl, const tensor& b, std::byte* qb, isa level) noexcept {
    const int nr = tile_width(level, pl.N);
    const auto [r0, r1] = split_work(pl.matrices() * pl.N, p);
    for (i64 r = r0; r < r1; ++r) {
        const i64 bi = r / pl.N;
        const i64 n = r % pl.N;
        const column_ref col = pl.column(qb, bi, n, nr);
        jobs::for_each_b_block<qk>(b.type, jobs::b_column(b, pl, bi, n), b.nb[0], pl.nblk,
                                   [&](i64 kb, const float* x, i64 blocks) {
                                       quantize_row(level, x, blocks, col.from_block(kb), pl.corr_c);
                                   });
    }
}

} // namespace backplane::cpu::fast::quant
