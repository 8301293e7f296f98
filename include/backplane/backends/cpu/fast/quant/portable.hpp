#pragma once
// Step 2, portable level: plain C++ integer dot products of weight blocks (their codes u,
// weights.hpp) with the quantized b (tile width 1), one f32 multiply-add per block pair.
// The compiler vectorises the 32-term integer sums for the baseline target; this path is
// the one every machine can run, so it favours obviously-correct code over speed.

#include <backplane/backends/cpu/fast/quant/plan.hpp>
#include <backplane/core/tensor.hpp>
#include <backplane/core/types.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace backplane::cpu::fast::quant {

inline std::int32_t dot_u8_i8(const std::uint8_t* x, const std::int8_t* y) noexcept {
    std::int32_t s = 0;
    for (int j = 0; j < qk; ++j) s += static_cast<std::int32_t>(x[j]) * static_cast<std::int32_t>(y[j]);
    return s;
}

/// One job (matrix bi, columns [n0, n1), rows [m0, m1)) at the portable level: per block
/// pair, the byte products of the codes u with b plus corr (offset types), times the two
/// scales; the minimum types add m * corr (corr = d_b * sum(b)) instead.
inline void job_portable(const plan& pl, const tensor& a, tensor& dst, const std::byte* qb, const job& jb) noexcept {
    constexpr i64 cols = 64; // columns whose sums one pass over a weight row keeps
    const weight_format f = format_of(pl.wtype);
    float acc[cols];
    std::uint8_t u[qk];
    std::int8_t qbv[qk];
    for (i64 m = jb.m0; m < jb.m1; ++m) {
        const std::byte* arow = weight_row(a, pl, jb.bi, m);
        for (i64 c0 = jb.n0; c0 < jb.n1; c0 += cols) {
            const i64 nc = std::min(cols, jb.n1 - c0);
            std::fill_n(acc, nc, 0.0f);
            for (i64 kb = 0; kb < pl.nblk; ++kb) {
                const std::byte* blk = arow + kb * f.bytes;
                block_codes(f, blk, u);
                const float da = block_scale(f, blk);
                const float ma = f.has_min() ? block_min(f, blk) : 0.0f;
                for (i64 c = 0; c < nc; ++c) {
                    const std::byte* col = pl.tile(qb, jb.bi, c0 + c, 1); // qs[nblk][32] | d[nblk] | corr[nblk]
                    std::memcpy(qbv, col + kb * qk, qk);
                    const float db = load_f32(col + pl.nblk * qk + kb * 4);
                    const std::byte* corr = col + pl.nblk * (qk + 4) + kb * 4;
                    const std::int32_t dot = dot_u8_i8(u, qbv);
                    acc[c] += f.has_min() ? da * db * static_cast<float>(dot) + ma * load_f32(corr)
                                          : da * db * static_cast<float>(dot + load_i32(corr));
                }
            }
            for (i64 c = 0; c < nc; ++c) store_f32(dst_at(dst, pl, jb.bi, m, c0 + c), acc[c]);
        }
    }
}

} // namespace backplane::cpu::fast::quant
