#pragma once
// The recurrences of state-space and linear-attention models: ssm_conv (Mamba's causal
// depthwise convolution over a window of tokens), ssm_scan (the selective scan of
// Mamba-1 and Mamba-2), gated_linear_attn (GLA), rwkv_wkv6 and rwkv_wkv7 (RWKV's WKV). Each takes the recurrent state as a source and returns its
// outputs followed by the final state, in one f32 tensor, as ggml lays them out.

#include <backplane/core/ops/node.hpp>

#include <cstdint>

namespace backplane {

/// ggml_ssm_conv: for sequence k, token t and channel i, result[i, t, k] = sum over
/// j < d_conv of sx[t + j, i, k] * c[j, i] (summed in f32 from j = 0). sx f32
/// [d_conv - 1 + n_t, d_inner, n_s] (the last d_conv - 1 tokens of the previous batch, then
/// n_t new ones, n_t >= 1), c f32 [d_conv, d_inner] (the convolution's taps per channel);
/// the result f32 [d_inner, n_t, n_s]. Any layout.
inline tensor* ssm_conv(context& ctx, tensor* sx, tensor* c) {
    detail::require_tensor("ssm_conv", "sx", sx);
    detail::require_tensor("ssm_conv", "c", c);
    tensor node = detail::proposed(op_kind::ssm_conv, elem_type::f32, {c->ne[1], sx->ne[0] - c->ne[0] + 1, sx->ne[2], 1}, {sx, c});
    return detail::make_node(ctx, node, {{"sx", sx}, {"c", c}});
}

/// ggml_ssm_scan: the selective scan. s f32 [d_state, head_dim, n_head, n_rs] (the states,
/// contiguous), x f32 [head_dim, n_head, n_t, n_s], dt f32 [n_head, n_t, n_s] (contiguous),
/// A f32 [d_state, n_head] (Mamba-1: a decay per state) or [1, n_head] (Mamba-2: one per
/// head, contiguous), B and C f32 [d_state, n_group, n_t, n_s] (head h reads group
/// h / (n_head / n_group)), ids i32 [n_s]: sequence k starts from state ids[k] of s (an id
/// outside [0, n_rs) is an out-of-range error when computed). x, B and C need contiguous
/// dims 0 and 1. Mamba-1 is head_dim 1 and n_head d_inner.
///
/// Per sequence k and token t, for head h with d = softplus(dt[h, t, k]) (x itself above
/// 20, else log(1 + exp(x))), every i < head_dim and state n < d_state:
///     state[n, i, h] = state[n, i, h] * exp(d * A[n or 0, h]) + B[n, g, t, k] * (x[i, h, t, k] * d)
///     y[i, h, t, k] = sum over n of state[n, i, h] * C[n, g, t, k]
/// in f32, as ggml. The result is f32 [head_dim * n_head * n_t * n_s + d_state * head_dim *
/// n_head * n_s]: y (x's shape, contiguous), then sequence k's final states at offset
/// x's elements + k * d_state * head_dim * n_head.
inline tensor* ssm_scan(context& ctx, tensor* s, tensor* x, tensor* dt, tensor* A, tensor* B, tensor* C, tensor* ids) {
    detail::require_tensor("ssm_scan", "s", s);
    detail::require_tensor("ssm_scan", "x", x);
    detail::require_tensor("ssm_scan", "dt", dt);
    detail::require_tensor("ssm_scan", "A", A);
    detail::require_tensor("ssm_scan", "B", B);
    detail::require_tensor("ssm_scan", "C", C);
    detail::require_tensor("ssm_scan", "ids", ids);
    const std::int64_t n = x->nelements() + s->ne[0] * s->ne[1] * s->ne[2] * ids->ne[0];
    tensor node = detail::proposed(op_kind::ssm_scan, elem_type::f32, {n, 1, 1, 1}, {s, x, dt, A, B, C, ids});
    return detail::make_node(ctx, node, {{"s", s}, {"x", x}, {"dt", dt}, {"A", A}, {"B", B}, {"C", C}, {"ids", ids}});
}

namespace detail {
/// A linear-attention node over the per-token operands (k's extents [S, H, T]) and the
/// state: result f32 [S * H, T + S * n_seqs].
inline tensor* linear_attention(context& ctx, op_kind op, const char* name, std::initializer_list<std::pair<const char*, tensor*>> srcs,
                                tensor* k, float scale = 0.0f) {
    for (const auto& [n, t] : srcs) require_tensor(name, n, t);
    tensor* state = (srcs.end() - 1)->second;
    tensor node = proposed(op, elem_type::f32, {k->ne[0] * k->ne[1], k->ne[2] + k->ne[0] * state->ne[1], 1, 1}, {});
    std::size_t j = 0;
    for (const auto& src : srcs) node.src[j++] = src.second;
    if (op == op_kind::gated_linear_attn) node.set_param(0, scale);
    tensor* r = nullptr;
    switch (srcs.size()) { // make_node's operand list names each source
    case 5: {
        auto it = srcs.begin();
        r = make_node(ctx, node, {{it[0].first, it[0].second}, {it[1].first, it[1].second}, {it[2].first, it[2].second},
                                  {it[3].first, it[3].second}, {it[4].first, it[4].second}});
        break;
    }
    case 6: {
        auto it = srcs.begin();
        r = make_node(ctx, node, {{it[0].first, it[0].second}, {it[1].first, it[1].second}, {it[2].first, it[2].second},
                                  {it[3].first, it[3].second}, {it[4].first, it[4].second}, {it[5].first, it[5].second}});
        break;
    }
    default: {
        auto it = srcs.begin();
        r = make_node(ctx, node, {{it[0].first, it[0].second}, {it[1].first, it[1].second}, {it[2].first, it[2].second},
                                  {it[3].first, it[3].second}, {it[4].first, it[4].second}, {it[5].first, it[5].second},
                                  {it[6].first, it[6].second}});
        break;
    }
    }
    return r;
}
} // namespace detail

/// ggml_gated_linear_attn: gated linear attention (GLA) over n_seqs sequences of T / n_seqs
/// consecutive tokens. k, v, q, g f32 [S, H, T] (head size, heads, tokens), state f32
/// [S * S * H, n_seqs] (any extents with ne1 n_seqs and that many values), all contiguous;
/// scale a finite float (op_params[0]). With the state of head h a matrix st[i, j] (i, j <
/// S; at i * S + j of head h's S * S values), per token t:
///     st[i, j] = st[i, j] * g[i, h, t] + k[i, h, t] * v[j, h, t]
///     y[j, h, t] = sum over i of st[i, j] * (q[i, h, t] * scale)
/// in f32, summed from i = 0 as ggml. The result f32 [S * H, T + S * n_seqs]: y ([S * H, T]),
/// then each sequence's final states as the state source lays them out.
inline tensor* gated_linear_attn(context& ctx, tensor* k, tensor* v, tensor* q, tensor* g, tensor* state, float scale) {
    detail::require_tensor("gated_linear_attn", "k", k);
    detail::require_tensor("gated_linear_attn", "state", state);
    return detail::linear_attention(ctx, op_kind::gated_linear_attn, "gated_linear_attn",
                                    {{"k", k}, {"v", v}, {"q", q}, {"g", g}, {"state", state}}, k, scale);
}

/// ggml_rwkv_wkv6: RWKV-6's WKV over n_seqs sequences of T / n_seqs consecutive tokens. k,
/// v, r, td (the per-token decay) f32 [S, H, T], tf (time_first, the bonus) f32 S * H values
/// ([S, H]), state as gated_linear_attn's, all contiguous. Per token t, head h:
///     y[j, h, t] = sum over i of r[i, h, t] * (tf[i, h] * k[i, h, t] * v[j, h, t] + st[i, j])
///     st[i, j] = st[i, j] * td[i, h, t] + k[i, h, t] * v[j, h, t]
/// in f32, summed from i = 0 as ggml. The result as gated_linear_attn's.
inline tensor* rwkv_wkv6(context& ctx, tensor* k, tensor* v, tensor* r, tensor* tf, tensor* td, tensor* state) {
    detail::require_tensor("rwkv_wkv6", "k", k);
    detail::require_tensor("rwkv_wkv6", "state", state);
    return detail::linear_attention(ctx, op_kind::rwkv_wkv6, "rwkv_wkv6",
                                    {{"k", k}, {"v", v}, {"r", r}, {"tf", tf}, {"td", td}, {"state", state}}, k);
}

/// ggml_rwkv_wkv7: RWKV-7's WKV over n_seqs sequences of T / n_seqs consecutive tokens. r,
/// w (decay), k, v, a, b f32 [S, H, T], state as gated_linear_attn's, all contiguous. Here
/// the state of head h is st[i, j] with i the value's channel (at i * S + j). Per token t:
///     sa = sum over j of a[j, h, t] * st[i, j]              (the state before the update)
///     st[i, j] = st[i, j] * w[j, h, t] + v[i, h, t] * k[j, h, t] + sa * b[j, h, t]
///     y[i, h, t] = sum over j of st[i, j] * r[j, h, t]
/// in f32, summed from j = 0 as ggml. The result as gated_linear_attn's.
inline tensor* rwkv_wkv7(context& ctx, tensor* r, tensor* w, tensor* k, tensor* v, tensor* a, tensor* b, tensor* state) {
    detail::require_tensor("rwkv_wkv7", "k", k);
    detail::require_tensor("rwkv_wkv7", "state", state);
    return detail::linear_attention(ctx, op_kind::rwkv_wkv7, "rwkv_wkv7",
                                    {{"r", r}, {"w", w}, {"k", k}, {"v", v}, {"a", a}, {"b", b}, {"state", state}}, k);
}

} // namespace backplane
