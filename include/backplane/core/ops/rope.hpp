#pragma once
// Rotary position embedding.

#include <backplane/core/ops/node.hpp>

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
    tensor node = detail::proposed(op_kind::rope, a->type, a->ne, {a, pos});
    node.set_param(0, n_dims);
    node.set_param(1, static_cast<std::int32_t>(mode));
    node.set_param(2, freq_base);
    node.set_param(3, freq_scale);
    return detail::make_node(ctx, node, {{"a", a}, {"pos", pos}});
}

} // namespace backplane
