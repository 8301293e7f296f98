#pragma once
// concat: a and b (the same type) joined along dimension `dim`: element (i0, i1, i2, i3)
// of dst comes from a while its index along dim is below a's extent, from b (index
// shifted by a's extent) after. Storage units (elements, or blocks of a quantized type,
// whose rows are whole blocks) are copied byte for byte, so every type is exact.

#include <backplane/backends/cpu/kernels/common.hpp>

#include <cstring>

namespace backplane::cpu::kernels {

template <class = void>
inline void concat(const compute_params& p, tensor& dst) noexcept {
    const tensor& a = *dst.src[0];
    const tensor& b = *dst.src[1];
    if (dst.nelements() == 0)
        return;
    const auto dim = static_cast<std::size_t>(dst.param<std::int32_t>(0));
    const std::size_t ts = type_size(dst.type);
    const i64 bs = block_size(dst.type);
    const i64 ne0 = dst.ne[0] / bs;                   // units per row
    const i64 split = dim == 0 ? a.ne[0] / bs : a.ne[dim]; // in units along dimension 0

    const auto [r0, r1] = split_work(dst.nrows(), p);
    for (i64 r = r0; r < r1; ++r) {
        const auto [i1, i2, i3] = row_of(r, dst.ne);
        std::byte* pd = row_ptr(dst, i1, i2, i3);
        if (dim == 0) {
            const std::byte* pa = row_ptr(a, i1, i2, i3);
            const std::byte* pb = row_ptr(b, i1, i2, i3);
            for (i64 i0 = 0; i0 < ne0; ++i0) {
                const std::byte* s = i0 < split
                                         ? pa + static_cast<std::size_t>(i0) * a.nb[0]
                                         : pb + static_cast<std::size_t>(i0 - split) * b.nb[0];
                std::memcpy(pd + static_cast<std::size_t>(i0) * dst.nb[0], s, ts);
            }
            continue;
        }
        std::array<i64, max_dims> idx{0, i1, i2, i3};
        const bool from_a = idx[dim] < split;
        if (!from_a)
            idx[dim] -= split;
        const tensor& s = from_a ? a : b;
        const std::byte* ps = row_ptr(s, idx[1], idx[2], idx[3]);
        for (i64 i0 = 0; i0 < ne0; ++i0)
            std::memcpy(pd + static_cast<std::size_t>(i0) * dst.nb[0],
                        ps + static_cast<std::size_t>(i0) * s.nb[0], ts);
    }
}

} // namespace backplane::cpu::kernels
