#pragma once
// add, sub, mul, div: dst = a op b with b broadcast over a (ggml's repeat rule: each of
// a's extents is a multiple of b's, b's index is a's index modulo b's extent). a and b
// are f32, f16 or bf16 in any combination; dst has a's type and shape. Computed in f32.
//
// add_id: a + the row of b that an expert id names, per row of a (mixture of experts).
//
// In place (add, sub, mul, div): dst may share a's memory with a's layout (the graph allocator does this);
// each element of a is read right before the same element of dst is written.

#include <backplane/backends/cpu/kernels/common.hpp>

namespace backplane::cpu::kernels {

namespace detail {

template <class TA, class TB, class Op>
void binary_rows(const compute_params& p, tensor& dst, Op op) noexcept {
    const tensor& a = *dst.src[0];
    const tensor& b = *dst.src[1];
    const i64 ne0 = dst.ne[0];
    const i64 nb_ne0 = b.ne[0];
    const auto [r0, r1] = split_work(dst.nrows(), p);
    for (i64 r = r0; r < r1; ++r) {
        const auto [i1, i2, i3] = row_of(r, dst.ne);
        const std::byte* pa = row_ptr(a, i1, i2, i3);
        const std::byte* pb = row_ptr(b, i1 % b.ne[1], i2 % b.ne[2], i3 % b.ne[3]);
        std::byte* pd = row_ptr(dst, i1, i2, i3);
        for (i64 i0 = 0, j0 = 0; i0 < ne0; ++i0) {
            const float x = load<TA>(pa + static_cast<std::size_t>(i0) * a.nb[0]);
            const float y = load<TB>(pb + static_cast<std::size_t>(j0) * b.nb[0]);
            store<TA>(pd + static_cast<std::size_t>(i0) * dst.nb[0], op(x, y));
            if (++j0 == nb_ne0)
                j0 = 0;
        }
    }
}

template <class Op> void binary(const compute_params& p, tensor& dst, Op op) noexcept {
    visit_float(dst.src[0]->type, [&]<class TA>() {
        visit_float(dst.src[1]->type, [&]<class TB>() { binary_rows<TA, TB>(p, dst, op); });
    });
}

} // namespace detail

/// add / sub / mul / div, chosen by dst.op.
template <class = void>
inline void binary(const compute_params& p, tensor& dst) noexcept {
    if (dst.nelements() == 0)
        return;
    switch (dst.op) {
    case op_kind::add:
        detail::binary(p, dst, [](float x, float y) { return x + y; });
        break;
    case op_kind::sub:
        detail::binary(p, dst, [](float x, float y) { return x - y; });
        break;
    case op_kind::mul:
        detail::binary(p, dst, [](float x, float y) { return x * y; });
        break;
    case op_kind::div:
        detail::binary(p, dst, [](float x, float y) { return x / y; });
        break;
    default:
        break;
    }
}

/// add_id: a f32 [ne0, n_used, n_tokens], b f32 [ne0, n_expert], ids i32 [n_used,
/// n_tokens] -> dst[:, i1, i2] = a[:, i1, i2] + b[:, ids[i1, i2]]. An id outside
/// [0, n_expert) is never read: its row is written as zeros and the kernel returns false
/// so that the backend reports errc::out_of_range.
template <class = void>
inline bool add_id(const compute_params& p, tensor& dst) noexcept {
    const tensor& a = *dst.src[0];
    const tensor& b = *dst.src[1];
    const tensor& ids = *dst.src[2];
    bool all_valid = true;
    const auto [r0, r1] = split_work(dst.nrows(), p);
    for (i64 r = r0; r < r1; ++r) {
        const auto [i1, i2, i3] = row_of(r, dst.ne);
        const i64 e = load_i32(static_cast<const std::byte*>(ids.data) + static_cast<std::size_t>(i1) * ids.nb[0] +
                               static_cast<std::size_t>(i2) * ids.nb[1]);
        const bool valid = e >= 0 && e < b.ne[1];
        all_valid = all_valid && valid;
        const std::byte* pa = row_ptr(a, i1, i2, i3);
        const std::byte* pb = valid ? row_ptr(b, e, 0, 0) : nullptr;
        std::byte* pd = row_ptr(dst, i1, i2, i3);
        for (i64 i0 = 0; i0 < dst.ne[0]; ++i0) {
            const float x = load<float>(pa + static_cast<std::size_t>(i0) * a.nb[0]);
            const float y = valid ? load<float>(pb + static_cast<std::size_t>(i0) * b.nb[0]) : 0.0f;
            store<float>(pd + static_cast<std::size_t>(i0) * dst.nb[0], valid ? x + y : 0.0f);
        }
    }
    return all_valid;
}

} // namespace backplane::cpu::kernels
