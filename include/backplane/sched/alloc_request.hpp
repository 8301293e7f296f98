#pragma once
// The allocator request stage of the scheduler: what graph_allocator is handed for one
// split plan (sched/plan.hpp) in one pipeline slot: its lists of nodes and leafs, a
// buffer id for each (its backend's compute buffer), and the topology (where each source
// is listed; a node that reads a copy is told the copy's position, sources_given).
//
// Nodes: per split, each input's copy, then the split's nodes. Without pipeline copies
// the copy is itself a node reading the input (so the input lives until it is copied).
// With n_copies > 1, every slot of every rotated graph input and of every copy comes
// first, in slot order: input-flagged tensors are placed first, in node order, and never
// freed, so each slot keeps its own memory from one run to the next. The lists are the
// same in every slot, so that the allocator replays its plan: the rotated input itself
// is not listed but bound to its current slot (alloc_topology::bind_like), and its
// readers name its first slot. A view node keeps each split input alive until it is
// copied.

#include <backplane/core/error.hpp>
#include <backplane/core/graph.hpp>
#include <backplane/core/tensor.hpp>
#include <backplane/memory/graph_alloc.hpp>
#include <backplane/sched/plan.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <span>
#include <utility>
#include <vector>

namespace backplane::detail {

/// The allocator's view of a plan (see the header comment).
class alloc_request {
public:
    /// Replaces the request with that of `plan` over `n_backends` in pipeline slot `slot`
    /// of `n_copies`.
    void build(const graph& g, const graph_numbering& num, const assignment& asg, const split_plan& plan,
               std::size_t n_backends, int n_copies, int slot) {
        num_ = &num;
        asg_ = &asg;
        plan_ = &plan;
        nb_ = n_backends;
        n_copies_ = n_copies;
        slot_ = slot;
        if (plan.inputs.empty() && n_copies == 1) return use_graph_lists(g);
        clear();
        if (n_copies > 1) push_slots();
        push_splits(g);
        push_leafs();
        resolve_topology();
        nodes_ = nodes_list_;
        leafs_ = leafs_list_;
        node_ids_ = node_ids_list_;
        leaf_ids_ = leaf_ids_list_;
    }

    [[nodiscard]] std::span<tensor* const> nodes() const noexcept { return nodes_; }
    [[nodiscard]] std::span<tensor* const> leafs() const noexcept { return leafs_; }
    [[nodiscard]] std::span<const int> node_ids() const noexcept { return node_ids_; }
    [[nodiscard]] std::span<const int> leaf_ids() const noexcept { return leaf_ids_; }
    [[nodiscard]] const alloc_topology* topology() const noexcept { return &topology_; }

    /// graph_allocator's measure, reserve and alloc_graph of this request.
    [[nodiscard]] result<std::vector<std::size_t>> measure_in(graph_allocator& ga) const {
        return ga.measure(nodes(), leafs(), node_ids(), leaf_ids(), topology());
    }
    [[nodiscard]] status reserve_in(graph_allocator& ga) const {
        return ga.reserve(nodes(), leafs(), node_ids(), leaf_ids(), topology());
    }
    [[nodiscard]] status alloc_in(graph_allocator& ga, alloc_replan_hook before_replan) const {
        return ga.alloc_graph(nodes(), leafs(), node_ids(), leaf_ids(), topology(), before_replan);
    }

private:
    using srcs_t = graph_index::src_numbers;
    static constexpr srcs_t no_srcs = graph_index::no_srcs;
    /// The source numbers of a node that reads tensor s alone (every other entry none).
    static srcs_t only_src(std::int32_t s) noexcept {
        srcs_t r = no_srcs;
        r[0] = s;
        return r;
    }

    // Nothing copied: the graph's own lists, numbered as placement numbered them.
    void use_graph_lists(const graph& g) {
        const graph_numbering& num = *num_;
        nodes_ = g.nodes();
        leafs_ = g.leafs();
        node_ids_ = std::span<const int>(asg_->backend).first(num.n_nodes());
        leaf_ids_ = std::span<const int>(asg_->backend).subspan(num.n_nodes(), num.n_leafs());
        topology_ = alloc_topology{num.srcs(), num.view_srcs().first(num.n_nodes() + num.n_leafs()), true};
    }

    void clear() {
        nodes_list_.clear();
        node_ids_list_.clear();
        leafs_list_.clear();
        leaf_ids_list_.clear();
        pos_of_.assign(num_->tensors().size(), -1);
        copy_pos_.assign(plan_->copies.size(), -1);
        topo_srcs_.clear();
        dep_view_.clear();
        bindings_.clear();
        deps_used_ = 0;
    }

    // Sources as tensor numbers for now; resolve_topology makes them positions.
    void push_node(tensor* t, std::int32_t backend, const srcs_t& srcs) {
        nodes_list_.push_back(t);
        node_ids_list_.push_back(backend);
        topo_srcs_.push_back(srcs);
    }
    [[nodiscard]] std::int32_t next_pos() const noexcept { return static_cast<std::int32_t>(nodes_list_.size()); }

    std::uint32_t copy_base(std::int32_t s, std::int32_t b) const noexcept {
        return static_cast<std::uint32_t>(
            plan_->copy_of[static_cast<std::size_t>(s) * nb_ + static_cast<std::size_t>(b)]);
    }

    bool rotated(std::size_t i) const noexcept { return is_rotated_input(*num_, *asg_, *plan_, nb_, i); }

    // Pipeline copies: every slot of every rotated graph input, then of every copy.
    void push_slots() {
        for (std::int32_t s : plan_->graph_inputs) {
            const auto su = static_cast<std::size_t>(s);
            if (!rotated(su)) continue;
            const std::uint32_t base = copy_base(s, asg_->backend[su]);
            for (int c = 0; c < n_copies_; ++c) {
                const std::uint32_t k = base + static_cast<std::uint32_t>(c);
                copy_pos_[k] = next_pos();
                push_node(plan_->copies[k], asg_->backend[su], no_srcs);
            }
            // the slots are input-flagged (placed first, never freed, never taken over in
            // place), so the input's readers may name the first in every rotation
            pos_of_[su] = copy_pos_[base];
            bindings_.push_back({num_->tensors()[su], copy_pos_[base + static_cast<std::uint32_t>(slot_)]});
        }
        for (const split_rec& sp : plan_->splits)
            for (std::uint32_t j = sp.in0; j < sp.in1; ++j) {
                const std::uint32_t base = copy_base(plan_->inputs[j], sp.backend);
                for (int c = 0; c < n_copies_; ++c) {
                    copy_pos_[base + static_cast<std::uint32_t>(c)] = next_pos();
                    push_node(plan_->copies[base + static_cast<std::uint32_t>(c)], sp.backend, no_srcs);
                }
            }
    }

    // Per split: what keeps each input until it is copied, then the split's nodes.
    void push_splits(const graph& g) {
        const auto nodes = g.nodes();
        for (const split_rec& sp : plan_->splits) {
            for (std::uint32_t j = sp.in0; j < sp.in1; ++j) {
                const std::int32_t s = plan_->inputs[j];
                if (n_copies_ > 1) {
                    push_keeper(s);
                } else {
                    const std::uint32_t base = copy_base(s, sp.backend);
                    copy_pos_[base] = next_pos();
                    push_node(plan_->copies[base], sp.backend, only_src(s));
                }
            }
            for (std::uint32_t i = sp.first; i < sp.last; ++i) {
                pos_of_[i] = next_pos();
                push_node(nodes[i], asg_->backend[i], num_->srcs(i));
            }
        }
    }

    // A view of split input s that reads it here and computes nothing (pipeline copies).
    void push_keeper(std::int32_t s) {
        const auto su = static_cast<std::size_t>(s);
        tensor* in = num_->tensors()[su];
        if (deps_used_ == deps_.size()) deps_.emplace_back();
        tensor& dep = deps_[deps_used_++];
        dep = tensor{};
        dep.type = in->type;
        dep.ne = in->ne;
        dep.nb = in->nb;
        dep.op = op_kind::view;
        dep.src[0] = in;
        dep.view_src = in->view_src != nullptr ? in->view_src : in;
        dep.view_offs = in->view_src != nullptr ? in->view_offs : 0;
        dep.name = in->name + " (kept for its copy)";
        dep_view_.emplace_back(next_pos(), num_->view_src(su) >= 0 ? num_->view_src(su) : s);
        push_node(&dep, asg_->backend[su], only_src(s));
    }

    void push_leafs() {
        for (std::size_t k = 0; k < num_->n_leafs(); ++k) {
            const std::size_t i = num_->n_nodes() + k;
            if (n_copies_ > 1 && rotated(i)) continue; // placed with its slots
            pos_of_[i] = static_cast<std::int32_t>(nodes_list_.size() + leafs_list_.size());
            leafs_list_.push_back(num_->tensors()[i]);
            leaf_ids_list_.push_back(asg_->backend[i]);
        }
    }

    // Sources and view sources as list positions; a node that reads a copy, the copy's.
    void resolve_topology() {
        for (srcs_t& srcs : topo_srcs_)
            for (std::int32_t& k : srcs) k = k >= 0 ? pos_of_[static_cast<std::size_t>(k)] : -1;
        // with pipeline copies, every slot of a copy is input-flagged, and the first stands
        // for all (the lists stay the same from slot to slot)
        for (const rewrite& r : plan_->rewrites) {
            const std::int32_t p = pos_of_[r.node];
            if (p >= 0) topo_srcs_[static_cast<std::size_t>(p)][r.j] = copy_pos_[r.copy_base];
        }
        topo_vsrcs_.assign(nodes_list_.size() + leafs_list_.size(), -1);
        for (std::size_t i = 0; i < num_->tensors().size(); ++i) {
            const std::int32_t v = num_->view_src(i);
            if (pos_of_[i] >= 0 && v >= 0) topo_vsrcs_[static_cast<std::size_t>(pos_of_[i])] = pos_of_[static_cast<std::size_t>(v)];
        }
        for (const auto& [p, root] : dep_view_) topo_vsrcs_[static_cast<std::size_t>(p)] = pos_of_[static_cast<std::size_t>(root)];
        topology_ = alloc_topology{topo_srcs_, topo_vsrcs_, true, bindings_};
    }

    // the plan being requested (set by build)
    const graph_numbering* num_ = nullptr;
    const assignment* asg_ = nullptr;
    const split_plan* plan_ = nullptr;
    int n_copies_ = 1;
    int slot_ = 0;
    std::size_t nb_ = 1;

    // what the allocator gets
    std::span<tensor* const> nodes_, leafs_;
    std::span<const int> node_ids_, leaf_ids_;
    alloc_topology topology_;

    std::vector<tensor*> nodes_list_, leafs_list_;
    std::vector<int> node_ids_list_, leaf_ids_list_;
    std::vector<std::int32_t> pos_of_;   // list position of each numbered tensor (-1)
    std::vector<std::int32_t> copy_pos_; // list position of each copy slot (-1)
    std::vector<std::pair<std::int32_t, std::int32_t>> dep_view_; // (position, root number)
    std::vector<srcs_t> topo_srcs_;
    std::vector<std::int32_t> topo_vsrcs_;
    std::vector<alloc_binding> bindings_; // each rotated input, to its current slot
    std::deque<tensor> deps_; // the keepers (push_keeper)
    std::size_t deps_used_ = 0;
};

} // namespace backplane::detail
