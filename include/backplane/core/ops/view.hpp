#pragma once
// Views and copies: view, reshape, permute, transpose (compute nothing: they alias their
// source's memory) and dup, cont, cpy (compute a copy, cpy with type conversion), and
// set_rows (writes rows into its destination's memory).

#include <backplane/core/ops/node.hpp>

#include <array>
#include <cstdint>
#include <string>

namespace backplane {

namespace detail {
inline tensor* make_view(context& ctx, op_kind op, tensor* a, const std::array<std::int64_t, max_dims>& ne,
                         const std::array<std::size_t, max_dims>& nb, std::size_t offset) {
    tensor* r = ctx.new_view(a, a->type, ne, nb, offset);
    r->op = op;
    r->src[0] = a;
    return r;
}

/// Checks `node` (from proposed(), with target's type and extents) and makes it in ctx as
/// a view of target: a node that writes its result into target's memory (cpy, set_rows).
inline tensor* make_node_into(context& ctx, tensor node, tensor* target, operand_list operands) {
    node.nb = target->nb;
    require_defined(node, operands);
    tensor* r = ctx.new_view(target, target->type, target->ne, target->nb, 0);
    r->op = node.op;
    r->src = node.src;
    r->op_params = node.op_params;
    return r;
}
} // namespace detail

/// A view of `a` with shape `ne`, strides `nb` (bytes) and byte `offset`, all in a's memory.
/// The whole view must lie inside a's bytes.
inline tensor* view(context& ctx, tensor* a, const std::array<std::int64_t, max_dims>& ne,
                    const std::array<std::size_t, max_dims>& nb, std::size_t offset) {
    detail::require_tensor("view", "a", a);
    for (std::size_t i = 0; i < max_dims; ++i)
        if (ne[i] < 0) detail::op_error("view", "negative extent " + std::to_string(ne[i]), {{"a", a}});
    if (ne[0] % block_size(a->type) != 0)
        detail::op_error("view", "row length " + std::to_string(ne[0]) + " is not a multiple of the block size",
                         {{"a", a}});
    const auto span = checked_nbytes(a->type, ne, nb);
    if (!span)
        detail::op_error("view", "view " + detail::shape_string(ne) + " spans more bytes than a size_t holds",
                         {{"a", a}});
    // written so that a huge offset cannot wrap around: offset + span <= a's bytes
    if (*span > a->nbytes() || offset > a->nbytes() - *span)
        detail::op_error("view",
                         "view of " + std::to_string(*span) + " bytes at offset " + std::to_string(offset) +
                             " " + detail::shape_string(ne) + " exceeds the source's " +
                             std::to_string(a->nbytes()) + " bytes",
                         {{"a", a}});
    return detail::make_view(ctx, op_kind::view, a, ne, nb, offset);
}

/// 1-d to 4-d views with rows of the source's type; strides in bytes.
inline tensor* view_1d(context& ctx, tensor* a, std::int64_t ne0, std::size_t offset) {
    detail::require_tensor("view", "a", a);
    std::array<std::int64_t, max_dims> ne{ne0, 1, 1, 1};
    return view(ctx, a, ne, contiguous_strides(a->type, ne), offset);
}
inline tensor* view_2d(context& ctx, tensor* a, std::int64_t ne0, std::int64_t ne1, std::size_t nb1,
                       std::size_t offset) {
    detail::require_tensor("view", "a", a);
    std::array<std::int64_t, max_dims> ne{ne0, ne1, 1, 1};
    auto nb = contiguous_strides(a->type, ne);
    nb[1] = nb1;
    nb[2] = nb[3] = nb1 * static_cast<std::size_t>(ne1);
    return view(ctx, a, ne, nb, offset);
}
inline tensor* view_3d(context& ctx, tensor* a, std::int64_t ne0, std::int64_t ne1, std::int64_t ne2,
                       std::size_t nb1, std::size_t nb2, std::size_t offset) {
    detail::require_tensor("view", "a", a);
    std::array<std::int64_t, max_dims> ne{ne0, ne1, ne2, 1};
    auto nb = contiguous_strides(a->type, ne);
    nb[1] = nb1;
    nb[2] = nb2;
    nb[3] = nb2 * static_cast<std::size_t>(ne2);
    return view(ctx, a, ne, nb, offset);
}
inline tensor* view_4d(context& ctx, tensor* a, std::int64_t ne0, std::int64_t ne1, std::int64_t ne2,
                       std::int64_t ne3, std::size_t nb1, std::size_t nb2, std::size_t nb3, std::size_t offset) {
    detail::require_tensor("view", "a", a);
    std::array<std::int64_t, max_dims> ne{ne0, ne1, ne2, ne3};
    std::array<std::size_t, max_dims> nb{type_size(a->type), nb1, nb2, nb3};
    return view(ctx, a, ne, nb, offset);
}

/// `a` (contiguous) seen with another shape of the same number of elements.
inline tensor* reshape(context& ctx, tensor* a, std::initializer_list<std::int64_t> shape) {
    detail::require_tensor("reshape", "a", a);
    if (shape.size() == 0 || shape.size() > max_dims)
        detail::op_error("reshape", "a shape has 1 to 4 dimensions, got " + std::to_string(shape.size()), {{"a", a}});
    std::array<std::int64_t, max_dims> ne{1, 1, 1, 1};
    std::size_t i = 0;
    for (auto n : shape) ne[i++] = n;
    if (!a->is_contiguous()) detail::op_error("reshape", "the source must be contiguous (use cont first)", {{"a", a}});
    const auto n = checked_nelements(ne); // no signed overflow on absurd extents
    if (!n || *n != a->nelements())
        detail::op_error("reshape", "cannot reshape " + std::to_string(a->nelements()) + " elements to " +
                                        detail::shape_string(ne), {{"a", a}});
    if (ne[0] % block_size(a->type) != 0)
        detail::op_error("reshape", "new row length " + std::to_string(ne[0]) + " is not a multiple of the block size",
                         {{"a", a}});
    return detail::make_view(ctx, op_kind::reshape, a, ne, contiguous_strides(a->type, ne), 0);
}
/// reshape to the shape of `like`.
inline tensor* reshape_as(context& ctx, tensor* a, const tensor* like) {
    detail::require_tensor("reshape", "like", like);
    return reshape(ctx, a, {like->ne[0], like->ne[1], like->ne[2], like->ne[3]});
}

/// Axes moved: source dimension i becomes dimension axes[i] of the result (ggml's rule).
inline tensor* permute(context& ctx, tensor* a, int ax0, int ax1, int ax2, int ax3) {
    detail::require_tensor("permute", "a", a);
    const int ax[max_dims] = {ax0, ax1, ax2, ax3};
    bool seen[max_dims] = {};
    for (int x : ax) {
        if (x < 0 || x >= max_dims || seen[x])
            detail::op_error("permute",
                             "axes (" + std::to_string(ax0) + ", " + std::to_string(ax1) + ", " + std::to_string(ax2) +
                                 ", " + std::to_string(ax3) + ") are not a permutation of 0..3",
                             {{"a", a}});
        seen[x] = true;
    }
    if (is_quantized(a->type) && ax0 != 0)
        detail::op_error("permute", "a quantized tensor's dimension 0 (its blocks) must stay first", {{"a", a}});
    std::array<std::int64_t, max_dims> ne{};
    std::array<std::size_t, max_dims> nb{};
    for (std::size_t i = 0; i < max_dims; ++i) {
        ne[static_cast<std::size_t>(ax[i])] = a->ne[i];
        nb[static_cast<std::size_t>(ax[i])] = a->nb[i];
    }
    tensor* r = detail::make_view(ctx, op_kind::permute, a, ne, nb, 0);
    for (std::size_t i = 0; i < max_dims; ++i) r->set_param(i, ax[i]);
    return r;
}

/// Dimensions 0 and 1 swapped.
inline tensor* transpose(context& ctx, tensor* a) {
    detail::require_tensor("transpose", "a", a);
    if (is_quantized(a->type)) detail::op_error("transpose", "cannot transpose a quantized tensor", {{"a", a}});
    tensor* r = permute(ctx, a, 1, 0, 2, 3);
    r->op = op_kind::transpose;
    return r;
}

namespace detail {
inline tensor* copy_like(context& ctx, op_kind op, tensor* a, elem_type type) {
    return make_node(ctx, proposed(op, type, a->ne, {a}), {{"a", a}});
}
} // namespace detail

/// A contiguous copy of `a` (same type and shape).
inline tensor* dup(context& ctx, tensor* a) {
    detail::require_tensor("dup", "a", a);
    return detail::copy_like(ctx, op_kind::dup, a, a->type);
}

/// A contiguous copy of `a`; non-contiguous views become contiguous.
inline tensor* cont(context& ctx, tensor* a) {
    detail::require_tensor("cont", "a", a);
    return detail::copy_like(ctx, op_kind::cont, a, a->type);
}

/// Copies `a` into `b` (same number of elements; converts the type). The result aliases
/// `b`: computing it writes b's memory, and later readers should use the result.
inline tensor* cpy(context& ctx, tensor* a, tensor* b) {
    detail::require_tensor("cpy", "a", a);
    detail::require_tensor("cpy", "b", b);
    return detail::make_node_into(ctx, detail::proposed(op_kind::cpy, b->type, b->ne, {a, b}), b, {{"a", a}, {"b", b}});
}

/// Writes the rows of b into rows of a picked by idx, converted to a's type (the KV-cache
/// write), as ggml's set_rows: a [E, R, A2, A3] (f32, f16, bf16, q8_0, q4_0), b [E, N,
/// A2, A3] (f32, f16, bf16), idx i32 or i64 [N, I2, I3] with I2 dividing A2 and I3
/// dividing A3: a[:, idx[n, j % I2, k % I3], j, k] = b[:, n, j, k]. The result is a (its
/// memory, like cpy's); rows no index names keep their values. A quantized row is
/// quantized as core's quantize_row_* does. An index outside [0, R) writes nothing and
/// is an errc::out_of_range status of the compute; a row named twice gets one of its
/// writes (which one is unspecified, as in ggml).
inline tensor* set_rows(context& ctx, tensor* a, tensor* b, tensor* idx) {
    detail::require_tensor("set_rows", "a", a);
    detail::require_tensor("set_rows", "b", b);
    detail::require_tensor("set_rows", "idx", idx);
    return detail::make_node_into(ctx, detail::proposed(op_kind::set_rows, a->type, a->ne, {b, idx, a}), a,
                                  {{"a", a}, {"b", b}, {"idx", idx}});
}

} // namespace backplane
