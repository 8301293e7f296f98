#pragma once
// The CPU's kernels of fused groups (core/fusion.hpp): a group is one step of a plan,
// its threads meet once (or not at all) instead of once per node, and its intermediates
// stay in registers or in the cache lines the thread just wrote.
//
//   rms_norm_mul         each row normalised and multiplied by w in one pass
//                        (fast::rms_norm_mul)
//   mul_mat_add          the quantized mul_mat's threads add the bias to each block of
//                        results they have just written (mul_mat_epilogue)
//   glu_pair             b quantized once for both products; the up product's blocks
//                        are turned into silu(gate) * up by the thread that computed
//                        them, the gate block being that thread's own too (both
//                        products split alike): swiglu only
//   rope_set_rows        each thread ropes its tokens and writes them into the cache
//                        rows at once (no barrier between the two)
//   soft_max_scale_mask  soft_max reads x * scale + mask (fast::soft_max_of)
//
// accepts() says which groups the CPU fuses: those whose fast kernels apply (quantized
// weights for the two mul_mat groups). Reference mode fuses nothing, and a plan made
// fused and re-scheduled into reference mode computes each group's nodes in turn
// (run_parts), with a barrier between them.

#include <backplane/backends/cpu/compute.hpp>
#include <backplane/core/fusion.hpp>

#include <algorithm>
#include <cstdint>

namespace backplane::cpu {

namespace fused_detail {

using i64 = std::int64_t;

template <class = void>
inline bool quantized_fast(const tensor& mm) noexcept {
    return is_quantized(mm.src[0]->type) && fast::mul_mat_applies(mm);
}

/// The soft_max group's pieces: x, mask (or null), scale.
struct soft_max_operands {
    const tensor* x;
    const tensor* mask;
    float scale;
};
template <class = void>
inline soft_max_operands soft_max_of(const fused_group& g) noexcept {
    soft_max_operands o{g.parts[0]->src[0], nullptr, 1.0f};
    for (const tensor* t : g.parts) {
        if (t == nullptr) break;
        if (t->op == op_kind::scale) o.scale = t->param<float>(0);
        if (t->op == op_kind::add) o.mask = t->src[1];
    }
    return o;
}

template <class = void>
inline float* frow(const tensor& t, i64 i1, i64 i2, i64 i3) noexcept {
    return reinterpret_cast<float*>(const_cast<std::byte*>(kernels::row_ptr(t, i1, i2, i3)));
}

/// row(n, i2, i3) for columns [n0, n1) of matrix bi of a product shaped like t (the
/// block a mul_mat_epilogue is handed).
template <class Row>
inline void for_block_columns(const tensor& t, long long bi, long long n0, long long n1, Row&& row) noexcept {
    const i64 i2 = bi % t.ne[2], i3 = bi / t.ne[2];
    for (i64 n = n0; n < n1; ++n) row(n, i2, i3);
}

struct bias_ctx {
    const tensor* mm;
    const tensor* bias;
    tensor* out;
    isa level;
};
template <class = void>
inline void add_bias(const mul_mat_epilogue& e, long long bi, long long m0, long long m1, long long n0,
                     long long n1) noexcept {
    const auto& c = *static_cast<const bias_ctx*>(e.ctx);
    const tensor& b = *c.bias;
    for_block_columns(*c.mm, bi, n0, n1, [&](i64 n, i64 i2, i64 i3) {
        const float* pb = frow(b, n % b.ne[1], i2 % b.ne[2], i3 % b.ne[3]);
        fast::add_span(c.level, frow(*c.mm, n, i2, i3) + m0, pb + m0, frow(*c.out, n, i2, i3) + m0, m1 - m0);
    });
}

struct swiglu_ctx {
    const tensor* gate;
    const tensor* up;
    tensor* out;
    isa level;
};
template <class = void>
inline void swiglu_block(const mul_mat_epilogue& e, long long bi, long long m0, long long m1, long long n0,
                         long long n1) noexcept {
    const auto& c = *static_cast<const swiglu_ctx*>(e.ctx);
    for_block_columns(*c.up, bi, n0, n1, [&](i64 n, i64 i2, i64 i3) {
        fast::swiglu_span(c.level, frow(*c.gate, n, i2, i3) + m0, frow(*c.up, n, i2, i3) + m0,
                          frow(*c.out, n, i2, i3) + m0, m1 - m0);
    });
}

} // namespace fused_detail

/// The groups the CPU computes fused (in the default mode).
template <class = void>
inline bool accepts(const fused_group& g) noexcept {
    using fused_detail::quantized_fast;
    const auto& p = g.parts;
    switch (g.kind) {
    case fusion::rms_norm_mul: return fast::rowwise_applies(*p[0]) && fast::rowwise_applies(*p[1]);
    case fusion::mul_mat_add: return quantized_fast(*p[0]) && fast::rowwise_applies(*p[1]);
    case fusion::glu_pair:
        return quantized_fast(*p[0]) && quantized_fast(*p[1]) && fast::rowwise_applies(*p[2]) &&
               p[2]->param<std::int32_t>(0) == static_cast<std::int32_t>(glu_op::swiglu);
    case fusion::rope_set_rows: return true;
    case fusion::soft_max_scale_mask: {
        const tensor* sm = p[1] == nullptr ? p[0] : p[2] == nullptr ? p[1] : p[2];
        const auto o = fused_detail::soft_max_of(g);
        return fast::f32_rows(o.x) && fast::f32_rows(sm) && (o.mask == nullptr || fast::f32_rows(o.mask));
    }
    }
    return false;
}

/// The group's last node (its result).
template <class = void>
inline tensor& result_of(const fused_group& g) noexcept {
    std::size_t k = 0;
    while (k + 1 < g.parts.size() && g.parts[k + 1] != nullptr) ++k;
    return *g.parts[k];
}

/// Threads worth giving the group out of n_threads: the most any of its nodes is worth,
/// at most one per token for rope_set_rows.
template <class = void>
inline int n_tasks(const fused_group& g, int n_threads) noexcept {
    int nth = 1;
    for (const tensor* t : g.parts)
        if (t != nullptr) nth = std::max(nth, n_tasks(*t, n_threads));
    if (g.kind == fusion::rope_set_rows) nth = static_cast<int>(std::clamp<std::int64_t>(g.parts[0]->ne[2], 1, nth));
    return nth;
}

/// Work buffer bytes for the group with nth threads: the most any of its nodes needs.
template <class = void>
inline std::size_t work_size(const fused_group& g, int nth, bool reference) noexcept {
    std::size_t w = 0;
    for (const tensor* t : g.parts)
        if (t != nullptr) w = std::max(w, work_size(*t, nth, reference));
    return w;
}

/// The group's nodes one by one (thread p.ith's share of each), a barrier between them.
/// Every thread passes every barrier, also after a failure, which is reported at the end.
template <class = void>
[[nodiscard]] inline errc run_parts(const compute_params& p, const fused_group& g) noexcept {
    errc first = errc::ok;
    for (std::size_t k = 0; k < g.parts.size() && g.parts[k] != nullptr; ++k) {
        if (k != 0) p.barrier();
        const errc e = compute_forward(p, *g.parts[k]);
        if (first == errc::ok) first = e;
    }
    return first;
}

/// Thread p.ith's share of a group accepts() took (see the header comment).
template <class = void>
[[nodiscard]] inline errc run_fused_here(const compute_params& p, const fused_group& g) noexcept {
    using namespace fused_detail;
    if (p.reference) return run_parts(p, g);
    tensor* const* t = g.parts.data();
    switch (g.kind) {
    case fusion::rms_norm_mul: fast::rms_norm_mul(p, *t[0], *t[1]); return errc::ok;
    case fusion::mul_mat_add: {
        const bias_ctx c{t[0], t[1]->src[0] == t[0] ? t[1]->src[1] : t[1]->src[0], t[1], p.level};
        const mul_mat_epilogue e{&add_bias<>, &c};
        compute_params q = p;
        q.epilogue = &e;
        return fast::mul_mat(q, *t[0]);
    }
    case fusion::glu_pair: {
        if (const errc e = fast::mul_mat(p, *t[0]); e != errc::ok) return e;
        const swiglu_ctx c{t[0], t[1], t[2], p.level};
        const mul_mat_epilogue e{&swiglu_block<>, &c};
        compute_params q = p;
        q.epilogue = &e;
        q.b_ready = true;
        return fast::mul_mat(q, *t[1]);
    }
    case fusion::rope_set_rows: {
        const i64 heads = t[0]->ne[1];
        const auto [t0, t1] = split_work(t[0]->ne[2], p);
        kernels::rope_range(*t[0], t0 * heads, t1 * heads);
        return kernels::set_rows_range(*t[1], t0, t1) ? errc::ok : errc::out_of_range;
    }
    case fusion::soft_max_scale_mask: {
        const soft_max_operands o = soft_max_of(g);
        fast::soft_max_of(p, result_of(g), *o.x, o.mask, o.scale);
        return errc::ok;
    }
    }
    return errc::not_supported;
}

#ifdef BACKPLANE_CPU_SEPARATE_KERNELS
namespace detail {
/// run_fused_here, compiled once (see run_kernel, compute.hpp).
[[nodiscard]] errc run_fused_separate(const compute_params& p, const fused_group& g) noexcept;
} // namespace detail
#endif

/// run_fused_here, or with BACKPLANE_CPU_SEPARATE_KERNELS a call into the translation unit
/// that compiles the kernels once (see run_kernel, compute.hpp).
template <class = void>
[[nodiscard]] inline errc run_fused(const compute_params& p, const fused_group& g) noexcept {
#ifdef BACKPLANE_CPU_SEPARATE_KERNELS
    return detail::run_fused_separate(p, g);
#else
    return run_fused_here(p, g);
#endif
}

#ifdef BACKPLANE_CPU_DEFINE_KERNELS
// The one translation unit of a program that compiles the kernels (src/backplane_cpu_kernels.cpp).
#ifndef BACKPLANE_CPU_SEPARATE_KERNELS
#error "BACKPLANE_CPU_DEFINE_KERNELS needs BACKPLANE_CPU_SEPARATE_KERNELS, defined in every translation unit of the program"
#endif
errc detail::run_kernel_separate(const compute_params& p, tensor& node, kernel_kind k) noexcept {
    return run_kernel_here(p, node, k);
}
errc detail::run_fused_separate(const compute_params& p, const fused_group& g) noexcept {
    return run_fused_here(p, g);
}
#endif

} // namespace backplane::cpu
