#pragma once
// Fast conv_2d: the input's windows unrolled (im2col) into a tile of the work buffer, in
// the kernel's type, then multiplied by the kernel with the fast float GEMM (gemm.hpp),
// one tile of output positions at a time, as ggml's CPU computes it.
//
// The product per tile, in the GEMM's terms (gemm/plan.hpp: dst[m, n] = sum_k a[k, m]
// b[k, n]): a = the tile, M output positions of one image in order (x fastest), each a
// row of K = kw * kh * ic window values; b = the kernel, N = oc rows of K (its first
// three dimensions contiguous); dst = the result's positions [x, y] of channel n, which
// are contiguous in a contiguous result, so the GEMM writes the result in place.
//
// Per tile, every thread of the node unrolls its share of the tile's rows, a barrier,
// the threads share the GEMM (its own barriers), a barrier before the tile is refilled.
// Values are those of the reference kernel (the input rounded to the kernel's type,
// products summed in f32), in another order.
//
// When it applies (conv_2d_applies): a kernel whose windows are long enough and whose
// output channels are several (K * oc >= 256, oc >= 2), below which the reference
// kernel's direct sums cost less than the unrolling, packing and barriers.

#include <backplane/backends/cpu/compute_params.hpp>
#include <backplane/backends/cpu/fast/gemm.hpp>
#include <backplane/backends/cpu/kernels/conv.hpp>
#include <backplane/core/conv_geometry.hpp>
#include <backplane/core/error.hpp>
#include <backplane/core/tensor.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace backplane::cpu::fast {

namespace conv_detail {

using i64 = std::int64_t;
namespace g = gemm_detail;

/// The bytes one tile may take: output positions enough for the GEMM's row blocks, few
/// enough to stay a few MiB for any kernel but the longest.
inline constexpr i64 tile_budget = i64{4} << 20;

/// Output positions per tile: whole row blocks of the GEMM (mc_block) within the budget,
/// at most one image's.
inline i64 tile_rows(const conv_2d_geometry& geo, std::size_t elem) noexcept {
    const i64 row_bytes = geo.taps() * static_cast<i64>(elem);
    const i64 fit = std::max<i64>(g::mc_block, tile_budget / row_bytes / g::mc_block * g::mc_block);
    return std::min(fit, geo.ow * geo.oh);
}

/// The GEMM of `rows` output positions (data null: only its sizes, for planning).
inline g::problem tile_problem(const tensor& dst, const conv_2d_geometry& geo, i64 rows, const std::byte* tile,
                               i64 image, i64 first) noexcept {
    const tensor& k = *dst.src[0];
    g::problem pr;
    pr.M = rows;
    pr.N = geo.oc;
    pr.K = geo.taps();
    pr.a = {tile, k.type, static_cast<std::size_t>(pr.K) * type_size(k.type), 0, 0};
    pr.b = {static_cast<const std::byte*>(k.data), k.type, k.nb[3], 0, 0};
    pr.d = dst.data == nullptr ? nullptr
                               : static_cast<std::byte*>(dst.data) + static_cast<std::size_t>(image) * dst.nb[3] +
                                     static_cast<std::size_t>(first) * sizeof(float);
    pr.dnb1 = dst.nb[2];
    return pr;
}

/// Bytes of the GEMM's scratch for a full tile, rounded to the tile's 64-byte alignment.
inline std::size_t gemm_bytes(const tensor& dst, int nth) noexcept {
    const conv_2d_geometry geo = conv_2d_geometry_of(dst);
    const i64 rows = tile_rows(geo, type_size(dst.src[0]->type));
    const std::size_t b = g::make_plan(tile_problem(dst, geo, rows, nullptr, 0, 0), nth).bytes;
    return (b + g::align_bytes - 1) / g::align_bytes * g::align_bytes;
}

/// The tile's windows as an im2col's: the input's strides, each window one row of the
/// tile (contiguous values of `elem` bytes).
inline im2col_geometry tile_windows(const tensor& dst, const conv_2d_geometry& geo, std::size_t elem) noexcept {
    im2col_geometry g;
    g.kw = geo.kw, g.kh = geo.kh, g.ic = geo.ic, g.iw = geo.iw, g.ih = geo.ih;
    g.ow = geo.ow, g.oh = geo.oh, g.n = geo.n, g.w = geo.w;
    g.b_nb = dst.src[1]->nb;
    g.d_nb = {elem, 0, 0, 0};
    return g;
}

/// Unrolls this thread's share of output positions [first, first + rows) of `image` into
/// the tile, in the kernel's type K (an im2col row: channel, kernel row, kernel column).
template <class K>
void unroll(const compute_params& p, const tensor& dst, const conv_2d_geometry& geo, std::byte* tile, i64 image,
            i64 first, i64 rows) noexcept {
    const tensor& b = *dst.src[1];
    const im2col_geometry g = tile_windows(dst, geo, sizeof(K));
    const std::byte* plane = static_cast<const std::byte*>(b.data) + static_cast<std::size_t>(image) * b.nb[3];
    const auto [r0, r1] = split_work(rows, p);
    for (i64 r = r0; r < r1; ++r) {
        const i64 pos = first + r;
        kernels::detail::im2col_row<float, K>(g, plane, tile + static_cast<std::size_t>(r * geo.taps()) * sizeof(K),
                                               pos % geo.ow, pos / geo.ow);
    }
}

/// The GEMM of one tile on this thread's share, at p.level.
inline void multiply(const compute_params& p, const g::problem& pr, float* scratch) noexcept {
    const g::plan pl = g::make_plan(pr, p.nth);
#if BACKPLANE_HAS_X86_KERNELS
    if (p.level == isa::avx512) return g::run<g::avx512::kernels>(pr, pl, p, scratch);
    if (p.level == isa::avx2) return g::run<g::avx2::kernels>(pr, pl, p, scratch);
#endif
    g::run<g::portable::kernels>(pr, pl, p, scratch);
}

} // namespace conv_detail

/// True when the fast path computes this conv_2d node: an f32 or f16 kernel whose rows of
/// taps (its first three dimensions) are contiguous, a result with contiguous planes, and
/// a shape worth it (see the header comment).
inline bool conv_2d_applies(const tensor& dst) noexcept {
    const tensor* k = dst.src[0];
    const tensor* b = dst.src[1];
    if (k == nullptr || b == nullptr || dst.type != elem_type::f32 || b->type != elem_type::f32) return false;
    if (k->type != elem_type::f32 && k->type != elem_type::f16) return false;
    const std::size_t ts = type_size(k->type);
    const bool taps_contiguous = k->nb[0] == ts && k->nb[1] == ts * static_cast<std::size_t>(k->ne[0]) &&
                                 k->nb[2] == k->nb[1] * static_cast<std::size_t>(k->ne[1]);
    const bool planes_contiguous = dst.nb[0] == sizeof(float) && dst.nb[1] == sizeof(float) * static_cast<std::size_t>(dst.ne[0]);
    const conv_2d_geometry geo = conv_2d_geometry_of(dst);
    return taps_contiguous && planes_contiguous && geo.oc >= 2 && geo.taps() * geo.oc >= 256;
}

/// Work buffer bytes with nth threads: the GEMM's scratch, then the tile.
inline std::size_t conv_2d_work_size(const tensor& dst, int nth) noexcept {
    if (!conv_2d_applies(dst)) return 0;
    const conv_2d_geometry geo = conv_2d_geometry_of(dst);
    const std::size_t elem = type_size(dst.src[0]->type);
    const auto tile = static_cast<std::size_t>(conv_detail::tile_rows(geo, elem) * geo.taps()) * elem;
    return gemm_detail::align_bytes + conv_detail::gemm_bytes(dst, nth) + tile;
}

/// Thread p.ith's share of the node; every thread of the node must call it. Call only
/// when conv_2d_applies(dst), with a work buffer of conv_2d_work_size(dst, p.nth) bytes.
template <class = void>
inline errc conv_2d(const compute_params& p, tensor& dst) noexcept {
    namespace cd = conv_detail;
    using i64 = std::int64_t;
    if (!conv_2d_applies(dst) || p.wdata == nullptr || p.wsize < conv_2d_work_size(dst, p.nth)) return errc::invalid_argument;
    const conv_2d_geometry geo = conv_2d_geometry_of(dst);
    const bool half = dst.src[0]->type == elem_type::f16;
    const i64 per_tile = cd::tile_rows(geo, half ? sizeof(f16_t) : sizeof(float));
    float* scratch = gemm_detail::aligned_floats(p.wdata);
    std::byte* tile = reinterpret_cast<std::byte*>(scratch) + cd::gemm_bytes(dst, p.nth);
    const i64 positions = geo.ow * geo.oh;
    for (i64 image = 0; image < geo.n; ++image)
        for (i64 first = 0; first < positions; first += per_tile) {
            const i64 rows = std::min(per_tile, positions - first);
            if (half)
                cd::unroll<f16_t>(p, dst, geo, tile, image, first, rows);
            else
                cd::unroll<float>(p, dst, geo, tile, image, first, rows);
            p.barrier();
            cd::multiply(p, cd::tile_problem(dst, geo, rows, tile, image, first), scratch);
            p.barrier(); // the tile and the GEMM's scratch are read until here
        }
    return errc::ok;
}

} // namespace backplane::cpu::fast
