#pragma once
// Step 2, AVX-512 VNNI level: a 32-row x up-to-7-column microkernel whose vector lanes run
// along the weight rows, so that no horizontal sums are needed and one vpdpbusd does 64
// useful multiply-adds.
//
// Packing. A job repacks its 32 weight rows (a "panel") kc_blocks blocks of K at a time
// into the thread's part of the work buffer (64-byte aligned, 18 KiB, 20 KiB for the
// minimum types, so it stays in L1 while the job's b tiles stream past it from L2), block
// by block:
//
//   block kb:  for k4 = 0..7, for v = 0..1: 64 bytes = rows 16v..16v+15, values 4k4..4k4+3
//              then 32 f32 scales d, then (minimum types) 32 f32 minima m
//
// with every weight stored as its unsigned code u (weights.hpp: u = q + c for the offset
// types, value = d * (u - c); value = d * u + m for the minimum types). Each row's block
// is decoded into 32 bytes; the byte transposition is an 8x8 dword transpose in each
// 256-bit half (24 shuffles per 16 rows); the 32 scales (and minima) come from one
// gather per 8 rows. Packing costs about one 7-column tile per panel and chunk.
//
// Microkernel. For each block: two int32 accumulators per column (rows 0-15, 16-31)
// start at b's corr = -c * sum(b) (a broadcast load; 0 for the minimum types), then for
// each k4 two panel loads and, per column, one broadcast of 4 bytes of b and two vpdpbusd
// (u8 weights x s8 b): sum((q + c) * b) - c * sum(b) = sum(q * b) exactly (no saturation
// in vpdpbusd), every lane holding one row's whole block sum. The block ends with cvt,
// * da (16 lanes of row scales), and an FMA with b's scale into the f32 accumulators (the
// minimum types: one more FMA of the rows' m with b's d * sum(b)). Per block of a 32 x 7
// tile: 112 vpdpbusd + 42 float ops for 7168 multiply-adds, at two 512-bit operations per
// cycle up to 2.9x the flops per cycle of f32 FMA (measured: 2.1-2.2x for 1024^3).
// Registers: 14 f32 + 14 int32 accumulators, 2 panel vectors, 1 broadcast.
//
// The f32 accumulators go straight into dst (lanes = consecutive rows m = contiguous
// floats of dst), masked on a partial panel: stored after the first K chunk, loaded and
// added to after the others.

#include <backplane/core/detail/unroll.hpp>
#include <backplane/backends/cpu/fast/quant/plan.hpp>
#include <backplane/backends/cpu/fast/quant/weights.hpp>
#include <backplane/backends/cpu/isa.hpp>
#include <backplane/core/tensor.hpp>
#include <backplane/core/types.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#if BACKPLANE_HAS_X86_KERNELS
#include <backplane/backends/cpu/detail/x86_intrinsics.hpp>

BACKPLANE_X86_KERNELS_BEGIN

namespace backplane::cpu::fast::quant {

/// 8x8 transpose of 32-bit elements inside each 256-bit half of x[0..7]: afterwards x[k]
/// holds element k of rows 0..7 (low half) and of rows 8..15 (high half).
BACKPLANE_TARGET_AVX512 inline void transpose8_halves(__m512i x[8]) noexcept {
    const __m512i lo = _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13);
    const __m512i hi = _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15);
    const __m512i t0 = _mm512_unpacklo_epi32(x[0], x[1]);
    const __m512i t1 = _mm512_unpackhi_epi32(x[0], x[1]);
    const __m512i t2 = _mm512_unpacklo_epi32(x[2], x[3]);
    const __m512i t3 = _mm512_unpackhi_epi32(x[2], x[3]);
    const __m512i t4 = _mm512_unpacklo_epi32(x[4], x[5]);
    const __m512i t5 = _mm512_unpackhi_epi32(x[4], x[5]);
    const __m512i t6 = _mm512_unpacklo_epi32(x[6], x[7]);
    const __m512i t7 = _mm512_unpackhi_epi32(x[6], x[7]);
    const __m512i u0 = _mm512_unpacklo_epi64(t0, t2); // elements 0 | 4 of rows 0-3
    const __m512i u1 = _mm512_unpackhi_epi64(t0, t2); // 1 | 5
    const __m512i u2 = _mm512_unpacklo_epi64(t1, t3); // 2 | 6
    const __m512i u3 = _mm512_unpackhi_epi64(t1, t3); // 3 | 7
    const __m512i u4 = _mm512_unpacklo_epi64(t4, t6); // same for rows 4-7
    const __m512i u5 = _mm512_unpackhi_epi64(t4, t6);
    const __m512i u6 = _mm512_unpacklo_epi64(t5, t7);
    const __m512i u7 = _mm512_unpackhi_epi64(t5, t7);
    x[0] = _mm512_permutex2var_epi64(u0, lo, u4);
    x[1] = _mm512_permutex2var_epi64(u1, lo, u5);
    x[2] = _mm512_permutex2var_epi64(u2, lo, u6);
    x[3] = _mm512_permutex2var_epi64(u3, lo, u7);
    x[4] = _mm512_permutex2var_epi64(u0, hi, u4);
    x[5] = _mm512_permutex2var_epi64(u1, hi, u5);
    x[6] = _mm512_permutex2var_epi64(u2, hi, u6);
    x[7] = _mm512_permutex2var_epi64(u3, hi, u7);
}

/// Packs blocks [kb0, kb0 + nblk) of 32 weight rows (rows[i], any may repeat) into out,
/// prefetching the same rows pf_blocks blocks further on (the next chunk) as it goes.
template <elem_type T>
BACKPLANE_TARGET_AVX512 inline void pack_panel_avx512(const std::byte* const* rows, i64 kb0, i64 nblk,
                                                      std::byte* out, i64 pf_blocks) noexcept {
    constexpr weight_format f = format_of(T);
    constexpr i64 wb = f.bytes;
    // the 32 scales are gathered with 64-bit offsets from row 0 (rows may be far apart)
    __m512i doff[4];
BACKPLANE_UNROLL(4)
    for (int q = 0; q < 4; ++q) {
        alignas(64) std::int64_t o[8];
        for (int i = 0; i < 8; ++i) o[i] = rows[8 * q + i] - rows[0];
        doff[q] = _mm512_load_si512(o);
    }
    for (i64 kb = 0; kb < nblk; ++kb) {
        std::byte* o = out + kb * panel_block_bytes(f.has_min());
        const i64 off = (kb0 + kb) * wb;
        // a row's next chunk is one stream of many: the hardware prefetchers do not follow
        // 32 of them, so each block prefetches a line of every row ahead (never faults)
        if (pf_blocks > 0 && kb % 2 == 0)
            for (int i = 0; i < 32; ++i)
                _mm_prefetch(reinterpret_cast<const char*>(reinterpret_cast<std::uintptr_t>(rows[i]) + off +
                                                           pf_blocks * wb),
                             _MM_HINT_T0);
BACKPLANE_UNROLL(2)
        for (int v = 0; v < 2; ++v) {
            __m512i x[8];
BACKPLANE_UNROLL(8)
            for (int j = 0; j < 8; ++j)
                x[j] = _mm512_inserti64x4(_mm512_castsi256_si512(codes_avx2<T>(rows[16 * v + j] + off)),
                                          codes_avx2<T>(rows[16 * v + j + 8] + off), 1);
            transpose8_halves(x);
BACKPLANE_UNROLL(8)
            for (int k = 0; k < 8; ++k) _mm512_store_si512(reinterpret_cast<__m512i*>(o + k * 128 + v * 64), x[k]);
        }
        // scales (and minima): the dwords at each block start, 16 rows per conversion
BACKPLANE_UNROLL(2)
        for (int h = 0; h < 2; ++h) {
            const __m512i w = _mm512_inserti64x4(
                _mm512_castsi256_si512(_mm512_i64gather_epi32(doff[2 * h], rows[0] + off, 1)),
                _mm512_i64gather_epi32(doff[2 * h + 1], rows[0] + off, 1), 1);
            _mm512_store_ps(reinterpret_cast<float*>(o + 1024 + 64 * h), scales16<T>(w));
            if constexpr (f.has_min()) _mm512_store_ps(reinterpret_cast<float*>(o + 1152 + 64 * h), mins16(w));
        }
    }
}

/// A packed panel (32 rows) times a b tile of W columns over nblk blocks, stored to (or,
/// when accumulate, added to) out (row 0 of column 0; columns ldn bytes apart) under the
/// row masks.
template <int W, bool Min>
BACKPLANE_TARGET_AVX512 inline void tile_avx512(const std::byte* pa, const std::byte* pb, i64 nblk, std::byte* out,
                                                std::size_t ldn, __mmask16 mk0, __mmask16 mk1, bool accumulate) noexcept {
    __m512 f0[W], f1[W];
BACKPLANE_UNROLL(8)
    for (int n = 0; n < W; ++n) {
        const std::byte* o = out + static_cast<std::size_t>(n) * ldn;
        f0[n] = accumulate ? _mm512_maskz_loadu_ps(mk0, o) : _mm512_setzero_ps();
        f1[n] = accumulate ? _mm512_maskz_loadu_ps(mk1, o + 64) : _mm512_setzero_ps();
    }
    for (i64 kb = 0; kb < nblk; ++kb) {
        const std::byte* qa = pa + kb * panel_block_bytes(Min);
        const std::byte* qb = pb + kb * (W * rec_bytes);
        __m512i c0[W], c1[W];
BACKPLANE_UNROLL(8)
        for (int n = 0; n < W; ++n) {
            c0[n] = Min ? _mm512_setzero_si512() : _mm512_set1_epi32(load_i32(qb + W * (qk + 4) + 4 * n));
            c1[n] = c0[n];
        }
BACKPLANE_UNROLL(8)
        for (int k = 0; k < 8; ++k) {
            const __m512i a0 = _mm512_load_si512(reinterpret_cast<const __m512i*>(qa + k * 128));
            const __m512i a1 = _mm512_load_si512(reinterpret_cast<const __m512i*>(qa + k * 128 + 64));
BACKPLANE_UNROLL(8)
            for (int n = 0; n < W; ++n) {
                const __m512i bb = _mm512_set1_epi32(load_i32(qb + n * qk + 4 * k));
                c0[n] = _mm512_dpbusd_epi32(c0[n], a0, bb);
                c1[n] = _mm512_dpbusd_epi32(c1[n], a1, bb);
            }
        }
        const __m512 da0 = _mm512_load_ps(reinterpret_cast<const float*>(qa + 1024));
        const __m512 da1 = _mm512_load_ps(reinterpret_cast<const float*>(qa + 1088));
BACKPLANE_UNROLL(8)
        for (int n = 0; n < W; ++n) {
            const __m512 db = _mm512_set1_ps(load_f32(qb + W * qk + 4 * n));
            f0[n] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(c0[n]), da0), db, f0[n]);
            f1[n] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(c1[n]), da1), db, f1[n]);
            if constexpr (Min) { // + m * (d_b * sum(b))
                const __m512 sb = _mm512_set1_ps(load_f32(qb + W * (qk + 4) + 4 * n));
                f0[n] = _mm512_fmadd_ps(_mm512_load_ps(reinterpret_cast<const float*>(qa + 1152)), sb, f0[n]);
                f1[n] = _mm512_fmadd_ps(_mm512_load_ps(reinterpret_cast<const float*>(qa + 1216)), sb, f1[n]);
            }
        }
    }
BACKPLANE_UNROLL(8)
    for (int n = 0; n < W; ++n) {
        std::byte* o = out + static_cast<std::size_t>(n) * ldn;
        _mm512_mask_storeu_ps(o, mk0, f0[n]);
        _mm512_mask_storeu_ps(o + 64, mk1, f1[n]);
    }
}

/// One job (matrix bi, columns [n0, n1), rows [m0, m1)) at the AVX-512 level; panel is
/// this thread's scratch (plan::panel_bytes, 64-byte aligned). K is walked in chunks of
/// kc_blocks: the packed chunk (18 KiB) stays in L1 while the job's b tiles stream past it
/// from L2, and the partial sums go through dst.
template <elem_type T>
BACKPLANE_TARGET_AVX512 inline void job_avx512(const plan& pl, const tensor& a, tensor& dst, const std::byte* qb,
                                               std::byte* panel, const job& jb) noexcept {
    const std::byte* rows[panel_rows];
    for (i64 i = 0; i < panel_rows; ++i) rows[i] = weight_row(a, pl, jb.bi, std::min(jb.m0 + i, jb.m1 - 1));

    const i64 mv = jb.m1 - jb.m0;
    const auto mask = [](i64 n) -> __mmask16 {
        return n >= 16 ? static_cast<__mmask16>(0xffff) : n <= 0 ? 0 : static_cast<__mmask16>((1u << n) - 1u);
    };
    const __mmask16 mk0 = mask(mv);
    const __mmask16 mk1 = mask(mv - 16);
    const std::size_t ldn = dst.nb[1];
    for (i64 kc = 0; kc < pl.nblk; kc += kc_blocks) {
        const i64 kn = std::min(kc_blocks, pl.nblk - kc);
        pack_panel_avx512<T>(rows, kc, kn, panel, kc + kc_blocks < pl.nblk ? kc_blocks : 0);
        const bool acc = kc > 0;
        for (i64 n = jb.n0; n < jb.n1; n += nr_avx512) {
            const i64 w = std::min<i64>(nr_avx512, pl.N - n);
            const std::byte* pb = pl.tile(qb, jb.bi, n / nr_avx512, nr_avx512) + kc * w * rec_bytes;
            std::byte* out = dst_at(dst, pl, jb.bi, jb.m0, n);
            constexpr bool mn = format_of(T).has_min();
            switch (w) {
            case 1: tile_avx512<1, mn>(panel, pb, kn, out, ldn, mk0, mk1, acc); break;
            case 2: tile_avx512<2, mn>(panel, pb, kn, out, ldn, mk0, mk1, acc); break;
            case 3: tile_avx512<3, mn>(panel, pb, kn, out, ldn, mk0, mk1, acc); break;
            case 4: tile_avx512<4, mn>(panel, pb, kn, out, ldn, mk0, mk1, acc); break;
            case 5: tile_avx512<5, mn>(panel, pb, kn, out, ldn, mk0, mk1, acc); break;
            case 6: tile_avx512<6, mn>(panel, pb, kn, out, ldn, mk0, mk1, acc); break;
            default: tile_avx512<7, mn>(panel, pb, kn, out, ldn, mk0, mk1, acc); break;
            }
        }
    }
}

} // namespace backplane::cpu::fast::quant

BACKPLANE_X86_KERNELS_END

#endif // BACKPLANE_HAS_X86_KERNELS
