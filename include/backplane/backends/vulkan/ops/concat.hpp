#pragma once
// concat (concat.comp): not computed yet.

#include <backplane/backends/vulkan/ops/common.hpp>

namespace backplane::vulkan::detail {

inline bool plan_concat(const tensor&, const features&, dispatch&) noexcept { return false; }

} // namespace backplane::vulkan::detail
