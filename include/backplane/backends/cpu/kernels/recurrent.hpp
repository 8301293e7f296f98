#pragma once
// ssm_conv, ssm_scan, gated_linear_attn, rwkv_wkv6 and rwkv_wkv7 (core/ops/recurrent.hpp):
// the recurrences of state-space and linear-attention models, computed in f32 in ggml's
// order of operations (the sums from the first term), so that the reference agrees with
// ggml's CPU to rounding. ssm_conv's threads split dst's rows; the others' split the
// (head, sequence) pairs, each of which runs its tokens in order.

#include <backplane/backends/cpu/kernels/common.hpp>

#include <cmath>

namespace backplane::cpu::kernels {

namespace detail {
/// Element i0 of row (i1, i2, i3) of t.
[[nodiscard]] inline const std::byte* at4(const tensor& t, i64 i0, i64 i1, i64 i2, i64 i3) noexcept {
    return row_ptr(t, i1, i2, i3) + static_cast<std::size_t>(i0) * t.nb[0];
}
/// softplus as ggml's: x itself above 20, else log(1 + exp(x)), in f32.
[[nodiscard]] inline float softplus_f32(float x) noexcept { return x > 20.0f ? x : std::log(1.0f + std::exp(x)); }
} // namespace detail

/// ssm_conv: dst[i, t, k] = sum over j < d_conv of sx[t + j, i, k] * c[j, i], in f32 from
/// j = 0. Any strides.
template <class = void>
inline void ssm_conv(const compute_params& p, tensor& dst) noexcept {
    const tensor& sx = *dst.src[0];
    const tensor& c = *dst.src[1];
    const i64 d_conv = c.ne[0];
    const auto [r0, r1] = split_work(dst.nrows(), p);
    for (i64 r = r0; r < r1; ++r) {
        const auto [t, k, i3] = row_of(r, dst.ne);
        std::byte* out = row_ptr(dst, t, k, i3);
        for (i64 i = 0; i < dst.ne[0]; ++i) {
            float sum = 0.0f;
            for (i64 j = 0; j < d_conv; ++j)
                sum += load<float>(detail::at4(sx, t + j, i, k, 0)) * load<float>(detail::at4(c, j, i, 0, 0));
            store<float>(out + static_cast<std::size_t>(i) * dst.nb[0], sum);
        }
    }
}

/// The units ssm_scan's threads split: (head, sequence) pairs.
inline i64 ssm_scan_units(const tensor& dst) noexcept { return dst.src[1]->ne[1] * dst.src[1]->ne[3]; }

/// ssm_scan (core/ops/recurrent.hpp's formula): y into dst's first x.nelements() values,
/// x's shape contiguous, then each sequence's final states. A sequence whose id is outside
/// s's states is never read: its y and states are written as zeros and the kernel returns
/// false, which the backend reports as errc::out_of_range.
template <class = void>
inline bool ssm_scan(const compute_params& p, tensor& dst) noexcept {
    const tensor& s = *dst.src[0];
    const tensor& x = *dst.src[1];
    const tensor& dt = *dst.src[2];
    const tensor& A = *dst.src[3];
    const tensor& B = *dst.src[4];
    const tensor& C = *dst.src[5];
    const tensor& ids = *dst.src[6];
    const i64 d_state = s.ne[0], head_dim = x.ne[0], n_head = x.ne[1], n_t = x.ne[2];
    const i64 heads_per_group = n_head / B.ne[1];
    const bool per_state = A.ne[0] != 1; // Mamba-1: a decay per state
    const i64 state_size = d_state * head_dim * n_head;
    auto out = [&](i64 i) { return static_cast<std::byte*>(dst.data) + static_cast<std::size_t>(i) * dst.nb[0]; };
    bool all_valid = true;
    const auto [u0, u1] = split_work(ssm_scan_units(dst), p);
    for (i64 u = u0; u < u1; ++u) {
        const i64 h = u % n_head, k = u / n_head, g = h / heads_per_group;
        const i64 id = load_i32(static_cast<const std::byte*>(ids.data) + static_cast<std::size_t>(k) * ids.nb[0]);
        const bool valid = id >= 0 && id < s.ne[3];
        all_valid = all_valid && valid;
        // the final states of (h, k); each token reads the previous token's from there
        const i64 st0 = x.nelements() + k * state_size + h * head_dim * d_state;
        for (i64 t = 0; t < n_t; ++t) {
            const float d = detail::softplus_f32(load<float>(detail::at4(dt, h, t, k, 0)));
            const float dA = per_state ? 0.0f : std::exp(d * load<float>(detail::at4(A, 0, h, 0, 0)));
            for (i64 i = 0; i < head_dim; ++i) {
                const i64 yi = ((k * n_t + t) * n_head + h) * head_dim + i;
                if (!valid) {
                    store<float>(out(yi), 0.0f);
                    for (i64 n = 0; n < d_state; ++n) store<float>(out(st0 + i * d_state + n), 0.0f);
                    continue;
                }
                const float x_dt = load<float>(detail::at4(x, i, h, t, k)) * d;
                float sum = 0.0f;
                for (i64 n = 0; n < d_state; ++n) {
                    const float prev = t == 0 ? load<float>(detail::at4(s, n, i, h, id)) : load<float>(out(st0 + i * d_state + n));
                    const float decay = per_state ? std::exp(d * load<float>(detail::at4(A, n, h, 0, 0))) : dA;
                    const float state = prev * decay + load<float>(detail::at4(B, n, g, t, k)) * x_dt;
                    sum += state * load<float>(detail::at4(C, n, g, t, k));
                    store<float>(out(st0 + i * d_state + n), state);
                }
                store<float>(out(yi), sum);
            }
        }
    }
    return all_valid;
}

/// The units the linear-attention kernels' threads split: (head, sequence) pairs.
inline i64 linear_attention_units(const tensor& dst) noexcept {
    const tensor& state = *dst.src[dst.op == op_kind::gated_linear_attn ? 4 : dst.op == op_kind::rwkv_wkv6 ? 5 : 6];
    return dst.src[dst.op == op_kind::rwkv_wkv7 ? 2 : 0]->ne[1] * state.ne[1];
}

/// gated_linear_attn, rwkv_wkv6 and rwkv_wkv7 (core/ops/recurrent.hpp's formulas), every
/// operand contiguous f32 (the rule): y into dst's first S * H * T values, then the states.
template <class = void>
inline void linear_attention(const compute_params& p, tensor& dst) noexcept {
    const bool wkv7 = dst.op == op_kind::rwkv_wkv7, wkv6 = dst.op == op_kind::rwkv_wkv6;
    const tensor& kt = *dst.src[wkv7 ? 2 : 0];
    const tensor& state = *dst.src[wkv7 ? 6 : wkv6 ? 5 : 4];
    const i64 S = kt.ne[0], H = kt.ne[1], T = kt.ne[2], n_seqs = state.ne[1], per_seq = T / n_seqs;
    const auto src = [&](std::size_t j) { return static_cast<const float*>(dst.src[j]->data); };
    float* y = static_cast<float*>(dst.data);
    float* states = y + S * H * T;
    const float* s_in = src(wkv7 ? 6 : wkv6 ? 5 : 4);
    const float scale = dst.op == op_kind::gated_linear_attn ? dst.param<float>(0) : 1.0f;
    const auto [u0, u1] = split_work(linear_attention_units(dst), p);
    for (i64 u = u0; u < u1; ++u) {
        const i64 h = u % H, seq = u / H;
        float* st = states + (seq * H + h) * S * S;           // this head's final state, [i * S + j]
        const float* st0 = s_in + (seq * H + h) * S * S;      // and where it starts
        for (i64 tt = 0; tt < per_seq; ++tt) {
            const i64 t = seq * per_seq + tt;
            const float* prev = tt == 0 ? st0 : st;
            const i64 at = (t * H + h) * S; // channel 0 of head h, token t
            float* yt = y + at;
            if (wkv7) {
                const float *r = src(0) + at, *w = src(1) + at, *k = src(2) + at, *v = src(3) + at, *a = src(4) + at,
                            *b = src(5) + at;
                for (i64 i = 0; i < S; ++i) {
                    float sa = 0.0f;
                    for (i64 j = 0; j < S; ++j) sa += a[j] * prev[i * S + j];
                    float sum = 0.0f;
                    for (i64 j = 0; j < S; ++j) {
                        const float next = prev[i * S + j] * w[j] + v[i] * k[j] + sa * b[j];
                        st[i * S + j] = next;
                        sum += next * r[j];
                    }
                    yt[i] = sum;
                }
                continue;
            }
            const float *k = src(0) + at, *v = src(1) + at, *qr = src(2) + at;
            const float* g = src(wkv6 ? 4 : 3) + at;          // td (rwkv_wkv6) or g
            const float* tf = wkv6 ? src(3) + h * S : nullptr; // per channel of head h
            for (i64 j = 0; j < S; ++j) {
                float sum = 0.0f;
                for (i64 i = 0; i < S; ++i) {
                    const float kv = v[j] * k[i];
                    const float old = prev[i * S + j];
                    if (wkv6) {
                        sum += (kv * tf[i] + old) * qr[i];
                        st[i * S + j] = old * g[i] + kv;
                    } else {
                        const float next = old * g[i] + kv;
                        sum += next * (qr[i] * scale);
                        st[i * S + j] = next;
                    }
                }
                yt[j] = sum;
            }
        }
    }
}

} // namespace backplane::cpu::kernels
