#pragma once
// Row-wise ops (a row is dimension 0): sum_rows, mean, sum, argmax, norm, rms_norm,
// l2_norm, soft_max; and group_norm (groups of rows: channels of dimension 2).
// Reductions accumulate in double (as ggml's ggml_float) so long rows stay accurate.
//
// In place (norm, rms_norm, l2_norm, group_norm, soft_max): dst may share a's memory with a's layout. Every
// pass that writes element i of a row has read element i of a just before, and later
// passes read dst, never a, so the row is correct although a is overwritten under it.

#include <backplane/backends/cpu/kernels/common.hpp>
#include <backplane/core/alibi.hpp>
#include <backplane/core/channel_groups.hpp>

#include <algorithm>

#include <cmath>
#include <limits>

namespace backplane::cpu::kernels {

namespace detail {
/// The sum of row (i1, i2, i3) of a (storage type T), in double.
template <class T> double row_sum(const tensor& a, i64 i1, i64 i2, i64 i3) noexcept {
    const std::byte* pa = row_ptr(a, i1, i2, i3);
    double sum = 0.0;
    for (i64 i0 = 0; i0 < a.ne[0]; ++i0)
        sum += load<T>(pa + static_cast<std::size_t>(i0) * a.nb[0]);
    return sum;
}
} // namespace detail

/// sum_rows: dst f32 [1, ne1, ne2, ne3] = sum of each row of a (f32, f16, bf16); mean:
/// that sum rounded to f32 and divided by ne0 in f32, as ggml.
template <class = void>
inline void sum_rows(const compute_params& p, tensor& dst) noexcept {
    const tensor& a = *dst.src[0];
    const bool mean = dst.op == op_kind::mean;
    const work_range rows = split_work(a.nrows(), p); // clang < 16 cannot capture bindings
    const i64 r0 = rows.begin, r1 = rows.end;
    visit_float(a.type, [&]<class T>() {
        for (i64 r = r0; r < r1; ++r) {
            const auto [i1, i2, i3] = row_of(r, a.ne);
            const auto sum = static_cast<float>(detail::row_sum<T>(a, i1, i2, i3));
            store<float>(row_ptr(dst, i1, i2, i3), mean ? sum / static_cast<float>(a.ne[0]) : sum);
        }
    });
}

/// sum: dst (one element of a's type) = the sum of every element of a, row sums added in
/// double (ggml's order), rounded once. One thread computes it (split_units is 1).
template <class = void>
inline void sum(const compute_params& p, tensor& dst) noexcept {
    if (p.ith != 0) return;
    const tensor& a = *dst.src[0];
    visit_float(a.type, [&]<class T>() {
        double total = 0.0;
        for (i64 r = 0; r < a.nrows(); ++r) {
            const auto [i1, i2, i3] = row_of(r, a.ne);
            total += detail::row_sum<T>(a, i1, i2, i3);
        }
        store<T>(static_cast<std::byte*>(dst.data), static_cast<float>(total));
    });
}

/// argmax: dst i32 [ne1, ne2, ne3] = index of the largest value of each row of a, the
/// last one on ties (as ggml); NaNs never win (0 for a row of NaNs).
template <class = void>
inline void argmax(const compute_params& p, tensor& dst) noexcept {
    const tensor& a = *dst.src[0];
    const work_range rows = split_work(a.nrows(), p); // clang < 16 cannot capture bindings
    const i64 r0 = rows.begin, r1 = rows.end;
    visit_float(a.type, [&]<class T>() {
        for (i64 r = r0; r < r1; ++r) {
            const auto [i1, i2, i3] = row_of(r, a.ne);
            const std::byte* pa = row_ptr(a, i1, i2, i3);
            float best = -std::numeric_limits<float>::infinity();
            i64 best_i = 0;
            for (i64 i0 = 0; i0 < a.ne[0]; ++i0) {
                const float v = load<T>(pa + static_cast<std::size_t>(i0) * a.nb[0]);
                if (v >= best) {
                    best = v;
                    best_i = i0;
                }
            }
            // the result's element (i1, i2, i3) sits in its dims 0, 1, 2
            std::byte* pd =
                static_cast<std::byte*>(dst.data) + static_cast<std::size_t>(i1) * dst.nb[0] +
                static_cast<std::size_t>(i2) * dst.nb[1] + static_cast<std::size_t>(i3) * dst.nb[2];
            store_i32(pd, static_cast<std::int32_t>(best_i));
        }
    });
}

namespace detail {
/// The factor that scales a row (or group) of n values whose squared deviations from
/// their mean sum to sum2: 1 / sqrt(sum2 / n + eps), or for l2_norm (whose "mean" is 0) 1 /
/// max(sqrt(sum2), eps).
inline double norm_scale(op_kind op, double sum2, i64 n, double eps) noexcept {
    if (op == op_kind::l2_norm) return 1.0 / std::max(std::sqrt(sum2), eps);
    return 1.0 / std::sqrt(sum2 / static_cast<double>(n) + eps);
}
} // namespace detail

/// norm: (x - mean) / sqrt(var + eps) per row; rms_norm: x / sqrt(mean(x^2) + eps);
/// l2_norm: x / max(sqrt(sum(x^2)), eps). f32.
template <class = void>
inline void norm(const compute_params& p, tensor& dst) noexcept {
    const tensor& a = *dst.src[0];
    const i64 ne0 = a.ne[0];
    const float eps = dst.param<float>(0);
    const bool centred = dst.op == op_kind::norm;
    const auto [r0, r1] = split_work(a.nrows(), p);
    for (i64 r = r0; r < r1; ++r) {
        const auto [i1, i2, i3] = row_of(r, a.ne);
        const std::byte* pa = row_ptr(a, i1, i2, i3);
        std::byte* pd = row_ptr(dst, i1, i2, i3);
        auto x = [&](i64 i) { return load<float>(pa + static_cast<std::size_t>(i) * a.nb[0]); };
        double mean = 0.0;
        if (centred) {
            for (i64 i = 0; i < ne0; ++i)
                mean += x(i);
            mean /= static_cast<double>(ne0);
        }
        double sum2 = 0.0;
        for (i64 i = 0; i < ne0; ++i) {
            const double v = x(i) - mean;
            sum2 += v * v;
        }
        const double inv = detail::norm_scale(dst.op, sum2, ne0, eps);
        for (i64 i = 0; i < ne0; ++i)
            store<float>(pd + static_cast<std::size_t>(i) * dst.nb[0],
                         static_cast<float>((x(i) - mean) * inv));
    }
}

namespace detail {
/// Calls f(pa, pd) for the rows (i1, i2, i3) of a and dst with channel i2 in [c0, c1).
template <class F> void for_group_rows(const tensor& a, tensor& dst, i64 c0, i64 c1, i64 i3, F&& f) noexcept {
    for (i64 i2 = c0; i2 < c1; ++i2)
        for (i64 i1 = 0; i1 < a.ne[1]; ++i1)
            f(row_ptr(a, i1, i2, i3), row_ptr(dst, i1, i2, i3));
}

/// Normalises channels [c0, c1) of sample i3 as one set of values (norm's formula).
inline void normalise_group(const tensor& a, tensor& dst, i64 c0, i64 c1, i64 i3, double eps) noexcept {
    const i64 ne0 = a.ne[0];
    auto x = [&](const std::byte* pa, i64 i) { return load<float>(pa + static_cast<std::size_t>(i) * a.nb[0]); };
    double sum = 0.0;
    for_group_rows(a, dst, c0, c1, i3, [&](const std::byte* pa, std::byte*) {
        for (i64 i = 0; i < ne0; ++i) sum += x(pa, i);
    });
    const i64 n = ne0 * a.ne[1] * (c1 - c0);
    const double mean = sum / static_cast<double>(n);
    double sum2 = 0.0;
    for_group_rows(a, dst, c0, c1, i3, [&](const std::byte* pa, std::byte*) {
        for (i64 i = 0; i < ne0; ++i) sum2 += (x(pa, i) - mean) * (x(pa, i) - mean);
    });
    const double inv = norm_scale(op_kind::group_norm, sum2, n, eps);
    for_group_rows(a, dst, c0, c1, i3, [&](const std::byte* pa, std::byte* pd) {
        for (i64 i = 0; i < ne0; ++i)
            store<float>(pd + static_cast<std::size_t>(i) * dst.nb[0], static_cast<float>((x(pa, i) - mean) * inv));
    });
}
} // namespace detail

/// The units group_norm's threads share: (group, sample) pairs.
inline i64 group_norm_units(const tensor& dst) noexcept {
    return channel_groups_of(dst.src[0]->ne[2], dst.param<std::int32_t>(0)).count * dst.src[0]->ne[3];
}

/// group_norm: each group of channels (core/channel_groups.hpp) of each sample i3
/// normalised as one, in double. f32.
template <class = void>
inline void group_norm(const compute_params& p, tensor& dst) noexcept {
    const tensor& a = *dst.src[0];
    const channel_groups groups = channel_groups_of(a.ne[2], dst.param<std::int32_t>(0));
    const double eps = dst.param<float>(1);
    const auto [u0, u1] = split_work(group_norm_units(dst), p);
    for (i64 u = u0; u < u1; ++u) {
        const i64 g = u % groups.count;
        detail::normalise_group(a, dst, groups.first(g), groups.end(g), u / groups.count, eps);
    }
}

namespace detail {

/// softmax(a * scale + mask) along each row; TM is the mask's storage type (void: none).
/// The mask row is a's row index i1, broadcast over dims 2 and 3.
template <class TM> void soft_max_rows(const compute_params& p, tensor& dst) noexcept {
    const tensor& a = *dst.src[0];
    const tensor* mask = dst.src[1];
    const tensor* sinks = dst.src[2];
    const i64 ne0 = a.ne[0];
    const float scale = dst.param<float>(0);
    const float max_bias = dst.param<float>(1);
    const auto [r0, r1] = split_work(a.nrows(), p);
    for (i64 r = r0; r < r1; ++r) {
        const auto [i1, i2, i3] = row_of(r, a.ne);
        const std::byte* pa = row_ptr(a, i1, i2, i3);
        std::byte* pd = row_ptr(dst, i1, i2, i3);
        const std::byte* pm = nullptr;
        float slope = 1.0f;
        if constexpr (!std::is_void_v<TM>) {
            pm = row_ptr(*mask, i1, i2 % mask->ne[2], i3 % mask->ne[3]);
            slope = alibi::slope(max_bias, static_cast<int>(a.ne[2]), static_cast<int>(i2));
        }
        auto logit = [&](i64 i) {
            float v = load<float>(pa + static_cast<std::size_t>(i) * a.nb[0]) * scale;
            if constexpr (!std::is_void_v<TM>)
                v += slope * load<TM>(pm + static_cast<std::size_t>(i) * mask->nb[0]);
            return v;
        };
        auto out = [&](i64 i) { return pd + static_cast<std::size_t>(i) * dst.nb[0]; };

        float max = -std::numeric_limits<float>::infinity();
        for (i64 i = 0; i < ne0; ++i)
            max = std::fmax(max, logit(i));
        const float sink = sinks ? load<float>(row_ptr(*sinks, 0, 0, 0) + static_cast<std::size_t>(i2) * sinks->nb[0])
                                 : -std::numeric_limits<float>::infinity();
        max = std::fmax(max, sink);
        if (max == -std::numeric_limits<float>::infinity()) { // every position masked: no mass anywhere
            for (i64 i = 0; i < ne0; ++i)
                store<float>(out(i), 0.0f);
            continue;
        }
        double sum = 0.0;
        for (i64 i = 0; i < ne0; ++i) {
            const float e = std::exp(logit(i) - max);
            store<float>(out(i), e);
            sum += e;
        }
        if (sinks) sum += std::exp(sink - max);
        const float inv = static_cast<float>(1.0 / sum);
        for (i64 i = 0; i < ne0; ++i)
            store<float>(out(i), load<float>(out(i)) * inv);
    }
}

} // namespace detail

/// soft_max: f32 a, optional f32 or f16 mask (with ALiBi's slopes for max_bias > 0),
/// optional f32 sinks (src[2]): a row's maximum takes its head's sink, and the sum it is
/// divided by adds exp(sink - max). A row whose logits are all -inf, without a sink, is
/// all zeros (ggml's is NaN).
template <class = void>
inline void soft_max(const compute_params& p, tensor& dst) noexcept {
    const tensor* mask = dst.src[1];
    if (mask == nullptr)
        detail::soft_max_rows<void>(p, dst);
    else if (mask->type == elem_type::f16)
        detail::soft_max_rows<f16_t>(p, dst);
    else
        detail::soft_max_rows<float>(p, dst);
}

} // namespace backplane::cpu::kernels
