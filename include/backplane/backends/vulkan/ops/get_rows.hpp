#pragma once
// get_rows (get_rows.comp): not computed yet.

#include <backplane/backends/vulkan/ops/common.hpp>

namespace backplane::vulkan::detail {

inline bool plan_get_rows(const tensor&, const features&, dispatch&) noexcept { return false; }

} // namespace backplane::vulkan::detail
