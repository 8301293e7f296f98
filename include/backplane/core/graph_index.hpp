#pragma once
// The dense index of a graph: every tensor its nodes compute or read gets a number, and
// the sources and view sources of each are numbers too, so a pass over the graph keeps
// its facts in vectors indexed by number instead of maps keyed by tensor address.
//
//   numbers [0, n_nodes)                  the nodes, in order
//   numbers [n_nodes, n_nodes + n_leafs)  the listed leafs, in order (a graph's leafs;
//                                         none for a graph_view)
//   numbers [n_nodes + n_leafs, size())   the tensors read that neither list holds, in
//                                         order of first use: each node's sources, then
//                                         its view source; then the view source of each
//                                         leaf and of each of these in turn
//
// One index serves every pass over a graph: the scheduler numbers a graph into one (its
// graph_numbering adds what placement reads of each tensor, sched/plan.hpp), the graph
// allocator indexes the lists it is given (memory/graph_alloc.hpp), and the meta
// backend plans on one (backends/meta/backend.hpp). An index is rebuilt in place by
// assign(), which reuses its vectors.
//
// A graph records its topology when it is built (graph::src_ids), so indexing a graph
// hashes nothing unless a node was rewired since (each recorded id is checked against the
// source it names) or a tensor outside its lists is read. Indexing lists, a caller may
// give the positions it already knows the same way (known_positions). The map from
// tensor to number is built on first need.

#include <backplane/core/detail/tensor_map.hpp>
#include <backplane/core/graph.hpp>
#include <backplane/core/tensor.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace backplane {

/// Positions a caller already knows of the lists it indexes: `srcs[k][j]` is the
/// number of node k's source j and `view_srcs[s]` that of entry s's view source (-1:
/// none, or not known). A known position is checked against the tensor it names and
/// looked up when wrong. With `given`, the positions are the truth instead: node k's
/// source j is what `srcs[k][j]` names, whatever tensor node k's src[j] is (only -1
/// is looked up); so a caller indexes a node as reading a copy of its source.
struct known_positions {
    std::span<const std::array<std::int32_t, max_srcs>> srcs;
    std::span<const std::int32_t> view_srcs;
    bool given = false;
};

class graph_index {
public:
    static constexpr std::int32_t none = -1;
    using src_numbers = std::array<std::int32_t, max_srcs>;
    /// The source numbers of a node that reads nothing.
    static constexpr src_numbers no_srcs = [] {
        src_numbers s{};
        s.fill(none);
        return s;
    }();

    graph_index() = default;
    /// The nodes of g; every tensor they read is numbered after them.
    explicit graph_index(graph_view g) { assign(g); }
    /// The nodes of g, its leafs, then what they read that neither list holds.
    explicit graph_index(const graph& g) { assign(g); }

    void assign(graph_view g) { (void)assign(g.nodes(), {}); }

    void assign(const graph& g) {
        start(g.nodes(), g.leafs());
        const auto ids = g.src_ids();
        const auto vids = g.view_src_ids();
        const bool recorded = ids.size() == n_nodes_ && vids.size() == n_nodes_;
        // a recorded id as a number (graph::src_ids: node i is i, leaf k is -2 - k)
        const auto leaf_base = static_cast<std::int32_t>(n_nodes_) - 2;
        const auto from_id = [&](std::int32_t id) { return id >= 0 || id == graph::no_id ? id : leaf_base - id; };
        for (std::size_t i = 0; i < n_nodes_; ++i) {
            const tensor& t = *ts_[i];
            src_numbers out;
#pragma GCC unroll 4
            for (std::size_t j = 0; j < max_srcs; ++j)
                out[j] = t.src[j] != nullptr ? number_of(t.src[j], recorded ? from_id(ids[i][j]) : none) : none;
            srcs_[i] = out;
            view_srcs_[i] = t.view_src != nullptr ? number_of(t.view_src, recorded ? from_id(vids[i]) : none) : none;
        }
        number_view_srcs(n_nodes_);
    }

    /// Indexes the lists `nodes` (in topological order) and `leafs`, with the positions in
    /// `known` (whose spans must cover every node, and every entry, to be used). Returns
    /// the first entry (nodes, then leafs) that is null or listed twice, else the number
    /// of entries. Listed twice is checked only without known positions (a caller that
    /// knows them promises it). After a bad entry the index is empty.
    std::size_t assign(std::span<tensor* const> nodes, std::span<tensor* const> leafs, known_positions known = {}) {
        const std::size_t n = nodes.size() + leafs.size();
        const bool use_known = known.srcs.size() == nodes.size() && known.view_srcs.size() == n;
        start(nodes, leafs);
        if (!use_known) map_.clear(n + n / 4 + 16);
        for (std::size_t s = 0; s < n; ++s)
            if (ts_[s] == nullptr || (!use_known && map_.insert(ts_[s], static_cast<std::uint32_t>(s)) != s)) {
                start({}, {});
                return s;
            }
        mapped_ = use_known ? 0 : n;
        const bool given = use_known && known.given;
        for (std::size_t s = 0; s < n; ++s) { // per node: its sources, then its view source
            const tensor& t = *ts_[s];
            if (s < n_nodes_) {
                src_numbers out;
#pragma GCC unroll 4
                for (std::size_t j = 0; j < max_srcs; ++j)
                    out[j] = t.src[j] != nullptr ? position(t.src[j], use_known ? known.srcs[s][j] : none, given) : none;
                srcs_[s] = out;
            }
            view_srcs_[s] = t.view_src != nullptr ? position(t.view_src, use_known ? known.view_srcs[s] : none, given)
                                                  : none;
        }
        number_view_srcs(n);
        return n;
    }

    [[nodiscard]] std::size_t n_nodes() const noexcept { return n_nodes_; }
    [[nodiscard]] std::size_t n_leafs() const noexcept { return n_leafs_; }
    /// Every numbered tensor: nodes, leafs and the tensors read outside both lists.
    [[nodiscard]] std::size_t size() const noexcept { return ts_.size(); }
    [[nodiscard]] tensor& operator[](std::size_t i) const noexcept { return *ts_[i]; }
    /// The numbered tensors, by number.
    [[nodiscard]] std::span<tensor* const> tensors() const noexcept { return ts_; }
    [[nodiscard]] bool is_node(std::int32_t i) const noexcept {
        return i >= 0 && static_cast<std::size_t>(i) < n_nodes_;
    }
    /// The number of node i's source j, `none` when it has none.
    [[nodiscard]] std::int32_t src(std::size_t i, std::size_t j) const noexcept { return srcs_[i][j]; }
    /// The numbers of node i's sources.
    [[nodiscard]] const src_numbers& srcs(std::size_t i) const noexcept { return srcs_[i]; }
    /// The numbers of every node's sources, by node.
    [[nodiscard]] std::span<const src_numbers> srcs() const noexcept { return srcs_; }
    /// The number of each tensor's view source, by number.
    [[nodiscard]] std::span<const std::int32_t> view_srcs() const noexcept { return view_srcs_; }
    /// The number of tensor i's view source, `none` when it is not a view.
    [[nodiscard]] std::int32_t view_src(std::size_t i) const noexcept { return view_srcs_[i]; }
    /// The tensor whose memory tensor i uses: its view source, else itself.
    [[nodiscard]] std::int32_t root(std::size_t i) const noexcept {
        return view_srcs_[i] != none ? view_srcs_[i] : static_cast<std::int32_t>(i);
    }
    /// The number of t, `none` when the graph neither computes nor reads it.
    [[nodiscard]] std::int32_t find(const tensor* t) const {
        if (t == nullptr) return none;
        ensure_map();
        const std::uint32_t k = map_.find(t);
        return k == detail::tensor_map::npos ? none : static_cast<std::int32_t>(k);
    }

private:
    void start(std::span<tensor* const> nodes, std::span<tensor* const> leafs) {
        n_nodes_ = nodes.size();
        n_leafs_ = leafs.size();
        ts_.assign(nodes.begin(), nodes.end());
        ts_.insert(ts_.end(), leafs.begin(), leafs.end());
        srcs_.resize(n_nodes_);
        view_srcs_.resize(ts_.size());
        mapped_ = 0;
    }

    // The number of t, known to be `k` if k still names it; else looked up, and added
    // after the lists on first sight.
    [[gnu::always_inline]] std::int32_t number_of(tensor* t, std::int32_t k) {
        if (k >= 0 && ts_[static_cast<std::size_t>(k)] == t) return k;
        return look_up(t);
    }
    // The number of t by the map, added after the lists on first sight.
    [[gnu::noinline]] std::int32_t look_up(tensor* t) {
        ensure_map();
        const auto next = static_cast<std::uint32_t>(ts_.size());
        const std::uint32_t found = map_.insert(t, next);
        if (found == next) {
            ts_.push_back(t);
            view_srcs_.push_back(none);
            mapped_ = ts_.size();
        }
        return static_cast<std::int32_t>(found);
    }

    // The number of t (not null), which a caller gave as k: the truth when `given` and
    // listed, else checked.
    [[gnu::always_inline]] std::int32_t position(tensor* t, std::int32_t k, bool given) {
        const bool listed = k >= 0 && static_cast<std::size_t>(k) < n_nodes_ + n_leafs_;
        if (given && listed) return k;
        return number_of(t, listed ? k : none);
    }

    // The view sources of the tensors numbered from `first` on (their list grows).
    void number_view_srcs(std::size_t first) {
        for (std::size_t i = first; i < ts_.size(); ++i) {
            tensor* v = ts_[i]->view_src;
            view_srcs_[i] = v != nullptr ? number_of(v, none) : none; // view_srcs_ may grow
        }
    }

    void ensure_map() const {
        if (mapped_ == ts_.size()) return;
        if (mapped_ == 0) map_.clear(ts_.size() + ts_.size() / 4 + 16);
        for (std::size_t i = mapped_; i < ts_.size(); ++i) map_.insert(ts_[i], static_cast<std::uint32_t>(i));
        mapped_ = ts_.size();
    }

    std::size_t n_nodes_ = 0;
    std::size_t n_leafs_ = 0;
    std::vector<tensor*> ts_;
    std::vector<src_numbers> srcs_;
    std::vector<std::int32_t> view_srcs_;
    mutable detail::tensor_map map_; // ts_[0, mapped_) are in it
    mutable std::size_t mapped_ = 0;
};

} // namespace backplane
