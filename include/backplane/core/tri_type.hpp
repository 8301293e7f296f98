#pragma once
// The triangles tri keeps, written once for every backend whose kernels are C++ (the CPU's
// reference kernel and the CUDA kernels call it; Vulkan's misc.comp writes the same
// comparison in GLSL).

#include <backplane/core/detail/host_device.hpp>

#include <cstdint>

namespace backplane {

/// ggml_tri_type, with its values (op_params slot 0 of tri): the part of each matrix (dims
/// 0 and 1: column i0, row i1) that tri keeps; it zeroes the rest.
enum class tri_type : std::int32_t {
    upper_diag = 0, ///< i0 >= i1
    upper = 1,      ///< i0 > i1
    lower_diag = 2, ///< i0 <= i1
    lower = 3,      ///< i0 < i1
};

/// True when tri of type `type` keeps the element of column i0, row i1.
BACKPLANE_HOST_DEVICE constexpr bool tri_keeps(std::int32_t type, std::int64_t i0, std::int64_t i1) noexcept {
    switch (type) {
    case 0: return i0 >= i1;
    case 1: return i0 > i1;
    case 2: return i0 <= i1;
    default: return i0 < i1;
    }
}

} // namespace backplane
