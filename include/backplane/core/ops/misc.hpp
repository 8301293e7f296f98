#pragma once
// Small ops of vision, audio and state-space models: repeat and repeat_back (tiling and
// its adjoint), cumsum (running sums along rows), tri (a triangle of each matrix), diag
// (a vector spread onto a diagonal), timestep_embedding (diffusion models' sinusoidal
// embedding), count_equal (matches of two i32 tensors) and acc (a tensor added into a
// view of another).

#include <backplane/core/ops/node.hpp>
#include <backplane/core/tri_type.hpp>

#include <cstdint>

namespace backplane {

/// ggml_repeat_4d: a tiled to extents (ne0, ne1, ne2, ne3), each a multiple of a's
/// (element i is a's element i mod a.ne; an empty a repeats only to an empty result).
/// f32, f16, bf16 or i32 (ggml's CPU: those and i16), the result of a's type; a in any
/// layout (ggml's CPU: unit-stride rows).
inline tensor* repeat_4d(context& ctx, tensor* a, std::int64_t ne0, std::int64_t ne1, std::int64_t ne2,
                         std::int64_t ne3) {
    detail::require_tensor("repeat", "a", a);
    return detail::make_node(ctx, detail::proposed(op_kind::repeat, a->type, {ne0, ne1, ne2, ne3}, {a}), {{"a", a}});
}

/// ggml_repeat: a tiled to b's extents (b gives only its shape; it is not a source).
inline tensor* repeat(context& ctx, tensor* a, tensor* b) {
    detail::require_tensor("repeat", "b", b);
    return repeat_4d(ctx, a, b->ne[0], b->ne[1], b->ne[2], b->ne[3]);
}

/// ggml_repeat_back, repeat's adjoint: a (f32) summed down to b's extents, each of which
/// divides a's: element i of the result is the sum of a's elements j with j mod b.ne ==
/// i. Summed in double and rounded once (ggml adds the tiles in f32, in order). b gives
/// only its shape.
inline tensor* repeat_back(context& ctx, tensor* a, tensor* b) {
    detail::require_tensor("repeat_back", "a", a);
    detail::require_tensor("repeat_back", "b", b);
    return detail::make_node(ctx, detail::proposed(op_kind::repeat_back, a->type, b->ne, {a}), {{"a", a}, {"b", b}});
}

/// ggml_cumsum: the running sums along each row of a (f32), y[i] = x[0] + ... + x[i],
/// added in f32 from the left as ggml does; a in any layout (ggml: unit-stride rows).
inline tensor* cumsum(context& ctx, tensor* a) {
    detail::require_tensor("cumsum", "a", a);
    return detail::make_node(ctx, detail::proposed(op_kind::cumsum, a->type, a->ne, {a}), {{"a", a}});
}

/// ggml_tri: each square matrix of a (f32, ne0 == ne1: column i0, row i1) with the
/// triangle `type` keeps (core/tri_type.hpp) and zeros elsewhere. type in op_params slot
/// 0. a in any layout (ggml: contiguous).
inline tensor* tri(context& ctx, tensor* a, tri_type type) {
    detail::require_tensor("tri", "a", a);
    tensor node = detail::proposed(op_kind::tri, a->type, a->ne, {a});
    node.set_param(0, static_cast<std::int32_t>(type));
    return detail::make_node(ctx, node, {{"a", a}});
}

/// ggml_diag: each row of a [n, 1, ne2, ne3] (f32) spread onto the diagonal of an n x n
/// matrix: result [n, n, ne2, ne3], element (i0, i1) = a[i0] where i0 == i1, else 0. a in
/// any layout (ggml: unit-stride rows).
inline tensor* diag(context& ctx, tensor* a) {
    detail::require_tensor("diag", "a", a);
    return detail::make_node(ctx, detail::proposed(op_kind::diag, a->type, {a->ne[0], a->ne[0], a->ne[2], a->ne[3]}, {a}),
                             {{"a", a}});
}

/// ggml_count_equal: the number of positions at which a and b (i32, one shape, any
/// layouts) hold the same value, as one i64 (ggml's CPU: i32 only).
inline tensor* count_equal(context& ctx, tensor* a, tensor* b) {
    detail::require_tensor("count_equal", "a", a);
    detail::require_tensor("count_equal", "b", b);
    return detail::make_node(ctx, detail::proposed(op_kind::count_equal, elem_type::i64, {1, 1, 1, 1}, {a, b}),
                             {{"a", a}, {"b", b}});
}

/// ggml_acc: a (f32, contiguous) with b (f32, any layout) added into the view of a with
/// b's extents, byte strides (4, nb1, nb2, nb3) and byte offset `offset`: the result (a's
/// shape) holds a[x] + b[j] where element x of a is element j of the view, a[x] elsewhere.
/// op_params as ggml stores them: nb1, nb2, nb3, offset, inplace (0: the result has
/// memory of its own; the graph allocator may still give it a's). The view must lie inside
/// a, its strides and offset be multiples of 4 bytes, and it must not overlap itself (each
/// stride at least the span of the dimensions below it; ggml does not check, and its
/// threads then race): core/acc_view.hpp.
inline tensor* acc(context& ctx, tensor* a, tensor* b, std::size_t nb1, std::size_t nb2, std::size_t nb3,
                   std::size_t offset) {
    detail::require_tensor("acc", "a", a);
    detail::require_tensor("acc", "b", b);
    tensor node = detail::proposed(op_kind::acc, a->type, a->ne, {a, b});
    const std::size_t params[] = {nb1, nb2, nb3, offset};
    for (std::size_t i = 0; i < 4; ++i) // ggml's 32-bit slots; a value they cannot hold is refused as negative
        node.set_param(i, params[i] <= 0x7fffffff ? static_cast<std::int32_t>(params[i]) : std::int32_t{-1});
    node.set_param(4, std::int32_t{0});
    return detail::make_node(ctx, node, {{"a", a}, {"b", b}});
}

/// ggml_timestep_embedding: the sinusoidal embedding of each timestep t = timesteps[i]
/// (f32 [N]): result f32 [dim, N], row i = cos(t * f_j) for j < dim / 2, then sin(t * f_j),
/// f_j = exp(-log(max_period) * j / (dim / 2)), and 0 last when dim is odd. Computed in
/// f32 as ggml (the reference kernels too). op_params: dim, max_period (both at least 1).
inline tensor* timestep_embedding(context& ctx, tensor* timesteps, int dim, int max_period = 10000) {
    detail::require_tensor("timestep_embedding", "timesteps", timesteps);
    tensor node = detail::proposed(op_kind::timestep_embedding, elem_type::f32, {dim, timesteps->ne[0], 1, 1}, {timesteps});
    node.set_param(0, static_cast<std::int32_t>(dim));
    node.set_param(1, static_cast<std::int32_t>(max_period));
    return detail::make_node(ctx, node, {{"timesteps", timesteps}});
}

} // namespace backplane
