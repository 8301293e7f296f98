#pragma once
// Which ops the Vulkan backend computes, and how each becomes a dispatch. One header per
// op family under ops/ (with its shader file under shaders/) plans a node: it picks the
// shader variant for the node's types and the device's features, fills the push
// constants and counts the workgroups, or says no.
//
// The support matrix is in docs/backends/vulkan.md. A node must be one its op defines
// (is_defined, core/op_traits.hpp); the Vulkan side adds its own limits: element counts
// and strides must fit 32-bit indices, and a tensor must fit one storage-buffer binding
// (maxStorageBufferRange, 128 MiB on lavapipe).

#include <backplane/core/op_traits.hpp>
#include <backplane/backends/vulkan/ops/add_id.hpp>
#include <backplane/backends/vulkan/ops/attention.hpp>
#include <backplane/backends/vulkan/ops/common.hpp>
#include <backplane/backends/vulkan/ops/concat.hpp>
#include <backplane/backends/vulkan/ops/conv.hpp>
#include <backplane/backends/vulkan/ops/copy.hpp>
#include <backplane/backends/vulkan/ops/elementwise.hpp>
#include <backplane/backends/vulkan/ops/get_rows.hpp>
#include <backplane/backends/vulkan/ops/glu.hpp>
#include <backplane/backends/vulkan/ops/image.hpp>
#include <backplane/backends/vulkan/ops/layout.hpp>
#include <backplane/backends/vulkan/ops/misc.hpp>
#include <backplane/backends/vulkan/ops/mul_mat.hpp>
#include <backplane/backends/vulkan/ops/rope.hpp>
#include <backplane/backends/vulkan/ops/recurrent.hpp>
#include <backplane/backends/vulkan/ops/rows.hpp>
#include <backplane/backends/vulkan/ops/set_rows.hpp>
#include <backplane/backends/vulkan/ops/sort.hpp>
#include <backplane/core/tensor.hpp>

namespace backplane::vulkan::detail {

/// The dispatch computing t on a device with features f; false when there is none.
inline bool plan(const tensor& t, const features& f, dispatch& d) noexcept {
    if (is_unary_elementwise(t.op) || is_binary_elementwise(t.op)) return plan_elementwise(t, f, d);
    if (is_copy(t.op)) return plan_copy(t, f, d);
    switch (t.op) {
    case op_kind::mul_mat: return plan_mul_mat(t, f, d);
    case op_kind::mul_mat_id: return plan_mul_mat_id(t, f, d);
    case op_kind::flash_attn_ext: return plan_flash_attn(t, f, d);
    case op_kind::sum_rows:
    case op_kind::mean:
    case op_kind::sum:
    case op_kind::argmax:
    case op_kind::norm:
    case op_kind::rms_norm:
    case op_kind::l2_norm:
    case op_kind::group_norm:
    case op_kind::soft_max: return plan_rows(t, f, d);
    case op_kind::argsort:
    case op_kind::top_k: return plan_sort(t, f, d);
    case op_kind::get_rows: return plan_get_rows(t, f, d);
    case op_kind::rope: return plan_rope(t, f, d);
    case op_kind::concat: return plan_concat(t, f, d);
    case op_kind::glu: return plan_glu(t, f, d);
    case op_kind::set_rows: return plan_set_rows(t, f, d);
    case op_kind::pad: return plan_pad(t, f, d);
    case op_kind::arange: return plan_arange(t, f, d);
    case op_kind::add_id: return plan_add_id(t, f, d);
    case op_kind::repeat:
    case op_kind::repeat_back:
    case op_kind::cumsum:
    case op_kind::tri:
    case op_kind::diag:
    case op_kind::timestep_embedding:
    case op_kind::out_prod:
    case op_kind::count_equal:
    case op_kind::acc: return plan_misc(t, f, d);
    case op_kind::im2col: return plan_im2col(t, f, d);
    case op_kind::conv_2d: return plan_conv_2d(t, f, d);
    case op_kind::conv_transpose_1d:
    case op_kind::conv_transpose_2d: return plan_conv_transpose(t, f, d);
    case op_kind::conv_2d_dw: return plan_conv_2d_dw(t, f, d);
    case op_kind::win_part:
    case op_kind::win_unpart:
    case op_kind::get_rel_pos: return plan_window(t, f, d);
    case op_kind::pool_1d:
    case op_kind::pool_2d: return plan_pool(t, f, d);
    case op_kind::upscale: return plan_upscale(t, f, d);
    case op_kind::pad_reflect_1d:
    case op_kind::roll: return plan_remap(t, f, d);
    case op_kind::ssm_conv:
    case op_kind::ssm_scan:
    case op_kind::gated_linear_attn:
    case op_kind::rwkv_wkv6:
    case op_kind::rwkv_wkv7: return plan_recurrent(t, f, d);
    default: return false;
    }
}

/// Whether t's memory can be described to a shader: 32-bit extents and strides, one
/// binding.
inline bool bindable(const tensor& t, const features& f) noexcept {
    std::array<std::uint32_t, 4> ne{}, nb{};
    return shape32(t, ne, nb) && t.nbytes() <= f.max_binding;
}

/// Why a node cannot be computed (check()).
enum class refusal : std::uint8_t {
    none,    ///< it can: `d` holds its dispatch
    op,      ///< no kernel for its op with these types on this device
    binding, ///< a tensor exceeds 32-bit indices or one storage-buffer binding
};

/// Plans t (not a view or a leaf) into `d`, or says why not.
inline refusal check(const tensor& t, const features& f, dispatch& d) noexcept {
    if (!is_defined(t) || !plan(t, f, d)) return refusal::op;
    if (!bindable(t, f)) return refusal::binding;
    for (const tensor* s : t.src)
        if (s != nullptr && !bindable(*s, f)) return refusal::binding;
    return refusal::none;
}

/// Whether the Vulkan backend computes t (views and leafs: always).
inline bool supports(const tensor& t, const features& f) noexcept {
    if (t.op == op_kind::none || is_view_op(t.op)) return true;
    dispatch d;
    return check(t, f, d) == refusal::none;
}

} // namespace backplane::vulkan::detail
