#pragma once
// What the executor hands the backends, per pipeline slot: the node list of the slot's
// runs, and the tensors in it that are the slot's own.
//
// The user's graph is never modified: a node that reads something else than its sources
// runs as its shadow, a tensor equal to the node but for those sources. A backend may read
// what it was handed until its work is done (core/concepts.hpp, backend): everything here
// belongs to the slot and is remade only when the slot is allocated again, once its last
// run is done. Without this, two things would change under runs still in flight:
//  - the plan's copy tensors, which the next plan remakes (with pipeline copies a plan
//    is made while runs are in flight): each slot keeps its own;
//  - a rotated graph input (sched/plan.hpp, is_rotated_input), which the allocator moves
//    into the current slot at every allocation, and its views: each slot keeps a
//    snapshot of them as the slot placed them, and the nodes that read them run as
//    shadows that read the snapshots.

#include <backplane/core/graph.hpp>
#include <backplane/core/tensor.hpp>
#include <backplane/sched/plan.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <span>
#include <vector>

namespace backplane::detail {

/// Per pipeline slot: the node list its runs compute and the tensors it owns.
class slot_tensors {
public:
    /// What make() reads.
    struct slot_input {
        const graph& g;
        const graph_numbering& num;
        const assignment& asg;
        const split_plan& plan;
        std::size_t n_backends;
        int slot;
        bool pipelined; ///< more than one slot
    };

    /// Remakes the slot's tensors after g was allocated in it. Call once the slot's last
    /// run is done, so that no backend still reads what this replaces.
    void make(const slot_input& in) {
        slot& s = slot_at(in.slot);
        s.exec.clear();
        s.copies.clear();
        s.moved.clear();
        s.used = 0;
        made_ = true;
        if (in.pipelined) {
            keep_copies(in.plan, s, in.slot);
            snapshot_inputs(in, s);
        }
        if (in.plan.rewrites.empty() && s.moved.empty()) return; // the runs compute g's own nodes
        const auto nodes = in.g.nodes();
        s.exec.assign(nodes.begin(), nodes.end());
        for_each_shadowed(in.num, in.plan, s, [&](std::size_t i, std::size_t k0, std::size_t k1) {
            tensor& sh = fresh(s);
            sh = *nodes[i];
            sh.src = slot_srcs(in, s, *nodes[i], i, k0, k1);
            sh.view_src = slot_view_src(in.num, s, *nodes[i], i);
            s.exec[i] = &sh;
            if (sh.view_src != nodes[i]->view_src) s.moved[i] = &sh; // a view moves with its source
        });
    }

    /// The slot's tensors still equal what they stand for but for their sources: false
    /// when the user changed such a node or rotated input since (its parameters, say).
    [[nodiscard]] bool current(const slot_input& in) const {
        if (!made_ || static_cast<std::size_t>(in.slot) >= slots_.size()) return true;
        const slot& s = slots_[static_cast<std::size_t>(in.slot)];
        if (s.exec.empty()) return true;
        const auto nodes = in.g.nodes();
        bool same = true;
        for_each_shadowed(in.num, in.plan, s, [&](std::size_t i, std::size_t k0, std::size_t k1) {
            const tensor& n = *nodes[i];
            const tensor& sh = *s.exec[i];
            same = same && sh.src == slot_srcs(in, s, n, i, k0, k1) &&
                   sh.view_src == slot_view_src(in.num, s, n, i) && same_but_sources(sh, n);
        });
        if (!s.moved.empty())
            for (const std::int32_t k : in.plan.graph_inputs) { // the snapshots (leafs)
                const auto ku = static_cast<std::size_t>(k);
                const tensor* snap = ku >= in.num.n_nodes() ? s.moved[ku] : nullptr;
                const tensor& t = in.num[ku];
                same = same && (snap == nullptr || (same_but_sources(*snap, t) && snap->view_src == t.view_src));
            }
        return same;
    }

    /// The slot tensors describe no graph any more (a new plan was made).
    void forget() noexcept { made_ = false; }

    /// What split sp's backend computes in slot c: its nodes, shadows included.
    /// `kept`: split_plan::kept.
    [[nodiscard]] graph_view nodes_of(const split_rec& sp, std::span<tensor* const> graph_nodes,
                                      std::span<const std::uint8_t> kept, int c) const {
        const auto cu = static_cast<std::size_t>(c);
        const bool own = made_ && cu < slots_.size() && !slots_[cu].exec.empty();
        const std::span<tensor* const> all = own ? std::span<tensor* const>(slots_[cu].exec) : graph_nodes;
        return graph_view(all.subspan(sp.first, sp.last - sp.first), kept.empty() ? nullptr : kept.data() + sp.first);
    }

    /// Copy q of the plan as slot c uses it: the slot's own, else the plan's.
    [[nodiscard]] tensor* copy_for(const split_plan& plan, std::size_t q, int c) const {
        const auto cu = static_cast<std::size_t>(c);
        return cu >= slots_.size() || slots_[cu].copies.empty() ? plan.copies[q] : slots_[cu].copies[q];
    }

private:
    struct slot {
        std::vector<tensor*> exec;   // the node list (empty: the graph's own)
        std::vector<tensor*> copies; // the plan's copies by index, as the slot's own (empty: the plan's)
        std::vector<tensor*> moved;  // by number: the slot's snapshot of a tensor that moves (empty: none)
        std::deque<tensor> store;    // shadows, copies and snapshots
        std::size_t used = 0;        // of store
    };

    slot& slot_at(int c) {
        const auto cu = static_cast<std::size_t>(c);
        if (slots_.size() <= cu) slots_.resize(cu + 1);
        return slots_[cu];
    }
    static tensor& fresh(slot& s) {
        if (s.used == s.store.size()) s.store.emplace_back();
        return s.store[s.used++];
    }

    // The slot's own copies of the plan's copy tensors it uses (base + c of each copy).
    static void keep_copies(const split_plan& plan, slot& s, int c) {
        s.copies.assign(plan.copies.size(), nullptr);
        for (const std::int32_t base : plan.copy_of) {
            if (base < 0) continue;
            const std::size_t q = static_cast<std::size_t>(base) + static_cast<std::size_t>(c);
            tensor& t = fresh(s);
            t = *plan.copies[q];
            s.copies[q] = &t;
        }
    }

    // Each rotated graph input as the allocation just placed it.
    static void snapshot_inputs(const slot_input& in, slot& s) {
        for (const std::int32_t k : in.plan.graph_inputs) {
            const auto ku = static_cast<std::size_t>(k);
            if (!is_rotated_input(in.num, in.asg, in.plan, in.n_backends, ku)) continue;
            if (s.moved.empty()) s.moved.assign(in.num.tensors().size(), nullptr);
            tensor& snap = fresh(s);
            snap = in.num[ku];
            s.moved[ku] = &snap;
        }
    }

    // Calls f(node number, rewrites [k0, k1)) for each node that runs as a shadow: it
    // reads copies (its rewrites are consecutive, in node order) or a tensor that moves.
    template <class F>
    static void for_each_shadowed(const graph_numbering& num, const split_plan& plan, const slot& s, F&& f) {
        const std::vector<rewrite>& rw = plan.rewrites;
        std::size_t k1 = 0;
        if (s.moved.empty()) {
            for (std::size_t k0 = 0; k0 < rw.size(); k0 = k1) {
                while (k1 < rw.size() && rw[k1].node == rw[k0].node) ++k1;
                f(static_cast<std::size_t>(rw[k0].node), k0, k1);
            }
            return;
        }
        for (std::size_t i = 0; i < num.n_nodes(); ++i) {
            const std::size_t k0 = k1;
            while (k1 < rw.size() && rw[k1].node == i) ++k1;
            if (k1 > k0 || reads_moved(num, s, i)) f(i, k0, k1);
        }
    }

    static bool reads_moved(const graph_numbering& num, const slot& s, std::size_t i) noexcept {
        for (const std::int32_t k : num.srcs_of(i))
            if (k >= 0 && s.moved[static_cast<std::size_t>(k)] != nullptr) return true;
        return moved_of(s, num.view_src(i)) != nullptr;
    }
    static tensor* moved_of(const slot& s, std::int32_t k) noexcept {
        return k >= 0 && !s.moved.empty() ? s.moved[static_cast<std::size_t>(k)] : nullptr;
    }

    // The sources node i's shadow has in the slot: the node's, those that move replaced by
    // the slot's snapshots, those it reads copies of (rewrites [k0, k1)) by the copies.
    std::array<tensor*, max_srcs> slot_srcs(const slot_input& in, const slot& s, const tensor& node, std::size_t i,
                                            std::size_t k0, std::size_t k1) const {
        std::array<tensor*, max_srcs> srcs = node.src;
        for (std::size_t j = 0; j < max_srcs; ++j) {
            const std::int32_t k = in.num.srcs(i)[j];
            tensor* snap = moved_of(s, k);
            if (snap != nullptr && srcs[j] == in.num.tensors()[static_cast<std::size_t>(k)]) srcs[j] = snap;
        }
        for (std::size_t k = k0; k < k1; ++k) {
            const rewrite& r = in.plan.rewrites[k];
            srcs[r.j] = copy_for(in.plan, r.copy_base + static_cast<std::size_t>(in.slot), in.slot);
        }
        return srcs;
    }
    static tensor* slot_view_src(const graph_numbering& num, const slot& s, const tensor& node, std::size_t i) {
        const std::int32_t k = num.view_src(i);
        tensor* snap = moved_of(s, k);
        return snap != nullptr && node.view_src == num.tensors()[static_cast<std::size_t>(k)] ? snap : node.view_src;
    }

    // Everything a backend reads of a tensor but its sources and view source.
    static bool same_but_sources(const tensor& a, const tensor& b) noexcept {
        return a.type == b.type && a.op == b.op && a.flags == b.flags && a.ne == b.ne && a.nb == b.nb &&
               a.op_params == b.op_params && a.view_offs == b.view_offs && a.data == b.data && a.buffer == b.buffer &&
               a.buffer_serial == b.buffer_serial;
    }

    std::deque<slot> slots_; // a deque: a new slot moves none of the others' tensors
    bool made_ = false; // the slots describe the last plan (make() made them)
};

} // namespace backplane::detail
