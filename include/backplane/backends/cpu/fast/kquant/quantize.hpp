#pragma once
// Step 1 of a K-quant mul_mat: the activations b quantized to q8_K into the work buffer
// (record layout in plan.hpp), each thread a share of b's columns.
//
// The codes, sums and scale are core's quantize_row_q8_K's, bit for bit, at every level,
// so results do not depend on the instruction set beyond the order of float additions.
// Next to them goes ex[], which depends on the weight type (plan.hpp).

#include <backplane/core/detail/unroll.hpp>
#include <backplane/backends/cpu/compute_params.hpp>
#include <backplane/backends/cpu/isa.hpp>
#include <backplane/backends/cpu/fast/kquant/plan.hpp>
#include <backplane/core/kquants.hpp>
#include <backplane/core/tensor.hpp>
#include <backplane/core/types.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>

#if BACKPLANE_HAS_X86_KERNELS
#include <backplane/backends/cpu/detail/x86_intrinsics.hpp>
#endif

namespace backplane::cpu::fast::kquant {

/// ex[] of a record from its sums (see plan.hpp): minimum types only.
inline void put_extras(const type_traits& tt, const block_q8_K& q, std::byte* rec) noexcept {
    if (tt.offset != 0) {
        for (int j = 0; j < 16; ++j) {
            const std::int32_t v = -tt.offset * static_cast<std::int32_t>(q.bsums[j]);
            std::memcpy(rec + rec_ex + 4 * j, &v, 4);
        }
        return;
    }
    if (!tt.has_min) return;
    const int per = tt.sub / 16; // sums of 16 per sub-block
    for (int j = 0; j < tt.subs(); ++j) {
        int s = 0;
        for (int i = 0; i < per; ++i) s += q.bsums[per * j + i];
        const float v = q.d * static_cast<float>(s);
        std::memcpy(rec + rec_ex + 4 * j, &v, 4);
    }
}

#if BACKPLANE_HAS_X86_KERNELS
BACKPLANE_X86_KERNELS_BEGIN
/// core's quantize_row_q8_K for one super-block, bit for bit, in AVX-512: the first value
/// of largest magnitude sets the scale; nearest_int(iscale * x) is the f32 product rounded
/// to nearest even, which vcvtps2dq does (|iscale * x| <= 127, so the clamp to 127 is a
/// saturating narrow); sums of 16 codes as they are.
BACKPLANE_TARGET_AVX512 inline void quantize_q8_K_avx512(const float* x, block_q8_K& q) noexcept {
    __m512 amax = _mm512_setzero_ps();
    __mmask16 nan = 0;
BACKPLANE_UNROLL(16)
    for (int i = 0; i < 16; ++i) {
        const __m512 v = _mm512_loadu_ps(x + 16 * i);
        amax = _mm512_max_ps(_mm512_abs_ps(v), amax);
        nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    }
    const float m = _mm512_reduce_max_ps(amax);
    if (m == 0.0f && nan == 0) { // every value zero: core's zero record
        std::memset(&q, 0, sizeof q);
        return;
    }
    // NaN or infinite values, or a maximum so small that -127 / max overflows: core's
    // scalar code defines what comes out
    if (nan != 0 || !(m < std::numeric_limits<float>::infinity()) || !(127.0f / m < std::numeric_limits<float>::max())) {
        quantize_row_q8_K(x, &q, qk);
        return;
    }
    float max = 0;
    const __m512 mv = _mm512_set1_ps(m);
    for (int i = 0; i < 16; ++i) {
        const __mmask16 hit = _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_loadu_ps(x + 16 * i)), mv, _CMP_EQ_OQ);
        if (hit != 0) {
            max = x[16 * i + __builtin_ctz(hit)];
            break;
        }
    }
    const float iscale = -127.0f / max;
    const __m512 is = _mm512_set1_ps(iscale);
BACKPLANE_UNROLL(16)
    for (int i = 0; i < 16; ++i) {
        const __m512i v = _mm512_cvtps_epi32(_mm512_mul_ps(is, _mm512_loadu_ps(x + 16 * i)));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(q.qs + 16 * i), _mm512_cvtsepi32_epi8(v));
        q.bsums[i] = static_cast<std::int16_t>(_mm512_reduce_add_epi32(v));
    }
    q.d = 1 / iscale;
}
BACKPLANE_X86_KERNELS_END
#endif

/// 256 values of x into the record at rec, the codes in order ord (level: the vector
/// quantizer at isa::avx512, core's otherwise; the same bits).
inline void quantize_record(const type_traits& tt, b_order ord, const float* x, std::byte* rec,
                            isa level = isa::portable) noexcept {
    block_q8_K q;
#if BACKPLANE_HAS_X86_KERNELS
    if (level == isa::avx512)
        quantize_q8_K_avx512(x, q);
    else
        quantize_row_q8_K(x, &q, qk);
#else
    (void)level;
    quantize_row_q8_K(x, &q, qk);
#endif
    if (ord == b_order::values) {
        std::memcpy(rec, q.qs, qk);
    } else {
        constexpr int from[4] = {0, 2, 1, 3}; // quarter of each 128 values
        for (int g = 0; g < 2; ++g)
            for (int i = 0; i < 4; ++i) std::memcpy(rec + 128 * g + 32 * i, q.qs + 128 * g + 32 * from[i], 32);
    }
    std::memcpy(rec + rec_bsum, q.bsums, sizeof q.bsums);
    std::memcpy(rec + rec_d, &q.d, sizeof q.d);
    put_extras(tt, q, rec);
}

/// Thread p.ith's share of b's columns quantized into qb.
inline void quantize_b(const compute_params& p, const plan& pl, const tensor& b, std::byte* qb, isa level) noexcept {
    const auto [r0, r1] = split_work(pl.matrices() * pl.N, p);
    for (i64 r = r0; r < r1; ++r) {
        const i64 bi = r / pl.N;
        const i64 n = r % pl.N;
        std::byte* col = pl.column(qb, bi, n);
        jobs::for_each_b_block<qk>(b.type, jobs::b_column(b, pl, bi, n), b.nb[0], pl.nblk,
                                   [&](i64 kb, const float* x, i64 blocks) {
                                       for (i64 i = 0; i < blocks; ++i)
                                           quantize_record(pl.tt, pl.order, x + i * qk, col + (kb + i) * rec_bytes, level);
                                   });
    }
}

} // namespace backplane::cpu::fast::kquant
