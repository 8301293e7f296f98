#pragma once
// concat: a and b (the same type) joined along dimension `dim` (param slot 0): element
// (i0, i1, i2, i3) of dst comes from a while its index along dim is below a's extent
// there, from b (that index less a's extent) after. Elements are copied as bits, so every
// type is exact; any strides on all three. A quantized row (whole blocks, contiguous) is
// copied as 16-bit words (bytes for mxfp4, whose 17-byte blocks have no alignment):
// dimension 0 is described to the kernel in those units.

#include <backplane/backends/cuda/kernels/common.cuh>
#include <backplane/backends/cuda/kernels/copy.cuh> // elem_io

#include <cstdint>

namespace backplane::cuda::kernels {

namespace concat_detail {

using namespace elem_io;

/// U: the element as an unsigned integer of its size. b_shift = split * b.nb[dim], so
/// that b's element is at b's offset of the destination's coordinates less b_shift.
template <class U>
__global__ void k_concat(tview d, tview a, tview b, int dim, i64 split, i64 b_shift) {
    const i64 n0 = d.ne[0];
    const i64 rows = d.nrows();
    for (i64 r = row_first(); r < rows; r += row_step()) {
        i64 i1, i2, i3;
        unravel_row(r, d.ne, i1, i2, i3);
        char* pd = d.row(i1, i2, i3);
        // along dims 1..3 the whole row comes from one side
        const i64 c = dim == 1 ? i1 : dim == 2 ? i2 : i3;
        const bool row_from_a = dim != 0 && c < split;
        // byte offsets of the row in a and in b (the latter shifted back along dim);
        // only the side an element comes from is ever turned into an address
        const i64 oa = i1 * a.nb[1] + i2 * a.nb[2] + i3 * a.nb[3];
        const i64 ob = i1 * b.nb[1] + i2 * b.nb[2] + i3 * b.nb[3] - b_shift;
        for (i64 i0 = col_first(); i0 < n0; i0 += col_step()) {
            const bool from_a = dim == 0 ? i0 < split : row_from_a;
            const char* ps = from_a ? a.data + (oa + i0 * a.nb[0]) : b.data + (ob + i0 * b.nb[0]);
            *reinterpret_cast<U*>(pd + i0 * d.nb[0]) = *reinterpret_cast<const U*>(ps);
        }
    }
}

} // namespace concat_detail

/// concat (kernel_table::launch): every type, any strides.
inline cudaError_t launch_concat(const tensor& node, const detail::launch_context& ctx) noexcept {
    using namespace concat_detail;
    const tensor* a = node.src[0];
    const tensor* b = node.src[1];
    const std::int32_t dim = node.param<std::int32_t>(0);
    if (a == nullptr || b == nullptr || dim < 0 || dim >= max_dims || a->type != node.type || b->type != node.type)
        return cudaErrorInvalidValue;
    if (node.nelements() <= 0) return cudaSuccess;
    const auto k = static_cast<std::size_t>(dim);
    tview d = view_of(node), va = view_of(*a), vb = view_of(*b);
    const bool bytes = node.type == elem_type::mxfp4;
    if (is_quantized(node.type)) { // rows of 16-bit words (bytes)
        const i64 unit = bytes ? 1 : 2;
        const i64 units = static_cast<i64>(type_size(node.type)) / unit;
        for (tview* v : {&d, &va, &vb}) {
            v->ne[0] = v->ne[0] / quant::block_values(node.type) * units;
            v->nb[0] = unit;
        }
    }
    const i64 split = k == 0 ? va.ne[0] : a->ne[k];
    const i64 b_shift = split * static_cast<i64>(vb.nb[k]);
    const rows_grid g = rows_geometry(d.ne[0], d.nrows());
    switch (node.type) {
    case elem_type::f32:
    case elem_type::i32:
        k_concat<std::uint32_t><<<g.grid, g.block, 0, ctx.stream>>>(d, va, vb, dim, split, b_shift);
        break;
    case elem_type::f16:
    case elem_type::bf16:
        k_concat<std::uint16_t><<<g.grid, g.block, 0, ctx.stream>>>(d, va, vb, dim, split, b_shift);
        break;
    case elem_type::i64:
        k_concat<std::uint64_t><<<g.grid, g.block, 0, ctx.stream>>>(d, va, vb, dim, split, b_shift);
        break;
    default:
        if (!is_quantized(node.type)) return cudaErrorNotSupported;
        if (bytes)
            k_concat<std::uint8_t><<<g.grid, g.block, 0, ctx.stream>>>(d, va, vb, dim, split, b_shift);
        else
            k_concat<std::uint16_t><<<g.grid, g.block, 0, ctx.stream>>>(d, va, vb, dim, split, b_shift);
        break;
    }
    return cudaGetLastError();
}

} // namespace backplane::cuda::kernels
