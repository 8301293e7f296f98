#pragma once
// flash_attn_ext's reference kernel: per query row (query, head, dim-3 slice) one pass
// over the positions with an online softmax (the running maximum M, the sum S and the
// weighted sum of v, rescaled whenever M grows), as ggml's
// ggml_compute_forward_flash_attn_ext_f16_one_chunk; in f32 throughout (q is not
// rounded to k's type, the v sum is not kept in f16: core/ops/attention.hpp).

#include <backplane/backends/cpu/kernels/common.hpp>
#include <backplane/core/alibi.hpp>

#include <cmath>
#include <limits>
#include <memory>
#include <new>

namespace backplane::cpu::kernels {

namespace detail {

/// The running state of one query's online softmax over D_v values.
struct online_softmax {
    float m = -std::numeric_limits<float>::infinity(); ///< the largest score so far
    float s = 0.0f;                                    ///< sum of exp(score - m)
    float* acc;                                        ///< sum of exp(score - m) v, D_v values
    i64 dv;

    /// Takes a score: returns the weight of its value (exp(score - m) after m is updated)
    /// and rescales acc when the score is a new maximum.
    float add(float score) noexcept {
        float ms = 1.0f, vs = 1.0f;
        if (score > m) {
            ms = std::exp(m - score);
            m = score;
            for (i64 d = 0; d < dv; ++d) acc[d] *= ms;
        } else {
            vs = std::exp(score - m);
        }
        s = s * ms + vs;
        return vs;
    }
};

/// The score of position ic before the mask: scale * dot(q, k_ic), softcapped.
inline float attention_score(const float* qf, const float* kf, i64 dk, float scale, float softcap) noexcept {
    float dot = 0.0f;
    for (i64 d = 0; d < dk; ++d) dot += qf[d] * kf[d];
    const float s = dot * scale;
    return softcap != 0.0f ? softcap * std::tanh(s) : s;
}

} // namespace detail

/// flash_attn_ext (core/ops/attention.hpp): dst f32 [D_v, n_head, n_q, ne3]; threads
/// split the query rows. Returns false when there is no memory for a thread's rows of q,
/// k, v and the sum (4 rows of D floats at most).
template <class = void>
[[nodiscard]] inline bool flash_attn_ext(const compute_params& p, tensor& dst) noexcept {
    const tensor& q = *dst.src[0];
    const tensor& k = *dst.src[1];
    const tensor& v = *dst.src[2];
    const tensor* mask = dst.src[3];
    const tensor* sinks = dst.src[4];
    const i64 dk = q.ne[0], dv = v.ne[0], n_kv = k.ne[1];
    const float softcap = dst.param<float>(2);
    const float scale = softcap != 0.0f ? dst.param<float>(0) / softcap : dst.param<float>(0);
    const float max_bias = dst.param<float>(1);
    const i64 group = q.ne[2] / k.ne[2]; // query heads per key/value head
    const std::unique_ptr<float[]> buf(new (std::nothrow) float[static_cast<std::size_t>(2 * dk + 2 * dv)]);
    if (!buf) return false;
    float* qf = buf.get();
    float* kf = qf + dk;
    float* vf = kf + dk;
    float* acc = vf + dv;
    const auto [r0, r1] = split_work(q.nrows(), p);
    for (i64 r = r0; r < r1; ++r) {
        const auto [iq, h, i3] = row_of(r, q.ne);
        read_row_f32(q.type, row_ptr(q, iq, h, i3), q.nb[0], 0, dk, qf);
        const std::byte* pm = mask ? row_ptr(*mask, iq, h % mask->ne[2], i3 % mask->ne[3]) : nullptr;
        const float slope = alibi::slope(max_bias, static_cast<int>(q.ne[2]), static_cast<int>(h));
        detail::online_softmax st{.acc = acc, .dv = dv};
        for (i64 d = 0; d < dv; ++d) acc[d] = 0.0f;
        for (i64 ic = 0; ic < n_kv; ++ic) {
            const float mv = pm ? slope * load<f16_t>(pm + static_cast<std::size_t>(ic) * mask->nb[0]) : 0.0f;
            if (mv == -std::numeric_limits<float>::infinity()) continue;
            read_row_f32(k.type, row_ptr(k, ic, h / group, i3), k.nb[0], 0, dk, kf);
            const float w = st.add(detail::attention_score(qf, kf, dk, scale, softcap) + mv);
            read_row_f32(v.type, row_ptr(v, ic, h / group, i3), v.nb[0], 0, dv, vf);
            for (i64 d = 0; d < dv; ++d) acc[d] += w * vf[d];
        }
        if (sinks) st.add(load<float>(row_ptr(*sinks, 0, 0, 0) + static_cast<std::size_t>(h) * sinks->nb[0]));
        const float inv = st.s == 0.0f ? 0.0f : 1.0f / st.s;
        std::byte* out = row_ptr(dst, h, iq, i3);
        for (i64 d = 0; d < dv; ++d) store<float>(out + static_cast<std::size_t>(d) * dst.nb[0], acc[d] * inv);
    }
    return true;
}

} // namespace backplane::cpu::kernels
