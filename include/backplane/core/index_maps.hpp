#pragma once
// The index maps of pad_reflect_1d and roll, written once for the C++ kernels (the CPU
// reference kernel and the CUDA kernel; Vulkan's remap.comp writes them in GLSL): the
// index of the source element that a result index takes along one dimension.

#include <backplane/core/detail/host_device.hpp>

#include <cstdint>

namespace backplane {

/// pad_reflect_1d along dimension 0: i - p0, reflected at the source's ends without
/// repeating them (index -1 takes 1, index n takes n - 2); p0 and the trailing pad are
/// below n.
BACKPLANE_HOST_DEVICE constexpr std::int64_t reflected_index(std::int64_t i, std::int64_t p0, std::int64_t n) noexcept {
    const std::int64_t j = i - p0;
    return j < 0 ? -j : j >= n ? 2 * (n - 1) - j : j;
}

/// roll: i - shift, wrapped around the extent n.
BACKPLANE_HOST_DEVICE constexpr std::int64_t rolled_index(std::int64_t i, std::int64_t shift, std::int64_t n) noexcept {
    const std::int64_t j = (i - shift) % n;
    return j < 0 ? j + n : j;
}

} // namespace backplane
