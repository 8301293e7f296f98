#pragma once
// argsort and top_k (sort.comp): one workgroup per row sorts the row in shared memory
// (a bitonic sort over the row padded to a power of two) and writes the first ne0
// indices of the destination's row.
//
//   op               result   source 0
//   argsort, top_k   i32      f32, f16*, bf16*      (*: needs 16-bit storage)
//
// Rows of up to 1024 values (8 KiB of shared memory), or 4096 where the device has
// 32 KiB of shared memory per workgroup; longer rows are refused (the scheduler places
// the node on another backend). Any strides and offsets.

#include <backplane/backends/vulkan/ops/common.hpp>

namespace backplane::vulkan::detail {

namespace sort_detail {

/// The variants: {f32, f16, bf16} x {1024, 4096 values per row}.
inline constexpr std::string_view shaders[3][2] = {
    {"sort_f32_1024", "sort_f32_4096"}, {"sort_f16_1024", "sort_f16_4096"}, {"sort_bf16_1024", "sort_bf16_4096"}};

/// Shared memory per value of a row (its value and its index).
inline constexpr std::size_t bytes_per_value = 8;

/// The longest row a workgroup of this device sorts.
constexpr std::int64_t max_row(const features& f) noexcept {
    return f.shared_memory >= 4096 * bytes_per_value ? 4096 : 1024;
}

} // namespace sort_detail

inline bool plan_sort(const tensor& t, const features& f, dispatch& d) noexcept {
    using namespace sort_detail;
    const tensor* a = t.src[0];
    if (a == nullptr || t.type != elem_type::i32 || a->ne[0] > max_row(f)) return false;
    const std::size_t big = a->ne[0] > 1024 ? 1 : 0;
    switch (a->type) {
    case elem_type::f32: d.shader = shaders[0][big]; break;
    case elem_type::f16: d.shader = f.storage16 ? shaders[1][big] : std::string_view{}; break;
    case elem_type::bf16: d.shader = f.storage16 ? shaders[2][big] : std::string_view{}; break;
    default: d.shader = {};
    }
    if (d.shader.empty()) return false;
    d.pc = shapes_of(t);
    d.pc.prm[0] = t.op == op_kind::top_k || t.param<std::int32_t>(0) == static_cast<std::int32_t>(sort_order::desc);
    d.groups = groups_per_item(static_cast<std::uint64_t>(a->ne[1] * a->ne[2] * a->ne[3]));
    return true;
}

} // namespace backplane::vulkan::detail
