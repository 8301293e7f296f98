#pragma once
// The kinds of fused groups (core/fusion.hpp describes them) and a set of them: which a
// backend may make (cpu_backend_params::fusions, backend_options::fusions). Light: the
// erased backend options take it.

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace backplane {

enum class fusion : std::uint8_t { rms_norm_mul, mul_mat_add, glu_pair, rope_set_rows, soft_max_scale_mask };
inline constexpr std::size_t fusion_count = 5;

constexpr std::string_view to_string(fusion f) noexcept {
    switch (f) {
    case fusion::rms_norm_mul: return "rms_norm_mul";
    case fusion::mul_mat_add: return "mul_mat_add";
    case fusion::glu_pair: return "glu_pair";
    case fusion::rope_set_rows: return "rope_set_rows";
    case fusion::soft_max_scale_mask: return "soft_max_scale_mask";
    }
    return "unknown";
}

/// Which fusions a backend may make (all by default).
class fusion_set {
public:
    constexpr fusion_set() noexcept = default;
    [[nodiscard]] static constexpr fusion_set none() noexcept { return fusion_set(0); }
    [[nodiscard]] constexpr bool contains(fusion f) const noexcept { return (bits_ >> static_cast<unsigned>(f)) & 1u; }
    [[nodiscard]] constexpr bool empty() const noexcept { return bits_ == 0; }
    [[nodiscard]] constexpr fusion_set with(fusion f) const noexcept { return fusion_set(bits_ | bit(f)); }
    [[nodiscard]] constexpr fusion_set without(fusion f) const noexcept { return fusion_set(bits_ & ~bit(f)); }
    friend constexpr bool operator==(fusion_set, fusion_set) noexcept = default;

private:
    constexpr explicit fusion_set(std::uint32_t b) noexcept : bits_(b) {}
    static constexpr std::uint32_t bit(fusion f) noexcept { return 1u << static_cast<unsigned>(f); }
    std::uint32_t bits_ = (1u << fusion_count) - 1;
};

} // namespace backplane
