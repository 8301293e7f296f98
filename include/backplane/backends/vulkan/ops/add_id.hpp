#pragma once
// add_id (add_id.comp): a (source 0) plus the row of b (source 1) that the i32 expert id
// of source 2 names, per row of a. f32. One invocation per destination element; any
// strides and offsets. An id out of range reads nothing, fills its row of dst with zeros
// and raises the stream's error word, which synchronize() reports as errc::out_of_range
// (see the shader).

#include <backplane/backends/vulkan/ops/common.hpp>

namespace backplane::vulkan::detail {

inline bool plan_add_id(const tensor& t, const features&, dispatch& d) noexcept {
    const tensor* a = t.src[0];
    const tensor* b = t.src[1];
    const tensor* ids = t.src[2];
    if (a == nullptr || b == nullptr || ids == nullptr) return false;
    if (t.type != elem_type::f32 || a->type != elem_type::f32 || b->type != elem_type::f32 || ids->type != elem_type::i32)
        return false;
    std::array<std::uint32_t, 4> ne{}, nb{};
    if (!shape32(*ids, ne, nb)) return false;
    d.shader = "add_id_f32";
    d.pc = shapes_of(t);
    d.pc.prm[0] = nb[0]; // the ids' strides (offs.w is their offset, the backend's)
    d.pc.prm[1] = nb[1];
    d.groups = groups_for(static_cast<std::uint64_t>(t.nelements()), 256);
    return true;
}

} // namespace backplane::vulkan::detail
