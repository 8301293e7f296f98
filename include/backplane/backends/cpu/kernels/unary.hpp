#pragma once
// Element-wise functions of one operand: scale (x * s + bias), sqr, sqrt, silu, gelu,
// relu, neg, and the functions of core/unary_functions.hpp (their formulas are there).
// f32, f16 or bf16 in and out (dst has a's type and shape), computed in f32.
// In place: dst may share a's memory with a's layout; every element is read before the
// same element is written.

#include <backplane/backends/cpu/kernels/common.hpp>
#include <backplane/core/unary_functions.hpp>

#include <cmath>

namespace backplane::cpu::kernels {

namespace detail {

template <class T, class F> void map_rows(const compute_params& p, tensor& dst, F f) noexcept {
    const tensor& a = *dst.src[0];
    const i64 ne0 = dst.ne[0];
    const auto [r0, r1] = split_work(dst.nrows(), p);
    for (i64 r = r0; r < r1; ++r) {
        const auto [i1, i2, i3] = row_of(r, dst.ne);
        const std::byte* pa = row_ptr(a, i1, i2, i3);
        std::byte* pd = row_ptr(dst, i1, i2, i3);
        for (i64 i0 = 0; i0 < ne0; ++i0)
            store<T>(pd + static_cast<std::size_t>(i0) * dst.nb[0],
                     f(load<T>(pa + static_cast<std::size_t>(i0) * a.nb[0])));
    }
}

template <class F> void map(const compute_params& p, tensor& dst, F f) noexcept {
    visit_float(dst.src[0]->type, [&]<class T>() { map_rows<T>(p, dst, f); });
}

} // namespace detail

/// scale / sqr / sqrt / silu / gelu / relu / neg, or a function of
/// core/unary_functions.hpp, chosen by dst.op.
template <class = void>
inline void unary(const compute_params& p, tensor& dst) noexcept {
    if (dst.nelements() == 0)
        return;
    switch (dst.op) {
    case op_kind::scale: {
        const float s = dst.param<float>(0);
        const float bias = dst.param<float>(1);
        detail::map(p, dst, [s, bias](float x) { return x * s + bias; });
        break;
    }
    case op_kind::sqr:
        detail::map(p, dst, [](float x) { return x * x; });
        break;
    case op_kind::sqrt:
        detail::map(p, dst, [](float x) { return std::sqrt(x); });
        break;
    case op_kind::silu:
        detail::map(p, dst, unary_fn::silu_fn{});
        break;
    case op_kind::gelu:
        detail::map(p, dst, unary_fn::gelu_fn{});
        break;
    case op_kind::relu:
        detail::map(p, dst, unary_fn::relu_fn{});
        break;
    case op_kind::neg:
        detail::map(p, dst, [](float x) { return -x; });
        break;
    default:
        unary_fn::with_unary_function(dst, [&](auto fn) { detail::map(p, dst, fn); });
        break;
    }
}

} // namespace backplane::cpu::kernels
