#pragma once
// A dense index of a graph (or a range of its nodes): every tensor the nodes compute or
// read gets a number, and the sources and view sources of each are numbers too, so a
// pass over the graph keeps its facts in vectors indexed by number instead of maps keyed
// by tensor address.
//
//   numbers [0, n_nodes)        the nodes, in order
//   numbers [n_nodes, size())   the tensors they read that they do not compute (leafs),
//                               in order of first use: each node's sources, then its
//                               view source
//
// Built once per graph structure by the passes that walk a graph many times (the meta
// backend's plans; the scheduler and the graph allocator read the ids a graph records
// when it is built, core/graph.hpp, which number the same way).

#include <backplane/core/detail/tensor_map.hpp>
#include <backplane/core/graph.hpp>
#include <backplane/core/tensor.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace backplane {

class graph_index {
public:
    static constexpr std::int32_t none = -1;

    graph_index() = default;
    explicit graph_index(graph_view g) {
        n_nodes_ = g.size();
        map_.clear(2 * n_nodes_ + 16);
        for (tensor* t : g) add(t);
        srcs_.resize(n_nodes_);
        for (std::size_t i = 0; i < n_nodes_; ++i) {
            const tensor& t = *g[i];
            for (std::size_t j = 0; j < max_srcs; ++j) srcs_[i][j] = number_of_read(t.src[j]);
            view_srcs_[i] = number_of_read(t.view_src);
        }
        for (std::size_t i = n_nodes_; i < ts_.size(); ++i) view_srcs_[i] = number_of_read(ts_[i]->view_src);
    }

    [[nodiscard]] std::size_t n_nodes() const noexcept { return n_nodes_; }
    /// Nodes and leafs.
    [[nodiscard]] std::size_t size() const noexcept { return ts_.size(); }
    [[nodiscard]] tensor& operator[](std::size_t i) const noexcept { return *ts_[i]; }
    [[nodiscard]] bool is_node(std::int32_t i) const noexcept {
        return i >= 0 && static_cast<std::size_t>(i) < n_nodes_;
    }
    /// The number of node i's source j, `none` when it has none.
    [[nodiscard]] std::int32_t src(std::size_t i, std::size_t j) const noexcept { return srcs_[i][j]; }
    /// The number of tensor i's view source, `none` when it is not a view.
    [[nodiscard]] std::int32_t view_src(std::size_t i) const noexcept { return view_srcs_[i]; }
    /// The tensor whose memory tensor i uses: its view source, else itself.
    [[nodiscard]] std::int32_t root(std::size_t i) const noexcept {
        return view_srcs_[i] != none ? view_srcs_[i] : static_cast<std::int32_t>(i);
    }
    /// The number of t, `none` when the graph neither computes nor reads it.
    [[nodiscard]] std::int32_t find(const tensor* t) const noexcept {
        const std::uint32_t k = t != nullptr ? map_.find(t) : detail::tensor_map::npos;
        return k == detail::tensor_map::npos ? none : static_cast<std::int32_t>(k);
    }

private:
    void add(tensor* t) {
        if (map_.insert(t, static_cast<std::uint32_t>(ts_.size())) != ts_.size()) return;
        ts_.push_back(t);
        view_srcs_.push_back(none);
    }
    // Numbers what a node reads, adding it as a leaf on first sight (and then its view
    // source after it, so every view source has a number).
    std::int32_t number_of_read(tensor* t) {
        if (t == nullptr) return none;
        add(t);
        return find(t);
    }

    std::size_t n_nodes_ = 0;
    std::vector<tensor*> ts_;
    std::vector<std::array<std::int32_t, max_srcs>> srcs_;
    std::vector<std::int32_t> view_srcs_;
    detail::tensor_map map_;
};

} // namespace backplane
