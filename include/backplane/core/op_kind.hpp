#pragma once
// The op kinds: the enumeration alone, for the tensor that names its op. What each op is
// (its name, sources, parameters, rules) is its row in core/op_traits.hpp.

#include <cstddef>
#include <cstdint>

namespace backplane {

/// The core op set. View ops (view, reshape, permute, transpose) compute nothing.
enum class op_kind : std::uint8_t {
    none, // a leaf: data provided from outside
    dup,
    cpy,
    cont,
    view,
    reshape,
    permute,
    transpose,
    add,
    sub,
    mul,
    div,
    scale,
    sqr,
    sqrt,
    sum_rows,
    mul_mat,
    get_rows,
    rms_norm,
    norm,
    soft_max,
    rope,
    silu,
    gelu,
    relu,
    concat,
    argmax,
    neg,
    abs,
    sgn,
    step,
    tanh,
    sigmoid,
    exp,
    log,
    sin,
    cos,
    elu,
    hardsigmoid,
    hardswish,
    softplus,
    gelu_erf,
    gelu_quick,
    leaky_relu,
    clamp,
    glu,
    sum,
    mean,
    argsort,
    top_k,
    set_rows,
    pad,
    arange,
    mul_mat_id,
    add_id,
    flash_attn_ext,
    // normalisation of vision and audio models
    group_norm,
    l2_norm,
    // small ops of vision, audio and state-space models
    repeat,
    repeat_back,
    cumsum,
    tri,
    diag,
    timestep_embedding,
    out_prod,
    // convolutions
    im2col,
    conv_2d,
    // image and sequence layout (core/ops/image.hpp)
    pool_1d,
    pool_2d,
    upscale,
    pad_reflect_1d,
    roll,
    count_equal,
    acc,
    // transposed and depthwise convolutions, windows (core/ops/conv.hpp, core/ops/image.hpp)
    conv_transpose_1d,
    conv_transpose_2d,
    conv_2d_dw,
    win_part,
    win_unpart,
    get_rel_pos,
    // state-space and linear-attention recurrences (core/ops/recurrent.hpp)
    ssm_conv,
    ssm_scan,
    gated_linear_attn,
    rwkv_wkv6,
    rwkv_wkv7,
};
inline constexpr std::size_t op_kind_count = static_cast<std::size_t>(op_kind::rwkv_wkv7) + 1;

/// True for the values op_kind names (a value cast from a wider integer may not be).
constexpr bool is_valid(op_kind op) noexcept { return static_cast<std::size_t>(op) < op_kind_count; }

} // namespace backplane
