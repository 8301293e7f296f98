#pragma once
// Normalisations: norm, rms_norm, l2_norm (each row of dimension 0) and group_norm (groups
// of channels, dimension 2). All take f32 and give f32 of their source's shape; eps sits
// in op_params as ggml puts it (slot 0; group_norm's in slot 1, after n_groups). ggml's C
// builders have no default eps: the defaults here are the usual ones of each op's models.
//
// Accuracy: the CPU reference and CUDA kernels compute in double and round the result
// once; ggml's CPU rounds the mean, the variance and the scale to f32 on the way (norm's
// values near the mean then differ from ggml's by a few ulps of 1). Vulkan sums in f32.

#include <backplane/core/ops/node.hpp>

#include <cstdint>

namespace backplane {

namespace detail {
inline tensor* row_norm(context& ctx, op_kind op, tensor* a, float eps) {
    require_tensor(to_string(op), "a", a);
    tensor node = proposed(op, a->type, a->ne, {a});
    node.set_param(0, eps);
    return make_node(ctx, node, {{"a", a}});
}
} // namespace detail

/// Each row scaled to unit root mean square: x / sqrt(mean(x^2) + eps).
inline tensor* rms_norm(context& ctx, tensor* a, float eps = 1e-6f) {
    return detail::row_norm(ctx, op_kind::rms_norm, a, eps);
}
/// Each row shifted to zero mean and scaled to unit variance: (x - mean) / sqrt(var + eps).
inline tensor* norm(context& ctx, tensor* a, float eps = 1e-5f) { return detail::row_norm(ctx, op_kind::norm, a, eps); }

/// ggml_l2_norm: each row scaled to unit Euclidean length, x / max(sqrt(sum(x^2)), eps)
/// (a row shorter than eps is divided by eps instead: zeros stay zeros).
inline tensor* l2_norm(context& ctx, tensor* a, float eps = 1e-12f) {
    return detail::row_norm(ctx, op_kind::l2_norm, a, eps);
}

/// ggml_group_norm: the channels (dimension 2) of a [W, H, C, N] cut into n_groups groups
/// of ceil(C / n_groups) channels (the last non-empty group shorter, later ones empty:
/// core/channel_groups.hpp), and each group of each sample n (all its W * H * channels
/// values together) shifted to zero mean and scaled to unit variance: (x - mean) /
/// sqrt(var + eps). n_groups (at least 1) in op_params slot 0, eps (finite, not negative;
/// ggml does not check it) in slot 1.
inline tensor* group_norm(context& ctx, tensor* a, int n_groups, float eps = 1e-6f) {
    detail::require_tensor("group_norm", "a", a);
    tensor node = detail::proposed(op_kind::group_norm, a->type, a->ne, {a});
    node.set_param(0, static_cast<std::int32_t>(n_groups));
    node.set_param(1, eps);
    return detail::make_node(ctx, node, {{"a", a}});
}

} // namespace backplane
