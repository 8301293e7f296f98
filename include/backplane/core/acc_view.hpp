#pragma once
// acc's view of its destination, written once for the rule and every backend whose
// kernels are C++ (the CPU's reference kernel and the CUDA kernels call it; Vulkan's
// misc.comp restates acc_source in GLSL).
//
// ggml_acc adds b into the view of a (contiguous f32) with byte strides (4, nb1, nb2, nb3)
// at byte offset `offset`, b's extents; op_params hold nb1, nb2, nb3, offset and the
// inplace flag as 32-bit integers, in that order. Here the view must also not overlap
// itself (each of its strides at least the span of the dimensions below it), so every
// element of the result has one source: ggml's result is open there (threads race).

#include <backplane/core/detail/host_device.hpp>

#include <cstddef>
#include <cstdint>
#include <initializer_list>

namespace backplane {

/// The view's byte strides (nb[0] = 4, an f32) and offset.
struct acc_view {
    std::int64_t nb[4] = {4, 0, 0, 0};
    std::int64_t offset = 0;
};

/// The bytes the view spans in dimensions below d (one element for d = 0) for extents ne[0 .. 3]
/// (each at least 1).
BACKPLANE_HOST_DEVICE constexpr std::int64_t acc_span(const acc_view& v, const std::int64_t* ne, int d) noexcept {
    std::int64_t span = 4;
    for (int i = 0; i < d; ++i) span += (ne[i] - 1) * v.nb[i];
    return span;
}

/// True when the element at byte `at` of the destination is element j of b (extents ne,
/// each at least 1), which it then sets; false when the view does not cover it.
BACKPLANE_HOST_DEVICE constexpr bool acc_source(const acc_view& v, const std::int64_t* ne, std::int64_t at,
                                                std::int64_t (&j)[4]) noexcept {
    std::int64_t rel = at - v.offset;
    if (rel < 0) return false;
    for (int d = 3; d >= 1; --d) {
        j[d] = ne[d] > 1 ? rel / v.nb[d] : 0;
        if (j[d] >= ne[d]) return false;
        rel -= j[d] * v.nb[d];
        if (rel >= acc_span(v, ne, d)) return false; // in a gap between the view's rows
    }
    j[0] = rel / 4;
    return j[0] < ne[0];
}

// The functions that read a node are templates on its type: op_traits.hpp includes this
// header for acc's rule, and tensor.hpp includes op_traits.hpp.

/// acc's view, from its node's op_params (slots 0 .. 3).
template <class Tensor>
acc_view acc_view_of(const Tensor& node) noexcept {
    acc_view v;
    for (std::size_t d = 1; d < 4; ++d) v.nb[d] = node.template param<std::int32_t>(d - 1);
    v.offset = node.template param<std::int32_t>(3);
    return v;
}

/// Why the view of `node` (acc: a, b) is not one acc takes: empty when it is. Strides and
/// offset non-negative multiples of 4 bytes, the view inside a and not overlapping itself.
template <class Tensor>
const char* acc_view_fault(const Tensor& node) noexcept {
    const acc_view v = acc_view_of(node);
    const Tensor& b = *node.src[1];
    for (const std::int64_t x : {v.nb[1], v.nb[2], v.nb[3], v.offset})
        if (x < 0 || x % 4 != 0) return "nb1, nb2, nb3 and offset must be non-negative multiples of 4 bytes";
    if (b.nelements() == 0) return nullptr;
    for (int d = 1; d < 4; ++d)
        if (b.ne[static_cast<std::size_t>(d)] > 1 && v.nb[d] < acc_span(v, b.ne.data(), d))
            return "the view of a overlaps itself (a stride below the span of the dimensions under it)";
    if (v.offset + acc_span(v, b.ne.data(), 4) > static_cast<std::int64_t>(node.src[0]->nbytes()))
        return "b's view must lie inside a";
    return nullptr;
}

} // namespace backplane
