#pragma once
// mul_mat, mul_mat_id, out_prod and get_rows: the ops that read weights.

#include <backplane/core/ops/node.hpp>

namespace backplane {

/// c = a^T b over dimension 0: a [K, M, A2, A3], b [K, N, B2, B3] -> c f32 [M, N, B2, B3],
/// with a broadcast over dims 2 and 3 (B2 a multiple of A2, B3 of A3), as ggml's mul_mat.
/// a may be quantized (its rows then contiguous); b is f32, f16 or bf16.
inline tensor* mul_mat(context& ctx, tensor* a, tensor* b) {
    detail::require_tensor("mul_mat", "a", a);
    detail::require_tensor("mul_mat", "b", b);
    return detail::make_node(ctx, detail::proposed(op_kind::mul_mat, elem_type::f32, {a->ne[1], b->ne[1], b->ne[2], b->ne[3]}, {a, b}),
                             {{"a", a}, {"b", b}});
}

/// The outer products of a's and b's columns summed over dimension 1, as ggml's out_prod:
/// a [M, K, A2, A3], b [N, K, B2, B3] -> c f32 [M, N, B2, B3], c[i, j] = sum over k of
/// a[i, k] * b[j, k], with a broadcast over dims 2 and 3 (B2 a multiple of A2, B3 of A3;
/// plane i2 of c reads plane i2 / (B2 / A2) of a). a is f32 or quantized (every type
/// ggml's CPU dequantizes: not q8_K; ggml's CPU has no f16 a) and not transposed; b is
/// f32. The reference kernels sum in double and round once (ggml: f32 in k's order).
inline tensor* out_prod(context& ctx, tensor* a, tensor* b) {
    detail::require_tensor("out_prod", "a", a);
    detail::require_tensor("out_prod", "b", b);
    return detail::make_node(ctx, detail::proposed(op_kind::out_prod, elem_type::f32, {a->ne[0], b->ne[0], b->ne[2], b->ne[3]}, {a, b}),
                             {{"a", a}, {"b", b}});
}

/// The mixture-of-experts product, as ggml's mul_mat_id: as [K, M, n_expert] holds one
/// matrix per expert (any weight type), b [K, B1, n_tokens] the activations (f32, f16,
/// bf16), ids i32 [n_used, n_tokens] the experts each token uses; the result is f32 [M,
/// n_used, n_tokens], column (s, t) = mul_mat of expert ids[s, t]'s matrix with column
/// (s % B1, t) of b (B1 is 1: one activation for every expert of a token; or n_used).
/// An expert id outside [0, n_expert) gives a zero column and an errc::out_of_range status
/// of the compute.
inline tensor* mul_mat_id(context& ctx, tensor* as, tensor* b, tensor* ids) {
    detail::require_tensor("mul_mat_id", "as", as);
    detail::require_tensor("mul_mat_id", "b", b);
    detail::require_tensor("mul_mat_id", "ids", ids);
    return detail::make_node(ctx, detail::proposed(op_kind::mul_mat_id, elem_type::f32, {as->ne[1], ids->ne[0], ids->ne[1], 1}, {as, b, ids}),
                             {{"as", as}, {"b", b}, {"ids", ids}});
}

/// Rows of a picked by the i32 indices in idx: a [E, R, A2, A3], idx [N, A2, A3] ->
/// f32 [E, N, A2, A3] (i32 when a is i32). Row idx[n, j, k] of matrix (j, k) of a.
inline tensor* get_rows(context& ctx, tensor* a, tensor* idx) {
    detail::require_tensor("get_rows", "a", a);
    detail::require_tensor("get_rows", "idx", idx);
    const elem_type rt = a->type == elem_type::i32 ? elem_type::i32 : elem_type::f32;
    return detail::make_node(ctx, detail::proposed(op_kind::get_rows, rt, {a->ne[0], idx->ne[0], idx->ne[1], idx->ne[2]}, {a, idx}),
                             {{"a", a}, {"idx", idx}});
}

} // namespace backplane
