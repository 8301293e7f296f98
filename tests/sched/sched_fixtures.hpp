#pragma once
// Shared pieces of the scheduler tests: filling tensors wherever they live, reading them
// back, and a generator of random graphs whose weights can be placed on any device.

#include "../support/ref_oracle.hpp"
#include "../support/test_backend.hpp"

#include <backplane/backplane.hpp>
#include <backplane/sched.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <deque>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace backplane::test {

/// Values in [-1, 1) from `seed`, written to t (contiguous, f32 or f16) through
/// tensor_set, so t may live in any buffer.
inline void fill_seeded(tensor& t, std::uint32_t seed, float scale = 1.0f) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    const auto n = static_cast<std::size_t>(t.nelements());
    if (t.type == elem_type::f16) {
        std::vector<f16_t> v(n);
        for (auto& x : v) x = f32_to_f16(scale * u(rng));
        REQUIRE(tensor_set(t, v.data(), 0, n * sizeof(f16_t)));
    } else {
        REQUIRE(t.type == elem_type::f32);
        std::vector<float> v(n);
        for (auto& x : v) x = scale * u(rng);
        REQUIRE(tensor_set(t, v.data(), 0, n * sizeof(float)));
    }
}

/// An f32 graph input [ne0, ne1] (flagged input: the scheduler places it).
inline tensor* new_input(context& ctx, std::int64_t ne0, std::int64_t ne1, std::string name = "x") {
    tensor* x = ctx.new_tensor_2d(elem_type::f32, ne0, ne1);
    x->name = std::move(name);
    x->set_input();
    return x;
}

/// A host f32 tensor [ne0, ne1] filled from `seed` (for references built beside a test).
inline tensor* host_filled(context& host, std::int64_t ne0, std::int64_t ne1, std::uint32_t seed) {
    tensor* t = host.new_tensor_2d(elem_type::f32, ne0, ne1);
    fill_seeded(*t, seed);
    return t;
}

/// All values of a contiguous f32 tensor, wherever it lives.
inline std::vector<float> read_f32(const tensor& t) {
    REQUIRE(t.type == elem_type::f32);
    std::vector<float> v(static_cast<std::size_t>(t.nelements()));
    REQUIRE(tensor_get(t, v.data(), 0, v.size() * sizeof(float)));
    return v;
}

/// The values of `out`, a node of a graph in host memory, computed by the CPU
/// backend's reference kernels.
inline std::vector<float> reference_values(tensor* out) {
    cpu_backend ref(cpu_backend_params{.n_threads = 1, .reference = true});
    REQUIRE(ref.compute(graph(out)));
    return read_f32(*out);
}


/// The op kinds the random graphs use (besides the view ops, which every backend runs).
inline constexpr op_kind random_ops[] = {op_kind::mul_mat, op_kind::add,  op_kind::mul,      op_kind::scale,
                                         op_kind::silu,    op_kind::sqr,  op_kind::rms_norm, op_kind::soft_max,
                                         op_kind::cont,    op_kind::gelu};

/// A random graph: activations of shape [d, t], weights [d, d] (f32 or f16) and norm
/// vectors [d], built from `seed` alone, so building it twice (once with weights on
/// devices, once all in host memory) gives the same graph. `new_weight(ne0, ne1, type,
/// home)` makes each weight; `home` is drawn in [0, n_homes) so the caller can put the
/// weight on a device of its choice. Inputs are flagged input (the scheduler places
/// them); outputs are flagged output.
struct random_graph {
    std::vector<tensor*> weights;
    std::vector<int> homes;
    std::vector<tensor*> inputs;
    std::vector<tensor*> outputs;
    graph g;
    bool has_f16 = false;
};

using weight_maker = std::function<tensor*(std::int64_t ne0, std::int64_t ne1, elem_type type, int home)>;

inline random_graph make_random_graph(context& ctx, std::uint32_t seed, int n_homes, const weight_maker& new_weight) {
    std::mt19937 rng(seed);
    const auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<std::uint32_t>(n)); };
    const std::int64_t d = std::int64_t{8} << pick(3); // 8, 16, 32
    const std::int64_t t = 1 + pick(6);
    random_graph r;
    const auto weight = [&](std::int64_t ne1, bool maybe_f16) {
        const elem_type type = maybe_f16 && pick(4) == 0 ? elem_type::f16 : elem_type::f32;
        const int home = pick(n_homes);
        tensor* w = new_weight(d, ne1, type, home);
        w->name = "w" + std::to_string(r.weights.size());
        r.weights.push_back(w);
        r.homes.push_back(home);
        r.has_f16 = r.has_f16 || type == elem_type::f16;
        return w;
    };
    std::vector<tensor*> pool;
    const int n_inputs = 1 + pick(2);
    for (int i = 0; i < n_inputs; ++i) {
        tensor* x = ctx.new_tensor_2d(elem_type::f32, d, t);
        x->name = "x" + std::to_string(i);
        x->set_input();
        r.inputs.push_back(x);
        pool.push_back(x);
    }
    const int n_nodes = 4 + pick(20);
    for (int k = 0; k < n_nodes; ++k) {
        // prefer recent values, so that graphs are deep as well as wide
        const auto operand = [&]() {
            const int n = static_cast<int>(pool.size());
            const int back = std::min(n - 1, pick(4));
            return pool[static_cast<std::size_t>(pick(2) == 0 ? n - 1 - back : pick(n))];
        };
        tensor* a = operand();
        tensor* y = nullptr;
        switch (random_ops[static_cast<std::size_t>(pick(static_cast<int>(std::size(random_ops))))]) {
        case op_kind::mul_mat: y = mul_mat(ctx, weight(d, true), a); break;
        case op_kind::add: y = add(ctx, a, operand()); break;
        case op_kind::mul: y = pick(2) ? mul(ctx, a, operand()) : mul(ctx, a, weight(1, false)); break;
        case op_kind::scale: y = scale(ctx, a, 0.5f + 0.1f * static_cast<float>(pick(5))); break;
        case op_kind::silu: y = silu(ctx, a); break;
        case op_kind::sqr: y = sqr(ctx, scale(ctx, a, 0.5f)); break;
        case op_kind::rms_norm: y = rms_norm(ctx, a); break;
        case op_kind::soft_max: y = soft_max(ctx, a); break;
        case op_kind::gelu: y = gelu(ctx, a); break;
        default: // a round trip through a transposed view: view ops and a non-contiguous source
            y = cont(ctx, transpose(ctx, cont(ctx, transpose(ctx, a))));
            break;
        }
        y->name = "n" + std::to_string(k);
        pool.push_back(y);
        if (pick(5) == 0) {
            y->set_output();
            r.outputs.push_back(y);
        }
    }
    tensor* last = pool.back();
    if (r.outputs.empty() || r.outputs.back() != last) {
        last->set_output();
        r.outputs.push_back(last);
    }
    for (tensor* o : r.outputs) r.g.build_forward(o);
    return r;
}

/// Fills the weights (or the inputs) of a random graph from their indices: the same
/// values in every build of the same graph.
inline void fill_weights(random_graph& r, std::uint32_t seed) {
    for (std::size_t i = 0; i < r.weights.size(); ++i) fill_seeded(*r.weights[i], seed * 131u + static_cast<std::uint32_t>(i));
}
inline void fill_inputs(random_graph& r, std::uint32_t seed) {
    for (std::size_t i = 0; i < r.inputs.size(); ++i) // an input no node reads is not in the graph
        if (r.g.contains(r.inputs[i])) fill_seeded(*r.inputs[i], seed * 7919u + static_cast<std::uint32_t>(i));
}

/// Random graph `seed` with its weights allocated where `homes` says (one buffer per
/// weight, weights filled; inputs left for fill_inputs once the graph is allocated).
struct random_setup {
    context graph_ctx{context_params{.no_alloc = true}};
    std::deque<context> weight_ctxs;
    std::vector<buffer_list> weight_bufs;
    random_graph r;

    random_setup(std::uint32_t seed, const std::vector<buffer_type_ref>& homes) {
        r = make_random_graph(graph_ctx, seed, static_cast<int>(homes.size()),
                              [&](std::int64_t ne0, std::int64_t ne1, elem_type type, int home) {
                                  context& wc = weight_ctxs.emplace_back(context_params{.no_alloc = true});
                                  tensor* w = wc.new_tensor_2d(type, ne0, ne1);
                                  auto bufs = alloc_tensors(wc, homes[static_cast<std::size_t>(home)], buffer_usage::weights);
                                  REQUIRE(bufs);
                                  weight_bufs.push_back(std::move(*bufs));
                                  return w;
                              });
        fill_weights(r, seed);
    }
};

/// The outputs of random graph `seed` built with every weight in host memory, computed
/// by the CPU backend's reference kernels: what any schedule of it must give.
inline std::vector<std::vector<float>> random_reference_outputs(std::uint32_t seed, int n_homes) {
    context ctx(context_params{.no_alloc = false});
    random_graph r = make_random_graph(ctx, seed, n_homes, [&](std::int64_t ne0, std::int64_t ne1, elem_type type, int) {
        return ctx.new_tensor_2d(type, ne0, ne1);
    });
    fill_weights(r, seed);
    fill_inputs(r, seed);
    cpu_backend cpu(cpu_backend_params{.n_threads = 1, .reference = true});
    REQUIRE(cpu.compute(r.g));
    std::vector<std::vector<float>> out;
    for (tensor* o : r.outputs) out.push_back(read_f32(*o));
    return out;
}

/// A set of test devices whose supported ops are a random subset (views always).
inline test_device_params random_support(std::string name, std::uint32_t seed) {
    std::mt19937 rng(seed);
    std::uint32_t mask = 0;
    for (std::size_t i = 0; i < std::size(random_ops); ++i)
        if (rng() % 3 != 0) mask |= 1u << i;
    test_device_params p;
    p.name = std::move(name);
    p.supports = [mask](const tensor& t) {
        for (std::size_t i = 0; i < std::size(random_ops); ++i)
            if (random_ops[i] == t.op) return (mask >> i & 1u) != 0;
        return false;
    };
    return p;
}

} // namespace backplane::test
