#pragma once
// The recurrences of state-space and linear-attention models: ssm_conv (Mamba's causal
// depthwise convolution over a window of tokens) and ssm_scan (the selective scan of
// Mamba-1 and Mamba-2). Each takes the recurrent state as a source and returns its
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

} // namespace backplane
