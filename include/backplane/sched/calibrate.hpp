#pragma once
// Calibration of a cost model (sched/cost_model.hpp): short micro-benchmarks run on each
// backend of a backend set, and copies timed between their buffer types.
//
//     cost_model m;
//     (void)m.load(cost_model::default_path());     // earlier measurements, if any
//     if (auto s = calibrate(m, set); !s) ...      // measures what m lacks
//     (void)m.save(cost_model::default_path());
//
// Per backend (about 0.1 to 1 s on a CPU or lavapipe; each figure the best of a few runs
// after a warm-up, each run a compute() then synchronize()):
//   latencies     a chain of 16 tiny nodes and a single one: the slope is the node
//                 latency, the rest of the single run the split latency;
//   mul_mat       512x512 weights by 256 columns (the wide flop rate), by 16 columns
//                 (the narrow rate) and a 2048x2048 matrix by one vector (the rate of
//                 reading weights);
//   element-wise  add of 1 Mi floats; rows: rms_norm of 1024 rows of 1024; data: cont of
//                 a transposed 1024x1024 matrix.
// A figure the backend cannot measure (an op it does not support, a failure) keeps its
// default. Links: for every ordered pair of the set's buffer types where the second
// backend cannot read the first type in place, a 4 KiB and a 16 MiB copy give latency and
// bandwidth (through the destination's asynchronous copy when it has one, else through
// host memory, as the scheduler copies).

#include <backplane/core/context.hpp>
#include <backplane/core/graph.hpp>
#include <backplane/core/ops.hpp>
#include <backplane/memory/alloc_tensors.hpp>
#include <backplane/memory/tensor_copy.hpp>
#include <backplane/memory/tensor_io.hpp>
#include <backplane/sched/backend_set.hpp>
#include <backplane/sched/cost_model.hpp>
#include <backplane/sched/scheduler.hpp>

#include <algorithm>
#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace backplane {

struct calibration_options {
    bool force = false;   ///< measure backends and links the model already has, too
    int repetitions = 3;  ///< timed runs per figure (the best counts), after one warm-up
};

namespace detail {

// Runs build(ctx) -> output on backend i of `set` and returns the best time of a few
// compute + synchronize rounds; nothing when the backend does not support a node or
// anything fails.
template <backend_set Set>
std::optional<double> time_on(Set& set, std::size_t i, int reps, const std::function<tensor*(context&)>& build) {
    try {
        context ctx({.no_alloc = true});
        tensor* out = build(ctx);
        if (out == nullptr) return std::nullopt;
        graph g(out);
        for (tensor* n : g.nodes())
            if (!is_view_op(n->op) && !set.supports_op(i, *n)) return std::nullopt;
        auto bufs = alloc_tensors(ctx, set.buffer_type(i));
        if (!bufs) return std::nullopt;
        for (tensor* l : g.leafs())
            if (l->data != nullptr && !tensor_memset(*l, 0, 0, l->nbytes())) return std::nullopt;
        double best = 1e30;
        for (int r = 0; r <= reps; ++r) {
            const auto t0 = std::chrono::steady_clock::now();
            if (!set.compute(i, g)) return std::nullopt;
            if (!set.synchronize(i)) return std::nullopt;
            const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            if (r > 0) best = std::min(best, s); // the first run warms up
        }
        return best;
    } catch (const std::exception&) {
        return std::nullopt;
    }
}

inline tensor* tiny_chain(context& ctx, int n, op_kind op) {
    tensor* x = ctx.new_tensor_1d(elem_type::f32, 64);
    tensor* w = op == op_kind::mul_mat ? ctx.new_tensor_2d(elem_type::f32, 64, 64) : nullptr;
    for (int k = 0; k < n; ++k) x = op == op_kind::mul_mat ? mul_mat(ctx, w, x) : op == op_kind::add ? add(ctx, x, x) : scale(ctx, x, 0.5f);
    return x;
}

} // namespace detail

/// Measures backend i of `set` (see the header comment). The profile's key is
/// backend_key(name, description).
template <backend_set Set>
backend_profile measure_backend(Set& set, std::size_t i, const calibration_options& o = {}) {
    backend_profile p;
    p.key = backend_key(set.name(i), set.description(i));
    const int reps = std::max(1, o.repetitions);
    const auto time = [&](const std::function<tensor*(context&)>& build) { return detail::time_on(set, i, reps, build); };

    // latencies, from the first op the backend runs
    for (const op_kind op : {op_kind::scale, op_kind::add, op_kind::mul_mat}) {
        const auto one = time([&](context& c) { return detail::tiny_chain(c, 1, op); });
        const auto many = time([&](context& c) { return detail::tiny_chain(c, 17, op); });
        if (!one || !many) continue;
        p.node_latency = std::max(1e-8, (*many - *one) / 16.0);
        p.split_latency = std::max(1e-8, *one - p.node_latency);
        p.measured = true;
        break;
    }
    const auto rate = [&](std::optional<double> t, double amount, double& out) {
        if (!t) return;
        const double busy = *t - p.split_latency - p.node_latency;
        out = amount / std::max(busy, *t * 0.05); // latencies measured apart never eat the whole run
        p.measured = true;
    };
    const auto matmul = [&](std::int64_t k, std::int64_t m, std::int64_t n) {
        return [=](context& c) {
            return mul_mat(c, c.new_tensor_2d(elem_type::f32, k, m), c.new_tensor_2d(elem_type::f32, k, n));
        };
    };
    rate(time(matmul(512, 512, 256)), 2.0 * 512 * 512 * 256, p.mul_mat_flops);
    rate(time(matmul(512, 512, 16)), 2.0 * 512 * 512 * 16, p.mul_mat_narrow_flops);
    rate(time(matmul(2048, 2048, 1)), 4.0 * (2048.0 * 2048 + 2 * 2048 + 2048), p.mul_mat_bytes);
    p.mul_mat_narrow_flops = std::min(p.mul_mat_narrow_flops, p.mul_mat_flops);
    constexpr std::int64_t n = 1 << 20;
    rate(time([](context& c) {
             return add(c, c.new_tensor_1d(elem_type::f32, n), c.new_tensor_1d(elem_type::f32, n));
         }),
         12.0 * n, p.elementwise_bytes);
    rate(time([](context& c) { return rms_norm(c, c.new_tensor_2d(elem_type::f32, 1024, 1024)); }), 8.0 * n,
         p.rows_bytes);
    rate(time([](context& c) { return cont(c, transpose(c, c.new_tensor_2d(elem_type::f32, 1024, 1024))); }),
         8.0 * n, p.data_bytes);
    return p;
}

/// Times copies from buffer type of backend `from` to that of backend `to`.
template <backend_set Set>
link_profile measure_link(Set& set, std::size_t from, std::size_t to, const calibration_options& o = {}) {
    link_profile l;
    const buffer_type_ref src_bt = set.buffer_type(from);
    const buffer_type_ref dst_bt = set.buffer_type(to);
    l.from = std::string(src_bt.name());
    l.to = std::string(dst_bt.name());
    const int reps = std::max(1, o.repetitions);
    const auto time_copy = [&](std::int64_t elems) -> std::optional<double> {
        try {
            context sc({.no_alloc = true});
            context dc({.no_alloc = true});
            tensor* s = sc.new_tensor_1d(elem_type::f32, elems);
            tensor* d = dc.new_tensor_1d(elem_type::f32, elems);
            auto sb = alloc_tensors(sc, src_bt);
            auto db = alloc_tensors(dc, dst_bt);
            if (!sb || !db || !tensor_memset(*s, 0, 0, s->nbytes())) return std::nullopt;
            std::vector<std::byte> staging;
            double best = 1e30;
            for (int r = 0; r <= reps; ++r) {
                const auto t0 = std::chrono::steady_clock::now();
                if (set.copy_async(to, *s, *d)) {
                    if (!set.synchronize(to)) return std::nullopt;
                } else if (!tensor_copy(*s, *d, staging)) {
                    return std::nullopt;
                }
                const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
                if (r > 0) best = std::min(best, t);
            }
            return best;
        } catch (const std::exception&) {
            return std::nullopt;
        }
    };
    const auto small = time_copy(1024);
    const auto big = time_copy(std::int64_t{4} << 20);
    if (small && big) {
        l.latency = std::max(1e-8, *small);
        l.bandwidth = (16.0 * 1024 * 1024 - 4096.0) / std::max(*big - *small, 1e-9);
        l.measured = true;
    }
    return l;
}

/// Adds to `m` a profile for every backend of `set` and a link for every pair of its
/// buffer types that needs copies, measuring those `m` lacks (all of them with
/// o.force). Returns whether anything was measured.
template <backend_set Set>
bool calibrate(cost_model& m, Set& set, const calibration_options& o = {}) {
    bool any = false;
    for (std::size_t i = 0; i < set.size(); ++i) {
        if (!o.force && m.find(backend_key(set.name(i), set.description(i))) != nullptr) continue;
        m.set(measure_backend(set, i, o));
        any = true;
    }
    for (std::size_t i = 0; i < set.size(); ++i)
        for (std::size_t j = 0; j < set.size(); ++j) {
            const buffer_type_ref a = set.buffer_type(i);
            const buffer_type_ref b = set.buffer_type(j);
            if (i == j || a == b || a.name() == b.name() || set.supports_buffer_type(j, a)) continue;
            if (!o.force && m.find_link(a.name(), b.name()) != nullptr) continue;
            m.set_link(measure_link(set, i, j, o));
            any = true;
        }
    return any;
}

} // namespace backplane
