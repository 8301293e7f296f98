#pragma once
// Which ops the Vulkan backend computes, and how each becomes a dispatch: the shader
// variant (backends/vulkan/shaders/), the push constants (shaders/common.glsl) and the
// workgroup counts.
//
//   op                                  types                 shader
//   add, sub, mul, div (b broadcast)    f32                   binary.comp
//   scale, sqr, sqrt, silu, gelu, relu  f32                   unary.comp
//   dup, cont, cpy                      f32 -> f32            copy.comp
//
// Shapes follow the CPU backend's rules (cpu::supports_op); the Vulkan side adds its own
// limits: element counts and strides must fit 32-bit indices, and a tensor must fit one
// storage-buffer binding (maxStorageBufferRange, 128 MiB on lavapipe).

#include <backplane/backends/cpu/supports.hpp>
#include <backplane/core/tensor.hpp>

#include <array>
#include <bit>
#include <cstdint>
#include <limits>
#include <string_view>

namespace backplane::vulkan::detail {

/// The push constants of every shader (shaders/common.glsl).
struct push_constants {
    std::array<std::uint32_t, 4> ne{}, nb{};
    std::array<std::uint32_t, 4> a_ne{}, a_nb{};
    std::array<std::uint32_t, 4> b_ne{}, b_nb{};
    std::array<std::uint32_t, 4> offs{};
    std::array<std::uint32_t, 4> prm{};
};
static_assert(sizeof(push_constants) == 128, "the push constants are 128 bytes (the guaranteed minimum)");

/// The shader variant computing t, or empty when this backend has none for it.
inline std::string_view shader_for(const tensor& t) noexcept {
    const tensor* a = t.src[0];
    const tensor* b = t.src[1];
    if (a == nullptr || t.type != elem_type::f32 || a->type != elem_type::f32) return {};
    const bool b_f32 = b != nullptr && b->type == elem_type::f32;
    switch (t.op) {
    case op_kind::add: return b_f32 ? "add_f32" : "";
    case op_kind::sub: return b_f32 ? "sub_f32" : "";
    case op_kind::mul: return b_f32 ? "mul_f32" : "";
    case op_kind::div: return b_f32 ? "div_f32" : "";
    case op_kind::scale: return "scale_f32";
    case op_kind::sqr: return "sqr_f32";
    case op_kind::sqrt: return "sqrt_f32";
    case op_kind::silu: return "silu_f32";
    case op_kind::gelu: return "gelu_f32";
    case op_kind::relu: return "relu_f32";
    case op_kind::dup:
    case op_kind::cont:
    case op_kind::cpy: return "cpy_f32_f32";
    default: return {};
    }
}

/// t's extents and strides (in elements) as 32-bit values; false when they do not fit.
inline bool shape32(const tensor& t, std::array<std::uint32_t, 4>& ne, std::array<std::uint32_t, 4>& nb) noexcept {
    const std::size_t ts = type_size(t.type);
    constexpr auto max = std::numeric_limits<std::uint32_t>::max();
    if (t.nelements() < 0 || static_cast<std::uint64_t>(t.nelements()) >= max) return false;
    for (std::size_t i = 0; i < 4; ++i) {
        if (t.ne[i] <= 0 || static_cast<std::uint64_t>(t.ne[i]) > max) return false;
        if (t.nb[i] % ts != 0 || t.nb[i] / ts > max) return false;
        ne[i] = static_cast<std::uint32_t>(t.ne[i]);
        nb[i] = static_cast<std::uint32_t>(t.nb[i] / ts);
    }
    return true;
}

/// Whether the Vulkan backend computes t (views and leafs: always).
inline bool supports(const tensor& t, std::size_t max_binding) noexcept {
    if (t.op == op_kind::none || is_view_op(t.op)) return true;
    if (shader_for(t).empty() || !cpu::supports_op(t)) return false;
    std::array<std::uint32_t, 4> ne{}, nb{};
    if (!shape32(t, ne, nb) || t.nbytes() > max_binding) return false;
    for (const tensor* s : t.src)
        if (s != nullptr && (!shape32(*s, ne, nb) || s->nbytes() > max_binding)) return false;
    return true;
}

/// The push constants of t, save the element offsets (set where the bindings are made).
inline push_constants push_for(const tensor& t) noexcept {
    push_constants pc;
    (void)shape32(t, pc.ne, pc.nb);
    if (t.src[0] != nullptr) (void)shape32(*t.src[0], pc.a_ne, pc.a_nb);
    if (t.src[1] != nullptr) (void)shape32(*t.src[1], pc.b_ne, pc.b_nb);
    if (t.op == op_kind::scale) {
        pc.prm[0] = std::bit_cast<std::uint32_t>(t.param<float>(0));
        pc.prm[1] = std::bit_cast<std::uint32_t>(t.param<float>(1));
    }
    return pc;
}

/// Workgroups for n invocations in groups of `size`: a 2-D grid when one dimension is
/// not enough (65535 groups per dimension is the guaranteed minimum).
inline std::array<std::uint32_t, 3> groups_for(std::uint64_t n, std::uint32_t size) noexcept {
    const std::uint64_t g = (n + size - 1) / size;
    if (g <= 65535) return {static_cast<std::uint32_t>(g == 0 ? 1 : g), 1, 1};
    const std::uint64_t y = (g + 65534) / 65535;
    return {65535, static_cast<std::uint32_t>(y), 1};
}

} // namespace backplane::vulkan::detail
