#pragma once
// Inputs for conformance cases: the memory layouts a graph can hand a kernel, random
// fills, and element stores. The catalogue's families, the batched parity cases and the
// CPU op tests (which fill with the test oracle's values instead) lay their operands out
// here.
//
//     context ctx;
//     std::mt19937 rng(1);
//     tensor* a = conformance::laid_out(ctx, elem_type::f16, {33, 5, 2, 1}, layout::permuted,
//                                       [&](elem_type t, const extents& ne) {
//                                           return conformance::random_leaf(ctx, t, ne, rng);
//                                       });

#include <backplane/conformance/shapes.hpp>
#include <backplane/core/convert.hpp>
#include <backplane/core/context.hpp>
#include <backplane/core/ops.hpp>
#include <backplane/core/tensor.hpp>
#include <backplane/core/types.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <span>
#include <stdexcept>
#include <utility>
#include <vector>

namespace backplane::conformance {

/// How an operand is laid out in memory; all but contiguous are views.
enum class layout : std::uint8_t {
    contiguous,    ///< a fresh tensor
    offset,        ///< contiguous, one element (block) into a larger tensor: odd alignment
    strided_rows,  ///< rows padded: a window of a larger tensor in every dimension
    permuted,      ///< dims 1..3 (and 0 unless quantized) come from another order
    transposed,    ///< dims 0 and 1 swapped (not for quantized types)
    strided_elems, ///< every other element of a row (not for quantized types)
    permuted_rows, ///< dims 1..3 come from another order, rows (dim 0) kept contiguous (not
                   ///< among all_layouts: for operands that need contiguous rows)
};
inline constexpr layout all_layouts[] = {layout::contiguous,   layout::offset,
                                         layout::strided_rows, layout::permuted,
                                         layout::transposed,   layout::strided_elems};

constexpr const char* to_string(layout l) noexcept {
    switch (l) {
    case layout::contiguous:
        return "contiguous";
    case layout::offset:
        return "offset";
    case layout::strided_rows:
        return "strided_rows";
    case layout::permuted:
        return "permuted";
    case layout::transposed:
        return "transposed";
    case layout::strided_elems:
        return "strided_elems";
    case layout::permuted_rows:
        return "permuted_rows";
    }
    return "?";
}

/// Whether type t can be laid out as l (a quantized row keeps its blocks together).
constexpr bool allows(layout l, elem_type t) noexcept {
    return !is_quantized(t) || (l != layout::transposed && l != layout::strided_elems);
}
/// The i-th layout (cycling) that type t allows.
inline layout nth_layout(std::size_t i, elem_type t) {
    std::vector<layout> ok;
    for (layout l : all_layouts)
        if (allows(l, t))
            ok.push_back(l);
    return ok[i % ok.size()];
}

/// A tensor of extents ne laid out as l (contiguous where t does not allow l), viewing a
/// root made by leaf(type, root extents), which fills the whole root.
template <class Leaf>
tensor* laid_out(context& ctx, elem_type t, const extents& ne, layout l, Leaf&& leaf) {
    const auto ts = type_size(t);
    switch (allows(l, t) ? l : layout::contiguous) {
    case layout::contiguous:
        break;
    case layout::offset: {
        const std::int64_t rows = ne[1] * ne[2] * ne[3];
        tensor* root = leaf(t, extents{ne[0] * (rows + 1) + block_size(t), 1, 1, 1});
        const std::size_t row = row_size(t, ne[0]);
        return view_4d(ctx, root, ne[0], ne[1], ne[2], ne[3], row,
                       row * static_cast<std::size_t>(ne[1]),
                       row * static_cast<std::size_t>(ne[1] * ne[2]), ts);
    }
    case layout::strided_rows: {
        const std::int64_t pad0 = block_size(t) == 1 ? 3 : block_size(t);
        tensor* root = leaf(t, extents{ne[0] + pad0, ne[1] + 1, ne[2] + 1, ne[3]});
        return view_4d(ctx, root, ne[0], ne[1], ne[2], ne[3], root->nb[1], root->nb[2],
                       root->nb[3], ts + root->nb[1] + root->nb[2]);
    }
    case layout::permuted:
    case layout::permuted_rows: {
        if (is_quantized(t) || l == layout::permuted_rows) // dim 0 (the blocks, the rows) stays first
            return permute(ctx, leaf(t, extents{ne[0], ne[2], ne[3], ne[1]}), 0, 2, 3, 1);
        return permute(ctx, leaf(t, extents{ne[2], ne[0], ne[3], ne[1]}), 2, 0, 3, 1);
    }
    case layout::transposed:
        return transpose(ctx, leaf(t, extents{ne[1], ne[0], ne[2], ne[3]}));
    case layout::strided_elems: {
        tensor* root = leaf(t, extents{2 * ne[0], ne[1], ne[2], ne[3]});
        return view(ctx, root, ne, {2 * ts, root->nb[1], root->nb[2], root->nb[3]}, 0);
    }
    }
    return leaf(t, ne);
}

/// f(i0, i1, i2, i3) for every index of extents ne, dim 0 fastest.
template <class F> void for_each_index(const extents& ne, F&& f) {
    for (std::int64_t i3 = 0; i3 < ne[3]; ++i3)
        for (std::int64_t i2 = 0; i2 < ne[2]; ++i2)
            for (std::int64_t i1 = 0; i1 < ne[1]; ++i1)
                for (std::int64_t i0 = 0; i0 < ne[0]; ++i0)
                    f(i0, i1, i2, i3);
}

/// Stores v (rounded to the type) as element (i0, i1, i2, i3) of host tensor t, through
/// t's own strides; f32, f16, bf16, i32 or i64 (quantized tensors are written block-wise).
inline void set_element(tensor& t, std::int64_t i0, std::int64_t i1, std::int64_t i2,
                        std::int64_t i3, double v) {
    std::byte* p = static_cast<std::byte*>(t.data) + static_cast<std::size_t>(i0) * t.nb[0] +
                   static_cast<std::size_t>(i1) * t.nb[1] + static_cast<std::size_t>(i2) * t.nb[2] +
                   static_cast<std::size_t>(i3) * t.nb[3];
    switch (t.type) {
    case elem_type::f32: {
        const auto f = static_cast<float>(v);
        std::memcpy(p, &f, sizeof f);
        return;
    }
    case elem_type::f16: {
        const f16_t h = f32_to_f16(static_cast<float>(v));
        std::memcpy(p, &h, sizeof h);
        return;
    }
    case elem_type::bf16: {
        const bf16_t h = f32_to_bf16(static_cast<float>(v));
        std::memcpy(p, &h, sizeof h);
        return;
    }
    case elem_type::i32: {
        const auto i = static_cast<std::int32_t>(v);
        std::memcpy(p, &i, sizeof i);
        return;
    }
    case elem_type::i64: {
        const auto i = static_cast<std::int64_t>(v);
        std::memcpy(p, &i, sizeof i);
        return;
    }
    default:
        throw std::logic_error("set_element: quantized tensors are written block-wise");
    }
}

namespace detail {

inline double uniform(std::mt19937& rng, double lo, double hi) {
    return lo + (hi - lo) * (static_cast<double>(rng() >> 8) / static_cast<double>(1u << 24));
}

/// Fills all of contiguous host tensor t with values uniform in [lo, hi) (integers for i32
/// and i64).
inline void fill(tensor& t, std::mt19937& rng, double lo, double hi) {
    const auto n = t.nelements();
    if (t.type == elem_type::i32 || t.type == elem_type::i64) {
        const auto span = static_cast<std::uint32_t>(std::max(1.0, hi - lo));
        auto* p = static_cast<std::byte*>(t.data);
        for (std::int64_t i = 0; i < n; ++i) {
            const std::int64_t v = static_cast<std::int64_t>(lo) + static_cast<std::int64_t>(rng() % span);
            const auto v32 = static_cast<std::int32_t>(v);
            // by bytes: a tensor's data need not be aligned for its elements
            if (t.type == elem_type::i32)
                std::memcpy(p + static_cast<std::size_t>(i) * sizeof v32, &v32, sizeof v32);
            else
                std::memcpy(p + static_cast<std::size_t>(i) * sizeof v, &v, sizeof v);
        }
        return;
    }
    std::vector<float> v(static_cast<std::size_t>(n));
    for (auto& x : v)
        x = static_cast<float>(uniform(rng, lo, hi));
    from_float_row(t.type, v.data(), t.data, n);
}

/// Advances rng past what fill(t, ...) draws (one number per element), computing nothing.
inline void skip_fill(const tensor& t, std::mt19937& rng) {
    rng.discard(static_cast<unsigned long long>(t.nelements()));
}

} // namespace detail

/// Sets every row of index tensor idx (i32 or i64, any layout) to its own random
/// permutation of 0 .. idx.ne0 - 1 (set_rows' row numbers, each row written once).
inline void fill_permutations(tensor& idx, std::mt19937& rng) {
    std::vector<std::int64_t> order(static_cast<std::size_t>(idx.ne[0]));
    for_each_index(idx.ne, [&](std::int64_t i0, std::int64_t i1, std::int64_t i2, std::int64_t i3) {
        if (i0 == 0) { // a new row: a new permutation (Fisher-Yates)
            for (std::size_t k = 0; k < order.size(); ++k) order[k] = static_cast<std::int64_t>(k);
            for (std::size_t k = order.size(); k > 1; --k) std::swap(order[k - 1], order[rng() % k]);
        }
        set_element(idx, i0, i1, i2, i3, static_cast<double>(order[static_cast<std::size_t>(i0)]));
    });
}

/// Sets every element of ids (i32, any layout) to an expert id drawn uniformly from
/// 0 .. n_expert - 1, repeats included (mul_mat_id's and add_id's ids).
inline void fill_expert_ids(tensor& ids, std::int64_t n_expert, std::mt19937& rng) {
    for_each_index(ids.ne, [&](std::int64_t i0, std::int64_t i1, std::int64_t i2, std::int64_t i3) {
        set_element(ids, i0, i1, i2, i3, static_cast<double>(rng() % static_cast<std::uint32_t>(n_expert)));
    });
}

/// A contiguous host tensor of ctx filled with values uniform in [lo, hi).
inline tensor* random_leaf(context& ctx, elem_type t, const extents& ne, std::mt19937& rng,
                           double lo = -1.0, double hi = 1.0) {
    tensor* x = ctx.new_tensor(t, std::span<const std::int64_t>(ne));
    detail::fill(*x, rng, lo, hi);
    x->name = "input";
    return x;
}

/// The values a unary op is checked on: sqrt on [0, 4), log on [0.05, 4), every other
/// on [-6, 6).
struct value_range {
    double lo, hi;
};
inline value_range unary_input_range(op_kind op) noexcept {
    if (op == op_kind::sqrt) return {0.0, 4.0};
    if (op == op_kind::log) return {0.05, 4.0};
    return {-6.0, 6.0};
}

/// The unary element-wise op `op` (is_unary_elementwise) of a, its parameters drawn from
/// rng: scale's factor in [-2, 2) and bias in [-0.5, 0.5), leaky_relu's slope in
/// [0, 0.5), clamp's bounds around 0.
inline tensor* unary_of(context& ctx, op_kind op, tensor* a, std::mt19937& rng) {
    using detail::uniform;
    switch (op) {
    case op_kind::scale: {
        const auto s = static_cast<float>(uniform(rng, -2, 2));
        return scale(ctx, a, s, static_cast<float>(uniform(rng, -0.5, 0.5)));
    }
    case op_kind::leaky_relu: return leaky_relu(ctx, a, static_cast<float>(uniform(rng, 0, 0.5)));
    case op_kind::clamp: {
        const auto lo = static_cast<float>(uniform(rng, -3, 0));
        return clamp(ctx, a, lo, static_cast<float>(uniform(rng, 0, 3)));
    }
    default: return backplane::detail::unary(ctx, op, a);
    }
}

/// A random pooling window for a source of extents ne (pool_2d's when two_d, else
/// pool_1d's): max or avg, kernels of 1 to 5 cells, strides of 1 to 3 and paddings of 0
/// up to the kernel's extent, shrunk to fit the padded source. avg's windows may hold
/// padding only; max's always reach the source (a window of padding only gives -FLT_MAX,
/// whose square would hide every other element's error in an NMSE).
inline pool_window random_pool_window(std::mt19937& rng, const extents& ne, bool two_d) {
    pool_window w;
    w.op = rng() % 2 != 0 ? pool_op::avg : pool_op::max;
    const std::uint32_t reach = w.op == pool_op::max ? 0 : 1; // paddings below the kernel, or up to it
    const auto draw = [&](std::int64_t n, std::int32_t& k, std::int32_t& s, std::int32_t& p) {
        k = static_cast<std::int32_t>(1 + rng() % 5);
        s = static_cast<std::int32_t>(1 + rng() % 3);
        p = static_cast<std::int32_t>(rng() % (static_cast<std::uint32_t>(k) + reach));
        k = static_cast<std::int32_t>(std::min<std::int64_t>(k, n + 2 * std::int64_t{p}));
    };
    w.avg_over_inside = !two_d;
    draw(ne[0], w.k0, w.s0, w.p0);
    if (two_d) draw(ne[1], w.k1, w.s1, w.p1);
    return w;
}

/// The modes upscale takes, each a scale_mode with its flags (antialiased bilinear apart).
inline constexpr std::uint32_t upscale_modes[] = {static_cast<std::uint32_t>(scale_mode::nearest),
                                                  static_cast<std::uint32_t>(scale_mode::bilinear),
                                                  static_cast<std::uint32_t>(scale_mode::bicubic),
                                                  static_cast<std::uint32_t>(scale_mode::bilinear) | scale_antialias};

/// Random result extents for upscaling a source of extents ne: each from 1 to twice
/// the source's plus one (up and down).
inline extents random_upscale_extents(std::mt19937& rng, const extents& ne) {
    extents r{};
    for (std::size_t i = 0; i < max_dims; ++i) r[i] = 1 + static_cast<std::int64_t>(rng() % static_cast<std::uint32_t>(2 * ne[i] + 1));
    return r;
}

/// pad_reflect_1d (reflect) of a by random pads below a.ne0, or roll by random shifts of
/// magnitude below each extent.
inline tensor* remap_of(context& ctx, tensor* a, bool reflect, std::mt19937& rng) {
    const auto below = [&](std::int64_t n) { return static_cast<int>(rng() % static_cast<std::uint32_t>(n)); };
    if (reflect) return pad_reflect_1d(ctx, a, below(a->ne[0]), below(a->ne[0]));
    std::array<int, max_dims> s{};
    for (std::size_t i = 0; i < max_dims; ++i) s[i] = below(a->ne[i]) * (rng() % 2 != 0 ? -1 : 1);
    return roll(ctx, a, s[0], s[1], s[2], s[3]);
}

/// pool_2d of a by w, or pool_1d when w is pool_1d's (avg_over_inside).
inline tensor* pool_of(context& ctx, tensor* a, const pool_window& w) {
    if (w.avg_over_inside) return pool_1d(ctx, a, w.op, w.k0, w.s0, w.p0);
    return pool_2d(ctx, a, w.op, w.k0, w.k1, w.s0, w.s1, w.p0, w.p1);
}

} // namespace backplane::conformance
