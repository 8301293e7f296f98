#pragma once
// Step 2, portable level: plain C++ integer dot products of weight blocks with the
// quantized b (tile width 1), one f32 multiply-add per block pair. The compiler
// vectorises the 32-term integer sums for the baseline target; this path is the one
// every machine can run, so it favours obviously-correct code over speed.

#include <backplane/backends/cpu/fast/quant/plan.hpp>
#include <backplane/core/tensor.hpp>
#include <backplane/core/types.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace backplane::cpu::fast::quant {

/// Weight block kb of a row as signed values and its scale.
inline float unpack_weight_block(elem_type t, const std::byte* row, i64 kb, std::int8_t q[qk]) noexcept {
    if (t == elem_type::q8_0) {
        const std::byte* blk = row + kb * static_cast<i64>(sizeof(block_q8_0));
        std::memcpy(q, blk + sizeof(f16_t), qk);
        return f16_to_f32(load_f16(blk));
    }
    const std::byte* blk = row + kb * static_cast<i64>(sizeof(block_q4_0));
    std::uint8_t nib[qk / 2];
    std::memcpy(nib, blk + sizeof(f16_t), sizeof nib);
    for (int j = 0; j < qk / 2; ++j) {
        q[j] = static_cast<std::int8_t>((nib[j] & 0x0f) - 8);
        q[j + qk / 2] = static_cast<std::int8_t>((nib[j] >> 4) - 8);
    }
    return f16_to_f32(load_f16(blk));
}

inline std::int32_t dot_i8(const std::int8_t* x, const std::int8_t* y) noexcept {
    std::int32_t s = 0;
    for (int j = 0; j < qk; ++j) s += static_cast<std::int32_t>(x[j]) * static_cast<std::int32_t>(y[j]);
    return s;
}

/// One job (matrix bi, columns [n0, n1), rows [m0, m1)) at the portable level.
inline void job_portable(const plan& pl, const tensor& a, tensor& dst, const std::byte* qb, const job& jb) noexcept {
    constexpr i64 cols = 64; // columns whose sums one pass over a weight row keeps
    float acc[cols];
    std::int8_t qa[qk];
    std::int8_t qbv[qk];
    for (i64 m = jb.m0; m < jb.m1; ++m) {
        const std::byte* arow = weight_row(a, pl, jb.bi, m);
        for (i64 c0 = jb.n0; c0 < jb.n1; c0 += cols) {
            const i64 nc = std::min(cols, jb.n1 - c0);
            std::fill_n(acc, nc, 0.0f);
            for (i64 kb = 0; kb < pl.nblk; ++kb) {
                const float da = unpack_weight_block(pl.wtype, arow, kb, qa);
                for (i64 c = 0; c < nc; ++c) {
                    const std::byte* col = pl.tile(qb, jb.bi, c0 + c, 1); // qs[nblk][32] | d[nblk] | ...
                    std::memcpy(qbv, col + kb * qk, qk);
                    acc[c] += da * load_f32(col + pl.nblk * qk + kb * 4) * static_cast<float>(dot_i8(qa, qbv));
                }
            }
            for (i64 c = 0; c < nc; ++c) store_f32(dst_at(dst, pl, jb.bi, m, c0 + c), acc[c]);
        }
    }
}

} // namespace backplane::cpu::fast::quant
