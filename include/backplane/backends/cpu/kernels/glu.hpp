#pragma once
// glu: gated linear units, y = act(x) * g per row (core/glu_functions.hpp has the
// formulas). Fused form (no src[1]): x and g are the halves of each row of a, nc =
// dst.ne0 values each, g first when swapped; split form: x from a, g from b. f32, f16 or
// bf16 (dst has a's type), computed in f32 and rounded once. Threads share the rows.
// In place (the split form over a): each element is read before the same one is written.

#include <backplane/backends/cpu/kernels/common.hpp>
#include <backplane/core/glu_functions.hpp>

namespace backplane::cpu::kernels {

namespace detail {

template <class T, class F> void glu_rows(const compute_params& p, tensor& dst, F f) noexcept {
    const tensor& a = *dst.src[0];
    const tensor& b = dst.src[1] != nullptr ? *dst.src[1] : a;
    const i64 nc = dst.ne[0];
    const auto [x0, g0] = glu_fn::halves_of(dst);
    const auto [r0, r1] = split_work(dst.nrows(), p);
    for (i64 r = r0; r < r1; ++r) {
        const auto [i1, i2, i3] = row_of(r, dst.ne);
        const std::byte* px = row_ptr(a, i1, i2, i3) + static_cast<std::size_t>(x0) * a.nb[0];
        const std::byte* pg = row_ptr(b, i1, i2, i3) + static_cast<std::size_t>(g0) * b.nb[0];
        std::byte* pd = row_ptr(dst, i1, i2, i3);
        for (i64 i = 0; i < nc; ++i) {
            const float x = load<T>(px + static_cast<std::size_t>(i) * a.nb[0]);
            const float g = load<T>(pg + static_cast<std::size_t>(i) * b.nb[0]);
            store<T>(pd + static_cast<std::size_t>(i) * dst.nb[0], f(x, g));
        }
    }
}

} // namespace detail

/// dst = glu(a) or glu(a, b), by dst's function (param 0, glu_op).
template <class = void>
inline void glu(const compute_params& p, tensor& dst) noexcept {
    if (dst.nelements() == 0) return;
    glu_fn::with_glu_function(dst, [&](auto fn) {
        visit_float(dst.type, [&]<class T>() { detail::glu_rows<T>(p, dst, fn); });
    });
}

} // namespace backplane::cpu::kernels
