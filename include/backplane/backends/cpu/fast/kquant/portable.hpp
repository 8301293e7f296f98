#pragma once
// Step 2, portable level: plain C++, ggml's formula per super-block pair (weight row,
// b record):
//
//   d_b * ( d * sum_j sc[j] * (sum_i q[i] * b[i] - c * bsum[j]) - dmin * sum_j m[j] * bsum[j] )
//
// with both sums over j exact integers. A weight super-block is unpacked once and used
// for up to 64 columns. Favours obviously-correct code over speed.

#include <backplane/backends/cpu/fast/kquant/decode.hpp>
#include <backplane/backends/cpu/fast/kquant/plan.hpp>
#include <backplane/core/tensor.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace backplane::cpu::fast::kquant {

/// One super-block pair: the unpacked weights u times the b record rec.
inline float block_dot(const type_traits& tt, const unpacked& u, const std::byte* rec) noexcept {
    std::int8_t b[qk];
    std::int16_t bsum[16];
    std::memcpy(b, rec, qk);
    std::memcpy(bsum, rec + rec_bsum, sizeof bsum);
    const int per = tt.sub / 16;
    std::int32_t main = 0, mins = 0;
    for (int j = 0; j < tt.subs(); ++j) {
        std::int32_t dot = 0, s = 0;
        for (int i = 0; i < tt.sub; ++i) dot += static_cast<std::int32_t>(u.q[tt.sub * j + i]) * b[tt.sub * j + i];
        for (int i = 0; i < per; ++i) s += bsum[per * j + i];
        main += u.sc[j] * (dot - tt.offset * s);
        mins += u.m[j] * s;
    }
    return load_f32(rec + rec_d) * (u.d * static_cast<float>(main) - u.dmin * static_cast<float>(mins));
}

/// One job (matrix bi, columns [n0, n1), rows [m0, m1)) at the portable level.
inline void job_portable(const plan& pl, const tensor& a, tensor& dst, const std::byte* qb, const job& jb) noexcept {
    constexpr i64 cols = 64; // columns whose sums one pass over a weight row keeps
    float acc[cols];
    unpacked u;
    for (i64 m = jb.m0; m < jb.m1; ++m) {
        const std::byte* arow = weight_row(a, pl, jb.bi, m);
        for (i64 c0 = jb.n0; c0 < jb.n1; c0 += cols) {
            const i64 nc = std::min(cols, jb.n1 - c0);
            std::fill_n(acc, nc, 0.0f);
            for (i64 kb = 0; kb < pl.nblk; ++kb) {
                unpack_block(pl.wtype, arow + static_cast<std::size_t>(kb) * pl.wbytes, u);
                for (i64 c = 0; c < nc; ++c)
                    acc[c] += block_dot(pl.tt, u, pl.column(qb, jb.bi, c0 + c) + kb * rec_bytes);
            }
            for (i64 c = 0; c < nc; ++c) store_f32(dst_at(dst, pl, jb.bi, m, c0 + c), acc[c]);
        }
    }
}

} // namespace backplane::cpu::fast::kquant
