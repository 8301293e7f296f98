#pragma once
// dup, cont, cpy (copy.comp): f32 -> f32. One invocation per element.

#include <backplane/backends/vulkan/ops/common.hpp>

namespace backplane::vulkan::detail {

inline bool plan_copy(const tensor& t, const features&, dispatch& d) noexcept {
    const tensor* a = t.src[0];
    if (a == nullptr || t.type != elem_type::f32 || a->type != elem_type::f32) return false;
    d.shader = "cpy_f32_f32";
    d.pc = shapes_of(t);
    d.groups = groups_for(static_cast<std::uint64_t>(t.nelements()), 256);
    return true;
}

} // namespace backplane::vulkan::detail
