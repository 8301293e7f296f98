#pragma once
// argsort and top_k (a row is dimension 0): each row's (value, index) pairs put in the
// order of core/sort_order.hpp, a total order (stable on ties, NaNs defined), so every
// backend gives the same indices. argsort writes every index, top_k the first k of the
// descending order (k = dst.ne0), found by a partial sort.
//
// Each thread sorts its rows in a buffer of its own of one row; the kernels return false
// when it cannot be allocated (compute_forward reports alloc_failed).

#include <backplane/backends/cpu/kernels/common.hpp>
#include <backplane/core/sort_order.hpp>

#include <algorithm>
#include <new>
#include <vector>

namespace backplane::cpu::kernels {

namespace detail {
struct sort_entry {
    float value;
    std::int32_t index;
};
} // namespace detail

/// argsort (order in param 0) and top_k: dst i32 [k, ne1, ne2, ne3], k = a.ne0 for
/// argsort; a f32, f16 or bf16, any layout. False when the row buffer cannot be had.
template <class = void>
[[nodiscard]] inline bool sort_rows(const compute_params& p, tensor& dst) noexcept {
    const tensor& a = *dst.src[0];
    const bool top = dst.op == op_kind::top_k;
    const bool desc = top || dst.param<std::int32_t>(0) == static_cast<std::int32_t>(sort_order::desc);
    const i64 ne0 = a.ne[0], k = dst.ne[0];
    const work_range rows = split_work(a.nrows(), p); // clang < 16 cannot capture bindings
    const i64 r0 = rows.begin, r1 = rows.end;
    if (r0 >= r1) return true;
    std::vector<detail::sort_entry> row;
    try {
        row.resize(static_cast<std::size_t>(ne0));
    } catch (const std::bad_alloc&) {
        return false;
    }
    const auto before = [desc](const detail::sort_entry& x, const detail::sort_entry& y) {
        return sorting::sorts_before(x.value, x.index, y.value, y.index, desc);
    };
    visit_float(a.type, [&]<class T>() {
        for (i64 r = r0; r < r1; ++r) {
            const auto [i1, i2, i3] = row_of(r, a.ne);
            const std::byte* pa = row_ptr(a, i1, i2, i3);
            for (i64 i = 0; i < ne0; ++i)
                row[static_cast<std::size_t>(i)] = {load<T>(pa + static_cast<std::size_t>(i) * a.nb[0]),
                                                    static_cast<std::int32_t>(i)};
            if (top)
                std::partial_sort(row.begin(), row.begin() + k, row.end(), before);
            else
                std::sort(row.begin(), row.end(), before);
            std::byte* pd = row_ptr(dst, i1, i2, i3);
            for (i64 i = 0; i < k; ++i)
                store_i32(pd + static_cast<std::size_t>(i) * dst.nb[0], row[static_cast<std::size_t>(i)].index);
        }
    });
    return true;
}

} // namespace backplane::cpu::kernels
