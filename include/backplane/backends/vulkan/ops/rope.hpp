#pragma once
// rope (rope.comp): every mode (normal, neox, mrope, vision, imrope), frequency factors
// and YaRN, f32, and f16 with 16-bit storage (f16 values are widened to f32, no 16-bit
// arithmetic). One invocation per rotated pair and per value copied past the rotated
// ones; any strides and offsets, in place too. The angles are computed in float-float
// arithmetic to match the CPU's double-precision angles (see the shader).
//
//   a, dst   variant    needs
//   f32      rope_f32   -
//   f16      rope_f16   16-bit storage

#include <backplane/backends/vulkan/ops/common.hpp>
#include <backplane/core/rope_functions.hpp>

#include <algorithm>
#include <cmath>

namespace backplane::vulkan::detail {

inline bool plan_rope(const tensor& t, const features& f, dispatch& d) noexcept {
    const tensor* a = t.src[0];
    const tensor* pos = t.src[1];
    if (a == nullptr || pos == nullptr || pos->type != elem_type::i32 || a->type != t.type) return false;
    const rope_fn::params c = rope_fn::params_of(t);
    if (c.n_dims <= 0 || c.n_dims % 2 != 0 || c.n_dims > t.ne[0]) return false;
    switch (t.type) {
    case elem_type::f32: d.shader = "rope_f32"; break;
    case elem_type::f16:
        if (!f.storage16) return false;
        d.shader = "rope_f16";
        break;
    default: return false;
    }
    d.pc = shapes_of(t);
    // q = freq_base^(-2 / n_dims), so that a slot's frequency is q^e, as a pair of floats
    // whose sum holds q to ~48 bits (the shader raises it to the power e in float-float)
    const double q = std::pow(c.freq_base, -2.0 / static_cast<double>(c.n_dims));
    const auto q_hi = static_cast<float>(q);
    const auto q_lo = static_cast<float>(q - static_cast<double>(q_hi));
    d.pc.prm[0] = static_cast<std::uint32_t>(c.n_dims);
    d.pc.prm[1] = static_cast<std::uint32_t>(c.mode);
    d.pc.prm[2] = float_bits(q_hi);
    d.pc.prm[3] = float_bits(q_lo);
    // YaRN: mscale as the CPU computes it (rope_fn::cos_sin), in double
    const double mscale = c.ext_factor != 0.0 ? c.attn_factor * (1.0 + 0.1 * std::log(1.0 / c.freq_scale)) : c.attn_factor;
    d.pc.a_ne = {float_bits(static_cast<float>(c.freq_scale)), float_bits(static_cast<float>(c.ext_factor)),
                 float_bits(static_cast<float>(mscale)), static_cast<std::uint32_t>(c.sections[3])};
    const tensor* ff = t.src[2];
    d.pc.b_ne = {float_bits(c.corr_low), float_bits(c.corr_high),
                 ff == nullptr ? 0u : std::max<std::uint32_t>(1, static_cast<std::uint32_t>(ff->nb[0] / sizeof(float))), 0};
    d.pc.b_nb[1] = static_cast<std::uint32_t>(c.sections[0]);
    d.pc.b_nb[2] = static_cast<std::uint32_t>(c.sections[1]);
    d.pc.b_nb[3] = static_cast<std::uint32_t>(c.sections[2]);
    // per row: the pairs and the values copied past them
    const auto per_row = static_cast<std::uint64_t>(t.ne[0] - rope_fn::n_pairs(c));
    d.groups = groups_for(per_row * static_cast<std::uint64_t>(t.nrows()), 128);
    return true;
}

} // namespace backplane::vulkan::detail
