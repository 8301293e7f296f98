#pragma once
// Size arithmetic shared by the allocators. Allocation sizes come from buffer types the
// library does not control (a device may report any alloc_size), so every rounding is
// overflow-checked: an absurd size must become an error status, not a wrapped-around
// small block that later code would write past.

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>

namespace backplane::detail {

/// A usable alignment: buffer types report a power of two, but 0 would divide by zero and
/// is taken as "no constraint".
constexpr std::size_t sane_alignment(std::size_t alignment) noexcept {
    return alignment == 0 ? 1 : alignment;
}

/// `size` rounded up to a multiple of `alignment` (not necessarily a power of two), or
/// nothing when that does not fit in a size_t.
constexpr std::optional<std::size_t> align_up(std::size_t size, std::size_t alignment) noexcept {
    alignment = sane_alignment(alignment);
    if ((alignment & (alignment - 1)) == 0) { // the usual case: a mask, not a division
        const std::size_t mask = alignment - 1;
        if (size > std::numeric_limits<std::size_t>::max() - mask) return std::nullopt;
        return (size + mask) & ~mask;
    }
    const std::size_t rem = size % alignment;
    if (rem == 0) return size;
    const std::size_t pad = alignment - rem;
    if (size > std::numeric_limits<std::size_t>::max() - pad) return std::nullopt;
    return size + pad;
}

/// Bytes to skip from `address` to the next multiple of `alignment`.
inline std::size_t padding_for(const void* address, std::size_t alignment) noexcept {
    alignment = sane_alignment(alignment);
    const auto a = reinterpret_cast<std::uintptr_t>(address);
    const std::size_t rem = static_cast<std::size_t>(a % alignment);
    return rem == 0 ? 0 : alignment - rem;
}

} // namespace backplane::detail
