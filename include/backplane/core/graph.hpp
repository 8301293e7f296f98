#pragma once
// graph: the nodes that compute an output, in topological order, plus the leafs
// (tensors with no op) they read. Built by a forward walk from outputs; no fixed size.
// A graph_view is a contiguous range of nodes, itself computable (a scheduler split).

#include <backplane/core/detail/tensor_map.hpp>
#include <backplane/core/error.hpp>
#include <backplane/core/tensor.hpp>

#include <cstddef>
#include <initializer_list>
#include <span>
#include <string>
#include <array>
#include <cstdint>
#include <utility>
#include <vector>

namespace backplane {

/// A range of a graph's nodes, in topological order. Non-owning. A view that is part of
/// a larger computation (a scheduler's split) says which of its nodes are read outside
/// it (kept): a backend computes those whatever it fuses (core/fusion.hpp).
class graph_view {
public:
    constexpr graph_view() noexcept = default;
    constexpr explicit graph_view(std::span<tensor* const> nodes) noexcept : nodes_(nodes) {}
    /// kept[i] != 0: node i is read outside the view (kept null: none is; else one entry
    /// per node).
    constexpr graph_view(std::span<tensor* const> nodes, const std::uint8_t* kept) noexcept
        : nodes_(nodes), kept_(kept) {}

    [[nodiscard]] constexpr std::span<tensor* const> nodes() const noexcept { return nodes_; }
    [[nodiscard]] constexpr std::size_t size() const noexcept { return nodes_.size(); }
    [[nodiscard]] constexpr bool empty() const noexcept { return nodes_.empty(); }
    [[nodiscard]] constexpr tensor* operator[](std::size_t i) const noexcept { return nodes_[i]; }
    [[nodiscard]] constexpr auto begin() const noexcept { return nodes_.begin(); }
    [[nodiscard]] constexpr auto end() const noexcept { return nodes_.end(); }
    /// Nodes [i0, i1) of this view.
    [[nodiscard]] graph_view subview(std::size_t i0, std::size_t i1) const {
        if (i0 > i1 || i1 > nodes_.size())
            throw error("graph_view: range [" + std::to_string(i0) + ", " + std::to_string(i1) +
                            ") outside a view of " + std::to_string(nodes_.size()) + " nodes",
                        errc::out_of_range);
        graph_view v(nodes_.subspan(i0, i1 - i0), kept_ == nullptr ? nullptr : kept_ + i0);
        v.all_kept_ = all_kept_;
        return v;
    }

    /// Node i's value must be computed: something outside the view reads it.
    [[nodiscard]] constexpr bool kept(std::size_t i) const noexcept {
        return all_kept_ || (kept_ != nullptr && i < nodes_.size() && kept_[i] != 0);
    }
    /// Every node's value must be computed (an eval callback reads each): no fusion.
    [[nodiscard]] constexpr bool all_kept() const noexcept { return all_kept_; }
    [[nodiscard]] constexpr graph_view keep_all() const noexcept {
        graph_view v = *this;
        v.all_kept_ = true;
        return v;
    }

private:
    std::span<tensor* const> nodes_;
    const std::uint8_t* kept_ = nullptr;
    bool all_kept_ = false;
};

class graph {
public:
    graph() = default;
    /// The graph computing `output` (and everything it depends on).
    explicit graph(tensor* output) { build_forward(output); }
    graph(std::initializer_list<tensor*> outputs) {
        for (tensor* t : outputs) build_forward(t);
    }

    /// Adds `t` and every tensor it depends on that the graph does not hold yet, sources
    /// before consumers (ggml's build_forward_expand). Sources are visited in order.
    /// Iterative, so chains of any length are fine. A cycle (a source edited by hand so
    /// that a tensor depends on itself) throws backplane::error listing the tensors on it,
    /// and leaves the graph as it was.
    void build_forward(tensor* t) {
        if (t == nullptr) throw error("graph::build_forward: null tensor");
        if (visited_.contains(t)) return;
        struct frame {
            tensor* t;
            int next_src;
        };
        std::vector<frame> stack;
        stack.push_back({t, 0});
        visited_.insert(t, unplaced);
        const std::size_t nodes_before = nodes_.size();
        const std::size_t leafs_before = leafs_.size();
        while (!stack.empty()) {
            frame& f = stack.back();
            if (f.next_src < max_srcs) {
                tensor* s = f.t->src[static_cast<std::size_t>(f.next_src++)];
                if (s == nullptr) continue;
                const std::uint32_t v = visited_.find(s);
                if (v == detail::tensor_map::npos) {
                    visited_.insert(s, unplaced);
                    stack.push_back({s, 0});
                } else if (v == unplaced) { // s is on the walk's path: it depends on itself
                    std::vector<const tensor*> path;
                    for (const frame& p : stack) path.push_back(p.t);
                    undo(nodes_before, leafs_before);
                    throw error(cycle_message(path, s));
                }
                continue;
            }
            tensor* done = f.t;
            stack.pop_back();
            if (done->op == op_kind::none) {
                visited_.assign(done, 2 * static_cast<std::uint32_t>(leafs_.size()) + 1);
                leafs_.push_back(done);
            } else {
                // every source is placed by now (depth first): record where
                std::array<std::int32_t, max_srcs> ids{};
                for (std::size_t j = 0; j < max_srcs; ++j)
                    ids[j] = done->src[j] != nullptr ? id_of(done->src[j]) : no_id;
                const std::int32_t vs = done->view_src != nullptr ? id_of(done->view_src) : no_id;
                visited_.assign(done, 2 * static_cast<std::uint32_t>(nodes_.size()));
                nodes_.push_back(done);
                src_ids_.push_back(ids);
                view_src_ids_.push_back(vs);
            }
        }
    }

    [[nodiscard]] std::span<tensor* const> nodes() const noexcept { return nodes_; }
    [[nodiscard]] std::span<tensor* const> leafs() const noexcept { return leafs_; }
    [[nodiscard]] std::size_t n_nodes() const noexcept { return nodes_.size(); }
    [[nodiscard]] std::size_t n_leafs() const noexcept { return leafs_.size(); }
    [[nodiscard]] tensor* node(std::size_t i) const {
        if (i >= nodes_.size())
            throw error("graph::node: index " + std::to_string(i) + " outside " +
                            std::to_string(nodes_.size()) + " nodes",
                        errc::out_of_range);
        return nodes_[i];
    }
    /// The last node (the output of the most recent build_forward), or null.
    [[nodiscard]] tensor* back() const noexcept { return nodes_.empty() ? nullptr : nodes_.back(); }
    [[nodiscard]] bool contains(const tensor* t) const noexcept { return visited_.contains(t); }

    // -- topology, as recorded while building (for schedulers: no hashing per call) ------
    //
    // An id names a tensor of the graph: i >= 0 is node i, i <= -2 is leaf (-2 - i), and
    // no_id (-1) none. They describe the sources as they were when each node was added;
    // a caller that may see rewired nodes checks nodes()[i]->src[j] against them.

    static constexpr std::int32_t no_id = -1;
    [[nodiscard]] static constexpr std::int32_t leaf_id(std::size_t k) noexcept {
        return -2 - static_cast<std::int32_t>(k);
    }
    /// The ids of node i's sources.
    [[nodiscard]] std::span<const std::array<std::int32_t, max_srcs>> src_ids() const noexcept { return src_ids_; }
    /// The id of each node's view_src (no_id for a node that is not a view, or whose
    /// view_src was not reached from its sources).
    [[nodiscard]] std::span<const std::int32_t> view_src_ids() const noexcept { return view_src_ids_; }
    /// The tensor an id names (null for no_id).
    [[nodiscard]] tensor* by_id(std::int32_t id) const noexcept {
        if (id >= 0) return nodes_[static_cast<std::size_t>(id)];
        if (id == no_id) return nullptr;
        return leafs_[static_cast<std::size_t>(-2 - id)];
    }

    /// All nodes as a computable view.
    [[nodiscard]] graph_view view() const noexcept { return graph_view(nodes_); }
    /// Nodes [i0, i1) as a computable view.
    [[nodiscard]] graph_view view(std::size_t i0, std::size_t i1) const { return view().subview(i0, i1); }
    operator graph_view() const noexcept { return view(); } // NOLINT: a graph is a view of itself

    void clear() noexcept {
        nodes_.clear();
        leafs_.clear();
        visited_.clear(0);
        src_ids_.clear();
        view_src_ids_.clear();
    }

private:
    // The tensors added since the graph held nodes_before nodes and leafs_before leafs
    // are forgotten (a walk that failed).
    void undo(std::size_t nodes_before, std::size_t leafs_before) {
        nodes_.resize(nodes_before);
        leafs_.resize(leafs_before);
        src_ids_.resize(nodes_before);
        view_src_ids_.resize(nodes_before);
        visited_.clear(nodes_.size() + leafs_.size());
        for (std::size_t k = 0; k < nodes_.size(); ++k) visited_.insert(nodes_[k], 2 * static_cast<std::uint32_t>(k));
        for (std::size_t k = 0; k < leafs_.size(); ++k)
            visited_.insert(leafs_[k], 2 * static_cast<std::uint32_t>(k) + 1);
    }

    // "... 'a' (add) reads 'c' (scale), which reads 'b' (relu), which reads 'a'": the
    // walk's path from `back` (the tensor read again) to its end, which reads `back`.
    static std::string cycle_message(const std::vector<const tensor*>& path, const tensor* back) {
        const auto name = [](const tensor* t) {
            return (t->name.empty() ? std::string("(unnamed)") : "'" + t->name + "'") + " (" +
                   std::string(to_string(t->op)) + ")";
        };
        std::size_t i = 0;
        while (i < path.size() && path[i] != back) ++i;
        std::string msg = "graph::build_forward: the graph has a cycle (a source edited after the tensor was made): ";
        for (std::size_t k = i; k < path.size(); ++k) msg += (k == i ? "" : ", which reads ") + name(path[k]);
        msg += path.size() - i == 1 ? " reads itself" : ", which reads " + name(back);
        return msg;
    }

    std::vector<tensor*> nodes_;
    std::vector<tensor*> leafs_;
    // visited_ maps a tensor to 2 k for node k, 2 k + 1 for leaf k, `unplaced` while it
    // is on the walk's stack
    static constexpr std::uint32_t unplaced = 0xfffffffeu;
    // the id of a visited tensor (no_id while it is not yet a node or leaf, or unknown)
    [[nodiscard]] std::int32_t id_of(const tensor* t) const noexcept {
        const std::uint32_t v = visited_.find(t);
        if (v == detail::tensor_map::npos || v == unplaced) return no_id;
        return (v & 1u) ? leaf_id(v >> 1) : static_cast<std::int32_t>(v >> 1);
    }
    detail::tensor_map visited_;
    std::vector<std::array<std::int32_t, max_srcs>> src_ids_;
    std::vector<std::int32_t> view_src_ids_;
};

} // namespace backplane
