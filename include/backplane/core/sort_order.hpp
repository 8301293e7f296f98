#pragma once
// The order argsort and top_k put a row in, written once for every backend whose kernels
// are C++ (the CPU's reference kernel and the CUDA kernels call it; Vulkan's sort.comp
// writes the same comparison in GLSL).
//
// ggml's sort is not stable and NaNs break its ordering, so its result is open on ties
// and NaNs. Ours is a total order on (value, index): values ascending (sort_order::asc)
// or descending (desc); equal values by ascending index in both orders; NaNs larger than
// +inf and equal to each other (last in ascending order, first in descending order);
// -0 equal to +0.

#include <backplane/core/detail/host_device.hpp>

#include <cstdint>

namespace backplane::sorting {

/// True when value x at index i comes before value y at index j (i != j) in a row sorted
/// in descending (desc) or ascending order.
BACKPLANE_HOST_DEVICE constexpr bool sorts_before(float x, std::int64_t i, float y, std::int64_t j, bool desc) noexcept {
    const bool x_nan = x != x; // NOLINT(misc-redundant-expression): true only for NaN
    const bool y_nan = y != y; // NOLINT(misc-redundant-expression)
    if (x_nan || y_nan) {
        if (x_nan && y_nan) return i < j;
        return desc ? x_nan : y_nan; // a NaN is the largest value
    }
    if (x != y) return desc ? x > y : x < y;
    return i < j;
}

} // namespace backplane::sorting
