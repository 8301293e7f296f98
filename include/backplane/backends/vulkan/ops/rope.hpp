#pragma once
// rope (rope.comp): not computed yet.

#include <backplane/backends/vulkan/ops/common.hpp>

namespace backplane::vulkan::detail {

inline bool plan_rope(const tensor&, const features&, dispatch&) noexcept { return false; }

} // namespace backplane::vulkan::detail
