#pragma once
// The Vulkan backend's compute shaders, compiled: every variant of every .comp file under
// shaders/, as SPIR-V. The build compiles them (glslc, validated by spirv-val) and writes
// their words into one source file of the kernel library backplane::vulkan_kernels, which
// backplane::vulkan links (cmake/BackplaneShaders.cmake): the words are compiled once,
// not parsed by every translation unit that includes the backend.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace backplane::vulkan::spirv {

/// One compiled shader variant.
struct blob {
    std::string_view name;      ///< the variant's name, as declared in its .comp file
    const std::uint32_t* words; ///< the SPIR-V module
    std::size_t n_words;        ///< its length in 32-bit words (bytes / 4)
};

/// Every variant, sorted by name (defined in the kernel library).
[[nodiscard]] std::span<const blob> all() noexcept;

/// The variant called `name`, or nullptr (a binary search: every compute looks up the
/// shader of each of its nodes).
[[nodiscard]] inline const blob* find(std::string_view name) noexcept {
    const std::span<const blob> sorted = all();
    const blob* first = sorted.data();
    std::size_t n = sorted.size();
    while (n > 0) { // the first variant not less than name
        const std::size_t half = n / 2;
        if (first[half].name < name) {
            first += half + 1;
            n -= half + 1;
        } else {
            n = half;
        }
    }
    return first != sorted.data() + sorted.size() && first->name == name ? first : nullptr;
}

} // namespace backplane::vulkan::spirv
