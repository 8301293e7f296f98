#pragma once
// rope (rope.comp), normal and neox: f32, and f16 with 16-bit storage (f16 values are
// widened to f32, no 16-bit arithmetic). One invocation per rotated pair and per value
// copied past n_dims; any strides and offsets, in place too. The angles are computed in
// float-float arithmetic to match the CPU's double-precision angles (see the shader).
//
//   a, dst   variant    needs
//   f32      rope_f32   -
//   f16      rope_f16   16-bit storage

#include <backplane/backends/vulkan/ops/common.hpp>

#include <cmath>

namespace backplane::vulkan::detail {

inline bool plan_rope(const tensor& t, const features& f, dispatch& d) noexcept {
    const tensor* a = t.src[0];
    const tensor* pos = t.src[1];
    if (a == nullptr || pos == nullptr || pos->type != elem_type::i32 || a->type != t.type) return false;
    const std::int32_t n_dims = t.param<std::int32_t>(0);
    const std::int32_t mode = t.param<std::int32_t>(1);
    if (n_dims <= 0 || n_dims % 2 != 0 || n_dims > t.ne[0]) return false;
    if (mode != static_cast<std::int32_t>(rope_mode::normal) && mode != static_cast<std::int32_t>(rope_mode::neox))
        return false;
    switch (t.type) {
    case elem_type::f32: d.shader = "rope_f32"; break;
    case elem_type::f16:
        if (!f.storage16) return false;
        d.shader = "rope_f16";
        break;
    default: return false;
    }
    d.pc = shapes_of(t);
    // q = freq_base^(-2 / n_dims), so that pair i's frequency is q^i, as a pair of floats
    // whose sum holds q to ~48 bits (the shader raises it to the power i in float-float)
    const double q = std::pow(static_cast<double>(t.param<float>(2)), -2.0 / static_cast<double>(n_dims));
    const auto q_hi = static_cast<float>(q);
    const auto q_lo = static_cast<float>(q - static_cast<double>(q_hi));
    d.pc.prm[0] = static_cast<std::uint32_t>(n_dims);
    d.pc.prm[1] = static_cast<std::uint32_t>(mode);
    d.pc.prm[2] = float_bits(q_hi);
    d.pc.prm[3] = float_bits(q_lo);
    d.pc.offs[3] = float_bits(t.param<float>(3));
    // per row: n_dims / 2 pairs and ne0 - n_dims values copied
    const auto per_row = static_cast<std::uint64_t>(t.ne[0] - n_dims / 2);
    d.groups = groups_for(per_row * static_cast<std::uint64_t>(t.nrows()), 128);
    return true;
}

} // namespace backplane::vulkan::detail
