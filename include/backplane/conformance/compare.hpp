#pragma once
// compare_backends: the same graph on two backends, node by node or at chosen nodes.
//
//     auto r = compare_backends(cpu, vk, g, [&](std::size_t i, const tensor& a, const tensor& b) {
//         auto x = tensor_read_f32(a), y = tensor_read_f32(b);  // wherever they live
//         ...                                                   // compare; false stops
//         return true;
//     });
//
// g is computed by b1 as it is: its tensors must live where b1 computes (host memory for
// a CPU backend, b1's buffers otherwise; graph_copy(b1, g) puts them there). b2 computes
// a deep copy of g in its own memory (graph_copy, with the leafs' data).
//
// Node by node (options.nodes empty): each node that computes something (views and
// leafs are skipped) is computed on both backends, and the callback gets the pair.
// In compare_mode::isolated (the default) b2's sources are first overwritten with b1's
// values, so each comparison judges one op on identical inputs and an error does not
// spread to the nodes after it; compare_mode::chained lets each backend run on its own
// results (errors accumulate, as in ggml's compare_graph_backend).
//
// Whole graph (options.nodes not empty): both backends compute the whole graph at once
// (so a backend may fuse ops) and the callback sees only the listed nodes.
//
// Errors are statuses: a compute that fails (with the node and backend named), a node b2
// does not support (not_supported, named), the copy's allocation. With guard bytes
// (options.copy.guard_bytes) an out-of-bounds write of b2 into its copy fails the
// comparison too (out_of_range naming the tensor).

#include <backplane/core/detail/describe.hpp>
#include <backplane/core/error.hpp>
#include <backplane/core/graph.hpp>
#include <backplane/core/tensor.hpp>
#include <backplane/memory/graph_copy.hpp>
#include <backplane/memory/tensor_copy.hpp>

#include <cstddef>
#include <functional>
#include <span>
#include <string>

namespace backplane {

enum class compare_mode : std::uint8_t {
    isolated, ///< b2's sources get b1's values before each node (one op judged at a time)
    chained,  ///< each backend computes from its own earlier results
};

struct compare_options {
    /// Not empty: compute the whole graph on each backend and compare only these nodes
    /// (tensors of g).
    std::span<tensor* const> nodes = {};
    compare_mode mode = compare_mode::isolated;
    /// How g is copied for b2 (guard bytes catch b2's out-of-bounds writes).
    graph_copy_options copy = {};
};

struct compare_summary {
    std::size_t compared = 0; ///< callbacks made
    bool stopped = false;     ///< the callback returned false
};

/// The callback: the index of the node in g (or in options.nodes for a whole-graph
/// comparison), b1's tensor, b2's tensor. Returns false to stop.
using compare_callback = std::function<bool(std::size_t, const tensor&, const tensor&)>;

namespace detail {

template <class B>
status compute_and_wait(B& b, graph_view g, const char* which, const tensor* node) {
    status s = b.compute(g);
    if (s)
        s = b.synchronize();
    if (!s)
        return {s.code(),
                std::string("compare_backends: ") + which + " (" + std::string(b.name()) +
                    ") failed" + (node ? " at " + describe(node) : std::string()) + ": " +
                    s.message(),
                s.native()};
    return {};
}

} // namespace detail

template <class B1, class B2>
[[nodiscard]] result<compare_summary> compare_backends(B1& b1, B2& b2, graph& g,
                                                       const compare_callback& callback,
                                                       const compare_options& o = {}) {
    auto copy = graph_copy(b2, g, o.copy);
    if (!copy)
        return copy.error();
    graph& g2 = copy->graph();
    compare_summary out;
    auto guards = [&]() -> status {
        if (o.copy.guard_bytes == 0)
            return {};
        if (auto s = copy->check_guards(); !s)
            return {s.code(), "compare_backends: " + std::string(b2.name()) + ": " + s.message()};
        return {};
    };

    for (tensor* t : g2.nodes())
        if (!is_view_op(t->op) && t->op != op_kind::none && !b2.supports_op(*t))
            return status(errc::not_supported, "compare_backends: " + std::string(b2.name()) +
                                                   " does not support " + detail::describe(t) +
                                                   " (op " + std::string(to_string(t->op)) + ")");

    if (!o.nodes.empty()) {
        if (auto s = detail::compute_and_wait(b1, g, "backend 1", nullptr); !s)
            return s;
        if (auto s = detail::compute_and_wait(b2, g2, "backend 2", nullptr); !s)
            return s;
        if (auto s = guards(); !s)
            return s;
        for (std::size_t i = 0; i < o.nodes.size(); ++i) {
            const tensor* t = o.nodes[i];
            const tensor* t2 = copy->find(t);
            if (t2 == nullptr)
                return status(errc::invalid_argument, "compare_backends: node " +
                                                          detail::describe(t) +
                                                          " to compare is not in the graph");
            ++out.compared;
            if (!callback(i, *t, *t2)) {
                out.stopped = true;
                break;
            }
        }
        return out;
    }

    for (std::size_t i = 0; i < g.n_nodes(); ++i) {
        tensor* t1 = g.nodes()[i];
        tensor* t2 = g2.nodes()[i];
        if (is_view_op(t1->op) || t1->op == op_kind::none)
            continue;
        if (o.mode == compare_mode::isolated)
            for (std::size_t j = 0; j < max_srcs; ++j) {
                const tensor* s1 = t1->src[j];
                if (s1 == nullptr)
                    continue;
                const tensor* r1 = s1->view_src != nullptr ? s1->view_src : s1;
                if (r1->op == op_kind::none)
                    continue; // leafs are equal already
                tensor* r2 = copy->find(r1);
                if (r2 == nullptr)
                    continue;
                if (auto s = tensor_copy(*r1, *r2); !s)
                    return status(s.code(), "compare_backends: copying the source " +
                                                detail::describe(r1) + " of " +
                                                detail::describe(t1) + ": " + s.message());
            }
        if (auto s = detail::compute_and_wait(b1, g.view(i, i + 1), "backend 1", t1); !s)
            return s;
        if (auto s = detail::compute_and_wait(b2, g2.view(i, i + 1), "backend 2", t2); !s)
            return s;
        if (auto s = guards(); !s)
            return s;
        ++out.compared;
        if (!callback(i, *t1, *t2)) {
            out.stopped = true;
            break;
        }
    }
    return out;
}

} // namespace backplane
