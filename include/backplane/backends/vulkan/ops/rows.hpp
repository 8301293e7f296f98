#pragma once
// sum_rows, argmax, norm, rms_norm, soft_max: not computed yet.

#include <backplane/backends/vulkan/ops/common.hpp>

namespace backplane::vulkan::detail {

inline bool plan_rows(const tensor&, const features&, dispatch&) noexcept { return false; }

} // namespace backplane::vulkan::detail
