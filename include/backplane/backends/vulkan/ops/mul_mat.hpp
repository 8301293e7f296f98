#pragma once
// mul_mat (mul_mat.comp): not computed yet.

#include <backplane/backends/vulkan/ops/common.hpp>

namespace backplane::vulkan::detail {

inline bool plan_mul_mat(const tensor&, const features&, dispatch&) noexcept { return false; }

} // namespace backplane::vulkan::detail
