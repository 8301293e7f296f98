#pragma once
// Split-state propagation: the state of every computed tensor, derived from the states of
// its sources by rules written as data (one table, `meta::rules`, that the planner reads
// and docs/meta.md prints).
//
// A rule reads "for op `op`, sources in these forms give an output in this form":
//
//   M   mirrored: whole and equal on every device, used as it is
//   P   partial sums
//   S   split along the rule's axis A (A is the axis of the first split source; `axes`
//       lists the values it may take); split sources must agree on the sizes, in
//       proportion to their extents where they broadcast
//   S|m split along A, or mirrored and cut to each device's range of A (a view, no copy);
//       a mirrored source of extent 1 along A, or one that repeats evenly within every
//       device's range, is used as it is
//   -   no source
//
// An output "S" is split along A + shift with the reference source's sizes, scaled to the
// output's extent. Rules are tried in order; the first that fits wins. A node no rule fits
// is a plan error that names the op, the tensors and their states. The view ops (view,
// reshape, permute, transpose) follow the geometry of the view instead (view_map.hpp),
// and leaves take the state the meta device's split callback gives them.
//
// Partial sources. A partial tensor that a consumer cannot take (a norm, a non-linear
// activation, an add with a mirrored tensor) is all-reduced right after the node that
// computes it, and is mirrored from then on; so is a partial graph output.

#include <backplane/backends/meta/split.hpp>
#include <backplane/core/detail/describe.hpp>
#include <backplane/core/tensor.hpp>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace backplane::meta {

/// What a rule asks of one source (see the file comment).
enum class form : std::uint8_t { none, mirrored, partial, split, split_or_slice };

/// How a mirrored source lines up with a split one when it is cut along A:
/// `tile` repeats it (element-wise ops: index i reads i mod extent), `block` stretches it
/// (mul_mat's broadcast over dims 2 and 3: index i reads i / ratio).
enum class broadcast : std::uint8_t { tile, block };

/// Extra requirements of a rule.
enum class condition : std::uint8_t {
    none,
    no_bias,        ///< scale: a partial input needs a zero bias (scaling is then linear)
    off_concat_dim, ///< concat: the split axis is not the joined dimension
    same_shape,     ///< src0 and src1 are set and have the same shape (cpy; glu's split form)
    global_heads,   ///< soft_max: dimension 2 (heads) splits only without ALiBi or sinks,
                    ///< which read each head's global index
    unpadded_axis,  ///< pad: nothing is added along the split axis
    local_heads,    ///< flash_attn_ext: heads split only without ALiBi or sinks (which read each
                    ///< head's global index) and with a mask of one plane or one per head
    unscaled_axis,  ///< upscale: the result has the source's extent along the split axis
    unrolled_axis,  ///< roll: no shift along the split axis
    image_axis,     ///< im2col: the split axis is the input's images (3; 2 in the 1-D form)
};

inline constexpr std::uint8_t axes_all = 0b1111;
/// The sources a rule reads: all of them (flash_attn_ext: 5; ssm_scan, rwkv_wkv7: 7).
inline constexpr std::size_t rule_srcs = max_srcs;
inline constexpr std::uint8_t axes_rows = 0b1110; ///< not dimension 0 (row-wise ops need whole rows)

struct rule {
    op_kind op;
    std::array<form, rule_srcs> src; ///< src0 .. src6 (a source a rule leaves out: none)
    form out;                ///< mirrored, partial or split
    std::uint8_t axes = axes_all;
    std::int8_t shift = 0;
    broadcast bc = broadcast::tile;
    condition cond = condition::none;
    bool geometric = false; ///< a view op: the split follows the view's geometry
    std::string_view note = {};
};

namespace rule_detail {
inline constexpr form M = form::mirrored, P = form::partial, S = form::split, Sm = form::split_or_slice,
                      N = form::none;
inline constexpr std::uint8_t ax(int a) { return static_cast<std::uint8_t>(1u << a); }
} // namespace rule_detail

// clang-format off
/// The propagation rules of every core op (see the file comment).
inline constexpr rule rules[] = {
    // copies
    {op_kind::dup,  {rule_detail::S, rule_detail::N}, rule_detail::S},
    {op_kind::dup,  {rule_detail::M, rule_detail::N}, rule_detail::M},
    {op_kind::dup,  {rule_detail::P, rule_detail::N}, rule_detail::P},
    {op_kind::cont, {rule_detail::S, rule_detail::N}, rule_detail::S},
    {op_kind::cont, {rule_detail::M, rule_detail::N}, rule_detail::M},
    {op_kind::cont, {rule_detail::P, rule_detail::N}, rule_detail::P},
    {op_kind::cpy,  {rule_detail::S, rule_detail::S}, rule_detail::S, axes_all, 0, broadcast::tile, condition::same_shape,
     false, "written into the destination's own slices"},
    {op_kind::cpy,  {rule_detail::M, rule_detail::M}, rule_detail::M},
    {op_kind::cpy,  {rule_detail::P, rule_detail::P}, rule_detail::P},
    // views
    {op_kind::view,      {rule_detail::S, rule_detail::N}, rule_detail::S, axes_all, 0, {}, {}, true,
     "the axis whose elements the view walks; whole segments"},
    {op_kind::view,      {rule_detail::M, rule_detail::N}, rule_detail::M, axes_all, 0, {}, {}, true},
    {op_kind::view,      {rule_detail::P, rule_detail::N}, rule_detail::P, axes_all, 0, {}, {}, true},
    {op_kind::reshape,   {rule_detail::S, rule_detail::N}, rule_detail::S, axes_all, 0, {}, {}, true,
     "the dimension that holds the split one's blocks"},
    {op_kind::reshape,   {rule_detail::M, rule_detail::N}, rule_detail::M, axes_all, 0, {}, {}, true},
    {op_kind::reshape,   {rule_detail::P, rule_detail::N}, rule_detail::P, axes_all, 0, {}, {}, true},
    {op_kind::permute,   {rule_detail::S, rule_detail::N}, rule_detail::S, axes_all, 0, {}, {}, true,
     "the axis moves with its dimension"},
    {op_kind::permute,   {rule_detail::M, rule_detail::N}, rule_detail::M, axes_all, 0, {}, {}, true},
    {op_kind::permute,   {rule_detail::P, rule_detail::N}, rule_detail::P, axes_all, 0, {}, {}, true},
    {op_kind::transpose, {rule_detail::S, rule_detail::N}, rule_detail::S, axes_all, 0, {}, {}, true,
     "axes 0 and 1 swap"},
    {op_kind::transpose, {rule_detail::M, rule_detail::N}, rule_detail::M, axes_all, 0, {}, {}, true},
    {op_kind::transpose, {rule_detail::P, rule_detail::N}, rule_detail::P, axes_all, 0, {}, {}, true},
    // element-wise, with broadcasting
    {op_kind::add, {rule_detail::Sm, rule_detail::Sm}, rule_detail::S},
    {op_kind::add, {rule_detail::M, rule_detail::M}, rule_detail::M},
    {op_kind::add, {rule_detail::P, rule_detail::P}, rule_detail::P, axes_all, 0, {}, {}, false, "sums stay sums"},
    {op_kind::sub, {rule_detail::Sm, rule_detail::Sm}, rule_detail::S},
    {op_kind::sub, {rule_detail::M, rule_detail::M}, rule_detail::M},
    {op_kind::sub, {rule_detail::P, rule_detail::P}, rule_detail::P},
    {op_kind::mul, {rule_detail::Sm, rule_detail::Sm}, rule_detail::S},
    {op_kind::mul, {rule_detail::M, rule_detail::M}, rule_detail::M},
    {op_kind::mul, {rule_detail::P, rule_detail::M}, rule_detail::P, axes_all, 0, {}, {}, false, "linear in a"},
    {op_kind::mul, {rule_detail::M, rule_detail::P}, rule_detail::P, axes_all, 0, {}, {}, false, "linear in b"},
    {op_kind::div, {rule_detail::Sm, rule_detail::Sm}, rule_detail::S},
    {op_kind::div, {rule_detail::M, rule_detail::M}, rule_detail::M},
    {op_kind::div, {rule_detail::P, rule_detail::M}, rule_detail::P, axes_all, 0, {}, {}, false, "linear in a"},
    {op_kind::scale, {rule_detail::S, rule_detail::N}, rule_detail::S},
    {op_kind::scale, {rule_detail::M, rule_detail::N}, rule_detail::M},
    {op_kind::scale, {rule_detail::P, rule_detail::N}, rule_detail::P, axes_all, 0, {}, condition::no_bias, false,
     "without a bias"},
    {op_kind::sqr,  {rule_detail::S, rule_detail::N}, rule_detail::S},
    {op_kind::sqr,  {rule_detail::M, rule_detail::N}, rule_detail::M},
    {op_kind::sqrt, {rule_detail::S, rule_detail::N}, rule_detail::S},
    {op_kind::sqrt, {rule_detail::M, rule_detail::N}, rule_detail::M},
    {op_kind::silu, {rule_detail::S, rule_detail::N}, rule_detail::S},
    {op_kind::silu, {rule_detail::M, rule_detail::N}, rule_detail::M},
    {op_kind::gelu, {rule_detail::S, rule_detail::N}, rule_detail::S},
    {op_kind::gelu, {rule_detail::M, rule_detail::N}, rule_detail::M},
    {op_kind::relu, {rule_detail::S, rule_detail::N}, rule_detail::S},
    {op_kind::relu, {rule_detail::M, rule_detail::N}, rule_detail::M},
    {op_kind::neg,  {rule_detail::S, rule_detail::N}, rule_detail::S},
    {op_kind::neg,  {rule_detail::M, rule_detail::N}, rule_detail::M},
    {op_kind::neg,  {rule_detail::P, rule_detail::N}, rule_detail::P, axes_all, 0, {}, {}, false, "sums stay sums"},
    // the functions of core/unary_functions.hpp: element by element, not linear
    {op_kind::abs, {rule_detail::S, rule_detail::N}, rule_detail::S},
    {op_kind::abs, {rule_detail::M, rule_detail::N}, rule_detail::M},
    {op_kind::sgn, {rule_detail::S, rule_detail::N}, rule_detail::S},
    {op_kind::sgn, {rule_detail::M, rule_detail::N}, rule_detail::M},
    {op_kind::step, {rule_detail::S, rule_detail::N}, rule_detail::S},
    {op_kind::step, {rule_detail::M, rule_detail::N}, rule_detail::M},
    {op_kind::tanh, {rule_detail::S, rule_detail::N}, rule_detail::S},
    {op_kind::tanh, {rule_detail::M, rule_detail::N}, rule_detail::M},
    {op_kind::sigmoid, {rule_detail::S, rule_detail::N}, rule_detail::S},
    {op_kind::sigmoid, {rule_detail::M, rule_detail::N}, rule_detail::M},
    {op_kind::exp, {rule_detail::S, rule_detail::N}, rule_detail::S},
    {op_kind::exp, {rule_detail::M, rule_detail::N}, rule_detail::M},
    {op_kind::log, {rule_detail::S, rule_detail::N}, rule_detail::S},
    {op_kind::log, {rule_detail::M, rule_detail::N}, rule_detail::M},
    {op_kind::sin, {rule_detail::S, rule_detail::N}, rule_detail::S},
    {op_kind::sin, {rule_detail::M, rule_detail::N}, rule_detail::M},
    {op_kind::cos, {rule_detail::S, rule_detail::N}, rule_detail::S},
    {op_kind::cos, {rule_detail::M, rule_detail::N}, rule_detail::M},
    {op_kind::elu, {rule_detail::S, rule_detail::N}, rule_detail::S},
    {op_kind::elu, {rule_detail::M, rule_detail::N}, rule_detail::M},
    {op_kind::hardsigmoid, {rule_detail::S, rule_detail::N}, rule_detail::S},
    {op_kind::hardsigmoid, {rule_detail::M, rule_detail::N}, rule_detail::M},
    {op_kind::hardswish, {rule_detail::S, rule_detail::N}, rule_detail::S},
    {op_kind::hardswish, {rule_detail::M, rule_detail::N}, rule_detail::M},
    {op_kind::softplus, {rule_detail::S, rule_detail::N}, rule_detail::S},
    {op_kind::softplus, {rule_detail::M, rule_detail::N}, rule_detail::M},
    {op_kind::gelu_erf, {rule_detail::S, rule_detail::N}, rule_detail::S},
    {op_kind::gelu_erf, {rule_detail::M, rule_detail::N}, rule_detail::M},
    {op_kind::gelu_quick, {rule_detail::S, rule_detail::N}, rule_detail::S},
    {op_kind::gelu_quick, {rule_detail::M, rule_detail::N}, rule_detail::M},
    {op_kind::leaky_relu, {rule_detail::S, rule_detail::N}, rule_detail::S},
    {op_kind::leaky_relu, {rule_detail::M, rule_detail::N}, rule_detail::M},
    {op_kind::clamp, {rule_detail::S, rule_detail::N}, rule_detail::S},
    {op_kind::clamp, {rule_detail::M, rule_detail::N}, rule_detail::M},
    // gated units: the fused form reads both halves of a row, the split form is element-wise
    {op_kind::glu, {rule_detail::S, rule_detail::N}, rule_detail::S, axes_rows, 0, {}, {}, false,
     "fused: whole rows (x and g are their halves)"},
    {op_kind::glu, {rule_detail::Sm, rule_detail::Sm}, rule_detail::S, axes_all, 0, broadcast::tile,
     condition::same_shape, false, "split: element by element"},
    {op_kind::glu, {rule_detail::M, rule_detail::M}, rule_detail::M, axes_all, 0, {}, {}, false,
     "the gate, when there is one, mirrored too"},
    // row-wise (dimension 0 is the row)
    {op_kind::sum_rows, {rule_detail::S, rule_detail::N}, rule_detail::S, axes_rows},
    {op_kind::sum_rows, {rule_detail::S, rule_detail::N}, rule_detail::P, rule_detail::ax(0), 0, {}, {}, false,
     "rows cut along dimension 0 sum to partial sums"},
    {op_kind::sum_rows, {rule_detail::M, rule_detail::N}, rule_detail::M},
    {op_kind::sum_rows, {rule_detail::P, rule_detail::N}, rule_detail::P},
    {op_kind::argmax, {rule_detail::S, rule_detail::N}, rule_detail::S, axes_rows, -1, {}, {}, false,
     "the result has one dimension less"},
    {op_kind::argmax, {rule_detail::M, rule_detail::N}, rule_detail::M},
    {op_kind::sum, {rule_detail::S, rule_detail::N}, rule_detail::P, axes_all, 0, {}, {}, false,
     "each device sums its part: partial sums"},
    {op_kind::sum, {rule_detail::M, rule_detail::N}, rule_detail::M},
    {op_kind::sum, {rule_detail::P, rule_detail::N}, rule_detail::P},
    {op_kind::mean, {rule_detail::S, rule_detail::N}, rule_detail::S, axes_rows},
    {op_kind::mean, {rule_detail::M, rule_detail::N}, rule_detail::M},
    {op_kind::mean, {rule_detail::P, rule_detail::N}, rule_detail::P},
    {op_kind::argsort, {rule_detail::S, rule_detail::N}, rule_detail::S, axes_rows},
    {op_kind::argsort, {rule_detail::M, rule_detail::N}, rule_detail::M},
    {op_kind::top_k, {rule_detail::S, rule_detail::N}, rule_detail::S, axes_rows},
    {op_kind::top_k, {rule_detail::M, rule_detail::N}, rule_detail::M},
    {op_kind::rms_norm, {rule_detail::S, rule_detail::N}, rule_detail::S, axes_rows},
    {op_kind::rms_norm, {rule_detail::M, rule_detail::N}, rule_detail::M},
    {op_kind::norm,     {rule_detail::S, rule_detail::N}, rule_detail::S, axes_rows},
    {op_kind::norm,     {rule_detail::M, rule_detail::N}, rule_detail::M},
    {op_kind::soft_max, {rule_detail::S, rule_detail::Sm, rule_detail::M}, rule_detail::S, axes_rows, 0, broadcast::tile,
     condition::global_heads, false,
     "the mask is cut with the rows or repeats; sinks mirrored; heads split only without ALiBi or sinks"},
    {op_kind::soft_max, {rule_detail::M, rule_detail::M, rule_detail::M}, rule_detail::M},
    {op_kind::rope, {rule_detail::S, rule_detail::M, rule_detail::M}, rule_detail::S,
     rule_detail::ax(1) | rule_detail::ax(3), 0, {}, {}, false,
     "heads (or batches) split; positions and frequency factors mirrored"},
    {op_kind::rope, {rule_detail::M, rule_detail::M, rule_detail::M}, rule_detail::M},
    // matrix products: c [M, N] = a [K, M]^T b [K, N]
    {op_kind::mul_mat, {rule_detail::M, rule_detail::M}, rule_detail::M},
    {op_kind::mul_mat, {rule_detail::S, rule_detail::M}, rule_detail::S, rule_detail::ax(1), -1, {}, {}, false,
     "column split: a's rows give c's dimension 0"},
    {op_kind::mul_mat, {rule_detail::M, rule_detail::S}, rule_detail::S, rule_detail::ax(1), 0, {}, {}, false,
     "b's columns (tokens) split"},
    {op_kind::mul_mat, {rule_detail::S, rule_detail::S}, rule_detail::P, rule_detail::ax(0), 0, {}, {}, false,
     "row split along K: partial sums"},
    {op_kind::mul_mat, {rule_detail::S, rule_detail::Sm}, rule_detail::S, rule_detail::ax(2) | rule_detail::ax(3), 0,
     broadcast::block, {}, false, "batches (attention heads) split; a broadcast over b's batches"},
    {op_kind::mul_mat, {rule_detail::Sm, rule_detail::S}, rule_detail::S, rule_detail::ax(2) | rule_detail::ax(3), 0,
     broadcast::block},
    {op_kind::mul_mat, {rule_detail::P, rule_detail::M}, rule_detail::P, axes_all, 0, {}, {}, false, "linear in a"},
    {op_kind::mul_mat, {rule_detail::M, rule_detail::P}, rule_detail::P, axes_all, 0, {}, {}, false, "linear in b"},
    // rows picked by index
    {op_kind::get_rows, {rule_detail::S, rule_detail::M}, rule_detail::S, rule_detail::ax(0), 0, {}, {}, false,
     "columns of the table split"},
    {op_kind::get_rows, {rule_detail::M, rule_detail::S}, rule_detail::S, rule_detail::ax(0), 1, {}, {}, false,
     "indices split: rows of the result split"},
    {op_kind::get_rows, {rule_detail::M, rule_detail::M}, rule_detail::M},
    {op_kind::concat, {rule_detail::S, rule_detail::S}, rule_detail::S, axes_all, 0, {}, condition::off_concat_dim},
    {op_kind::concat, {rule_detail::M, rule_detail::M}, rule_detail::M},
    {op_kind::set_rows, {rule_detail::S, rule_detail::M, rule_detail::S}, rule_detail::S, rule_detail::ax(0), 0, {}, {},
     false, "the rows' and the destination's columns split alike (a KV cache split by heads)"},
    {op_kind::set_rows, {rule_detail::M, rule_detail::M, rule_detail::M}, rule_detail::M},
    {op_kind::mul_mat_id, {rule_detail::S, rule_detail::M, rule_detail::M}, rule_detail::S, rule_detail::ax(1), -1, {},
     {}, false, "every expert's rows split: the result's dimension 0"},
    {op_kind::mul_mat_id, {rule_detail::M, rule_detail::M, rule_detail::M}, rule_detail::M},
    {op_kind::add_id, {rule_detail::S, rule_detail::S, rule_detail::M}, rule_detail::S, rule_detail::ax(0), 0, {}, {},
     false, "a's and the experts' rows split alike: the result's dimension 0"},
    {op_kind::add_id, {rule_detail::M, rule_detail::M, rule_detail::M}, rule_detail::M},
    {op_kind::pad, {rule_detail::S, rule_detail::N}, rule_detail::S, axes_all, 0, {}, condition::unpadded_axis},
    {op_kind::pad, {rule_detail::M, rule_detail::N}, rule_detail::M},
    {op_kind::arange, {rule_detail::N, rule_detail::N}, rule_detail::M, axes_all, 0, {}, {}, false,
     "no source: every device computes it whole"},
    // attention: the result [D_v, n_head, n_q, ne3] has the heads in dimension 1
    {op_kind::flash_attn_ext, {rule_detail::S, rule_detail::Sm, rule_detail::Sm, rule_detail::Sm, rule_detail::M},
     rule_detail::S, rule_detail::ax(2), -1, broadcast::block, condition::local_heads, false,
     "heads split: q's, with k's and v's (in groups under GQA) split or cut alike, the mask cut or one plane; "
     "only without ALiBi or sinks"},
    {op_kind::flash_attn_ext, {rule_detail::M, rule_detail::M, rule_detail::M, rule_detail::M, rule_detail::M},
     rule_detail::M},
    // normalisation of vision and audio models
    {op_kind::group_norm, {rule_detail::S, rule_detail::N}, rule_detail::S, rule_detail::ax(3), 0, {}, {}, false,
     "samples split: a group spans dimensions 0 and 1 and channels of 2"},
    {op_kind::group_norm, {rule_detail::M, rule_detail::N}, rule_detail::M},
    {op_kind::l2_norm, {rule_detail::S, rule_detail::N}, rule_detail::S, axes_rows},
    {op_kind::l2_norm, {rule_detail::M, rule_detail::N}, rule_detail::M},
    // small ops of vision, audio and state-space models
    {op_kind::repeat, {rule_detail::M, rule_detail::N}, rule_detail::M},
    {op_kind::repeat_back, {rule_detail::M, rule_detail::N}, rule_detail::M},
    {op_kind::cumsum, {rule_detail::S, rule_detail::N}, rule_detail::S, axes_rows},
    {op_kind::cumsum, {rule_detail::M, rule_detail::N}, rule_detail::M},
    {op_kind::tri, {rule_detail::S, rule_detail::N}, rule_detail::S, rule_detail::ax(2) | rule_detail::ax(3), 0, {}, {},
     false, "whole matrices per device"},
    {op_kind::tri, {rule_detail::M, rule_detail::N}, rule_detail::M},
    {op_kind::diag, {rule_detail::S, rule_detail::N}, rule_detail::S, rule_detail::ax(2) | rule_detail::ax(3), 0, {}, {},
     false, "whole matrices per device"},
    {op_kind::diag, {rule_detail::M, rule_detail::N}, rule_detail::M},
    {op_kind::timestep_embedding, {rule_detail::S, rule_detail::N}, rule_detail::S, rule_detail::ax(0), 1, {}, {}, false,
     "timesteps split: rows of the result split"},
    {op_kind::timestep_embedding, {rule_detail::M, rule_detail::N}, rule_detail::M},
    {op_kind::out_prod, {rule_detail::M, rule_detail::M}, rule_detail::M},
    {op_kind::out_prod, {rule_detail::M, rule_detail::S}, rule_detail::S, rule_detail::ax(0), 1, {}, {}, false,
     "b's rows split: the result's dimension 1"},
    {op_kind::out_prod, {rule_detail::S, rule_detail::S}, rule_detail::P, rule_detail::ax(1), 0, {}, {}, false,
     "split along the summed dimension: partial sums"},
    // convolutions
    {op_kind::im2col, {rule_detail::M, rule_detail::S}, rule_detail::S, rule_detail::ax(2) | rule_detail::ax(3), 0, {},
     condition::image_axis, false, "images split: each device unrolls its own (the result's last dimension)"},
    {op_kind::im2col, {rule_detail::M, rule_detail::M}, rule_detail::M, axes_all, 0, {}, {}, false,
     "every device unrolls the whole input"},
    {op_kind::conv_2d, {rule_detail::S, rule_detail::M}, rule_detail::S, rule_detail::ax(3), -1, {}, {}, false,
     "the kernel's output channels split: the result's dimension 2"},
    {op_kind::conv_2d, {rule_detail::M, rule_detail::M}, rule_detail::M},
    // image and sequence layout
    {op_kind::pool_1d, {rule_detail::S, rule_detail::N}, rule_detail::S, axes_rows, 0, {}, {}, false,
     "rows pooled apart"},
    {op_kind::pool_1d, {rule_detail::M, rule_detail::N}, rule_detail::M},
    {op_kind::pool_2d, {rule_detail::S, rule_detail::N}, rule_detail::S, rule_detail::ax(2) | rule_detail::ax(3), 0, {},
     {}, false, "planes pooled apart"},
    {op_kind::pool_2d, {rule_detail::M, rule_detail::N}, rule_detail::M},
    {op_kind::upscale, {rule_detail::S, rule_detail::N}, rule_detail::S, rule_detail::ax(2) | rule_detail::ax(3), 0, {},
     condition::unscaled_axis, false, "planes resampled apart"},
    {op_kind::upscale, {rule_detail::M, rule_detail::N}, rule_detail::M},
    {op_kind::pad_reflect_1d, {rule_detail::S, rule_detail::N}, rule_detail::S, axes_rows, 0, {}, {}, false,
     "rows reflected apart"},
    {op_kind::pad_reflect_1d, {rule_detail::M, rule_detail::N}, rule_detail::M},
    {op_kind::roll, {rule_detail::S, rule_detail::N}, rule_detail::S, axes_all, 0, {}, condition::unrolled_axis},
    {op_kind::roll, {rule_detail::M, rule_detail::N}, rule_detail::M},
    {op_kind::count_equal, {rule_detail::M, rule_detail::M}, rule_detail::M},
    {op_kind::acc, {rule_detail::M, rule_detail::M}, rule_detail::M},
    // transposed convolutions: a kernel [k, oc, ic] (1-D) or [kw, kh, oc, ic] (2-D)
    {op_kind::conv_transpose_1d, {rule_detail::S, rule_detail::M}, rule_detail::S, rule_detail::ax(1), 0, {}, {}, false,
     "the kernel's output channels split: the result's dimension 1"},
    {op_kind::conv_transpose_1d, {rule_detail::M, rule_detail::M}, rule_detail::M},
    {op_kind::conv_transpose_2d, {rule_detail::S, rule_detail::M}, rule_detail::S, rule_detail::ax(2), 0, {}, {}, false,
     "the kernel's output channels split: the result's dimension 2"},
    {op_kind::conv_transpose_2d, {rule_detail::M, rule_detail::S}, rule_detail::S, rule_detail::ax(3), 0, {}, {}, false,
     "images split"},
    {op_kind::conv_transpose_2d, {rule_detail::M, rule_detail::M}, rule_detail::M},
    {op_kind::conv_2d_dw, {rule_detail::M, rule_detail::M}, rule_detail::M, axes_all, 0, {}, {}, false,
     "every device computes it whole (a device's piece is contiguous, ggml's result may be channel-last)"},
    // windows: the channels (dimension 0) are moved apart
    {op_kind::win_part, {rule_detail::S, rule_detail::N}, rule_detail::S, rule_detail::ax(0), 0, {}, {}, false,
     "channels split"},
    {op_kind::win_part, {rule_detail::M, rule_detail::N}, rule_detail::M},
    {op_kind::win_unpart, {rule_detail::S, rule_detail::N}, rule_detail::S, rule_detail::ax(0), 0, {}, {}, false,
     "channels split"},
    {op_kind::win_unpart, {rule_detail::M, rule_detail::N}, rule_detail::M},
    {op_kind::get_rel_pos, {rule_detail::S, rule_detail::N}, rule_detail::S, rule_detail::ax(0), 0, {}, {}, false,
     "channels split"},
    {op_kind::get_rel_pos, {rule_detail::M, rule_detail::N}, rule_detail::M},
    // state-space and linear-attention recurrences
    {op_kind::ssm_conv, {rule_detail::S, rule_detail::M}, rule_detail::S, rule_detail::ax(2), 0, {}, {}, false,
     "sequences split: each device convolves its own"},
    {op_kind::ssm_conv, {rule_detail::M, rule_detail::M}, rule_detail::M},
    {op_kind::ssm_scan, {rule_detail::M, rule_detail::M, rule_detail::M, rule_detail::M, rule_detail::M, rule_detail::M,
                         rule_detail::M}, rule_detail::M, axes_all, 0, {}, {}, false,
     "outputs and states in one vector: every device scans the whole"},
    {op_kind::gated_linear_attn, {rule_detail::M, rule_detail::M, rule_detail::M, rule_detail::M, rule_detail::M},
     rule_detail::M, axes_all, 0, {}, {}, false, "outputs and states in one tensor: every device computes the whole"},
    {op_kind::rwkv_wkv6, {rule_detail::M, rule_detail::M, rule_detail::M, rule_detail::M, rule_detail::M, rule_detail::M},
     rule_detail::M, axes_all, 0, {}, {}, false, "outputs and states in one tensor: every device computes the whole"},
    {op_kind::rwkv_wkv7, {rule_detail::M, rule_detail::M, rule_detail::M, rule_detail::M, rule_detail::M, rule_detail::M,
                          rule_detail::M}, rule_detail::M, axes_all, 0, {}, {}, false,
     "outputs and states in one tensor: every device computes the whole"},
};
// clang-format on

/// "M", "P", "S", "S|m", "-".
constexpr std::string_view to_string(form f) noexcept {
    switch (f) {
    case form::none: return "-";
    case form::mirrored: return "M";
    case form::partial: return "P";
    case form::split: return "S";
    case form::split_or_slice: return "S|m";
    }
    return "?";
}

/// "(S, M) -> S along A-1, A in {1}" for messages and the docs table.
inline std::string to_string(const rule& r) {
    std::string s = "(";
    s += to_string(r.src[0]);
    bool any_split = false;
    for (std::size_t j = 0; j < rule_srcs; ++j) {
        any_split = any_split || r.src[j] == form::split || r.src[j] == form::split_or_slice;
        if (j == 0 || r.src[j] == form::none) continue;
        s += ", ";
        s += to_string(r.src[j]);
    }
    s += ") -> ";
    s += to_string(r.out);
    if (any_split && r.axes != axes_all) {
        s += ", A in {";
        bool first = true;
        for (int a = 0; a < max_dims; ++a)
            if (r.axes & (1u << a)) {
                if (!first) s += ',';
                s += std::to_string(a);
                first = false;
            }
        s += '}';
    }
    if (r.out == form::split && r.shift != 0) s += r.shift > 0 ? ", along A+1" : ", along A-1";
    if (r.geometric) s += ", by the view's geometry";
    return s;
}

/// How a source enters a device's op.
struct source_use {
    bool slice = false; ///< cut a mirrored source along `axis`: [start[d], start[d] + length[d])
    int axis = -1;
    std::vector<std::int64_t> start, length;
};

/// The result of matching a node against the rules.
struct match {
    split_state out;
    std::array<source_use, rule_srcs> use;
    const rule* by = nullptr;
};

namespace rule_detail {

inline bool is_split_form(form f) noexcept { return f == form::split || f == form::split_or_slice; }

/// Split source `s` (extent e) agrees with the reference split `r` (extent er) along the
/// axis: same segments, sizes in proportion.
inline bool compatible(const split_state& s, std::int64_t e, const split_state& r, std::int64_t er) {
    if (s.axis() != r.axis() || s.n_segments() != r.n_segments()) return false;
    for (int seg = 0; seg < r.n_segments(); ++seg)
        for (int d = 0; d < r.n_devices(); ++d)
            if (s.size(seg, d) * er != r.size(seg, d) * e) return false;
    return true;
}

/// How a mirrored source of extent e lines up with the reference split r (extent er):
/// used whole, or cut per device; nullopt when it cannot.
inline std::optional<source_use> slice_of(std::int64_t e, const split_state& r, std::int64_t er, broadcast bc) {
    source_use u;
    if (e == 1) return u;
    const int n = r.n_devices();
    const auto whole_in_every_range = [&](std::int64_t q) {
        for (int s = 0; s < r.n_segments(); ++s)
            for (int d = 0; d < n; ++d)
                if (r.start(s, d) % q != 0 || r.size(s, d) % q != 0) return false;
        return true;
    };
    if (bc == broadcast::tile && e < er && er % e == 0 && whole_in_every_range(e)) return u; // repeats within ranges
    if (r.n_segments() != 1) return std::nullopt; // one device's pieces of several segments: no single view
    std::int64_t num = 1, den = 1;
    if (e == er) {
    } else if (bc == broadcast::block && e % er == 0) {
        num = e / er;
    } else if (bc == broadcast::block && er % e == 0 && whole_in_every_range(er / e)) {
        den = er / e;
    } else {
        return std::nullopt;
    }
    u.slice = true;
    u.axis = r.axis();
    for (int d = 0; d < n; ++d) {
        u.start.push_back(r.start(0, d) * num / den);
        u.length.push_back(r.size(0, d) * num / den);
    }
    return u;
}

} // namespace rule_detail

/// The first rule that fits node `t` whose sources are in `states` (null for a missing
/// source), or the reason none does.
inline result<match> match_rule(const tensor& t, const std::array<const split_state*, rule_srcs>& states) {
    using namespace rule_detail;
    std::string tried;
    for (const rule& r : rules) {
        if (r.op != t.op || r.geometric) continue;
        if (!tried.empty()) tried += "; ";
        tried += to_string(r);
        // the reference: the first source the rule wants split that is split
        int ref = -1;
        for (int j = 0; j < static_cast<int>(rule_srcs) && ref < 0; ++j)
            if (is_split_form(r.src[static_cast<std::size_t>(j)]) && t.src[static_cast<std::size_t>(j)] != nullptr &&
                states[static_cast<std::size_t>(j)]->is_split())
                ref = j;
        const bool wants_split = r.out == form::split || (r.out == form::partial && is_split_form(r.src[0]));
        if (wants_split && ref < 0) continue;
        const split_state* rs = ref >= 0 ? states[static_cast<std::size_t>(ref)] : nullptr;
        const int axis = rs ? rs->axis() : -1;
        if (rs && !(r.axes & (1u << axis))) continue;
        const std::int64_t er = rs ? t.src[static_cast<std::size_t>(ref)]->ne[static_cast<std::size_t>(axis)] : 0;

        match m;
        bool ok = true;
        for (std::size_t j = 0; j < rule_srcs && ok; ++j) {
            const tensor* s = t.src[j];
            const form f = r.src[j];
            if (s == nullptr) {
                ok = f != form::split && f != form::partial;
                continue;
            }
            const split_state& st = *states[j];
            const std::int64_t e = axis >= 0 ? s->ne[static_cast<std::size_t>(axis)] : 0;
            switch (f) {
            case form::none: ok = false; break;
            case form::mirrored: ok = st.is_mirrored(); break;
            case form::partial: ok = st.is_partial(); break;
            case form::split:
                ok = st.is_split() && compatible(st, e, *rs, er) && (r.bc == broadcast::block || e == er);
                break;
            case form::split_or_slice:
                if (st.is_split()) {
                    ok = compatible(st, e, *rs, er) && (r.bc == broadcast::block || e == er);
                } else if (st.is_mirrored()) {
                    auto u = slice_of(e, *rs, er, r.bc);
                    ok = u.has_value();
                    if (ok) m.use[j] = std::move(*u);
                } else {
                    ok = false;
                }
                break;
            }
        }
        if (!ok) continue;
        switch (r.cond) {
        case condition::none: break;
        case condition::no_bias: ok = t.param<float>(1) == 0.0f; break;
        case condition::off_concat_dim: ok = t.param<std::int32_t>(0) != axis; break;
        case condition::same_shape: ok = t.src[0] != nullptr && t.src[1] != nullptr && t.src[0]->ne == t.src[1]->ne; break;
        case condition::global_heads: ok = axis != 2 || (!(t.param<float>(1) > 0.0f) && t.src[2] == nullptr); break;
        case condition::local_heads:
            ok = !(t.param<float>(1) > 0.0f) && t.src[4] == nullptr &&
                 (t.src[3] == nullptr || t.src[3]->ne[2] == 1 || t.src[3]->ne[2] == t.src[0]->ne[2]);
            break;
        case condition::unscaled_axis:
            ok = axis >= 0 && t.src[0] != nullptr && t.ne[static_cast<std::size_t>(axis)] == t.src[0]->ne[static_cast<std::size_t>(axis)];
            break;
        case condition::unrolled_axis: ok = axis >= 0 && t.param<std::int32_t>(static_cast<std::size_t>(axis)) == 0; break;
        case condition::image_axis: ok = axis == (t.param<std::int32_t>(conv_slot::is_2d) == 1 ? 3 : 2); break;
        case condition::unpadded_axis:
            ok = axis >= 0 && t.param<std::int32_t>(2 * static_cast<std::size_t>(axis)) == 0 &&
                 t.param<std::int32_t>(2 * static_cast<std::size_t>(axis) + 1) == 0;
            break;
        }
        if (!ok) continue;
        if (r.out == form::mirrored) {
            m.out = split_state::mirrored();
        } else if (r.out == form::partial) {
            m.out = split_state::partial();
        } else {
            const int oa = axis + r.shift;
            if (oa < 0 || oa >= max_dims) continue;
            auto scaled = rs->rescaled(oa, t.ne[static_cast<std::size_t>(oa)], er);
            if (!scaled) continue;
            m.out = std::move(*scaled);
        }
        m.by = &r;
        return m;
    }
    std::string msg = "no split rule of " + std::string(to_string(t.op)) + " takes ";
    for (std::size_t j = 0; j < rule_srcs; ++j) {
        if (t.src[j] == nullptr) continue;
        if (j) msg += " and ";
        msg += "src" + std::to_string(j) + " " + backplane::detail::describe(t.src[j]) + " (" + states[j]->to_string() +
               ")";
    }
    msg += tried.empty() ? "; the op has no rules" : "; the rules: " + tried;
    return status(errc::not_supported, msg);
}

} // namespace backplane::meta
