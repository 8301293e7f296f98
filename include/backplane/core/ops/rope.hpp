#pragma once
// Rotary position embedding.

#include <backplane/core/context.hpp>
#include <backplane/core/detail/describe.hpp>

#include <cmath>
#include <string>

namespace backplane {

/// Rotates pairs of the first n_dims values of each row of a [head_dim, n_head, n_tokens,
/// ne3] by pos[t] * freq_scale * freq_base^(-2i / n_dims) radians, pos an i32 vector of
/// n_tokens positions. rope_mode::normal pairs (x[2i], x[2i+1]); rope_mode::neox pairs
/// (x[i], x[i + n_dims/2]). Values past n_dims are copied unchanged (ggml's rope).
inline tensor* rope(context& ctx, tensor* a, tensor* pos, int n_dims, rope_mode mode = rope_mode::normal,
                    float freq_base = 10000.0f, float freq_scale = 1.0f) {
    detail::require_tensor("rope", "a", a);
    detail::require_tensor("rope", "pos", pos);
    if (a->type != elem_type::f32 && a->type != elem_type::f16)
        detail::op_error("rope", "a must be f32 or f16", {{"a", a}, {"pos", pos}});
    if (pos->type != elem_type::i32 || pos->ne[0] != a->ne[2] || pos->nelements() != pos->ne[0])
        detail::op_error("rope", "pos must be an i32 vector with one position per a.ne2", {{"a", a}, {"pos", pos}});
    if (n_dims <= 0 || n_dims % 2 != 0 || n_dims > a->ne[0])
        detail::op_error("rope", "n_dims must be even, positive and at most a.ne0; got " + std::to_string(n_dims),
                         {{"a", a}, {"pos", pos}});
    if (mode != rope_mode::normal && mode != rope_mode::neox)
        detail::op_error("rope", "unknown mode " + std::to_string(static_cast<int>(mode)), {{"a", a}, {"pos", pos}});
    if (!(freq_base > 0.0f) || !std::isfinite(freq_base) || !std::isfinite(freq_scale))
        detail::op_error("rope", "freq_base must be positive and finite, freq_scale finite", {{"a", a}, {"pos", pos}});
    tensor* r = ctx.new_result(a->type, a->ne);
    r->op = op_kind::rope;
    r->src[0] = a;
    r->src[1] = pos;
    r->set_param(0, n_dims);
    r->set_param(1, static_cast<std::int32_t>(mode));
    r->set_param(2, freq_base);
    r->set_param(3, freq_scale);
    return r;
}

} // namespace backplane
