#pragma once
// The cost policy's optimiser: minimises the estimated time of a placement_problem.
//
// The estimate of an assignment (node -> backend) is
//   sum of each computing node's cost on its backend
// + each copy: a source read by a node whose backend cannot read the source's memory in
//   place is copied once per graph and backend: latency + bytes / bandwidth of the link
//   from the source's buffer type (its own memory's, else its producer's backend's)
// + each split: a run of consecutive computing nodes on one backend costs its backend's
//   split cost (submission and synchronization).
//
// The search is a local search from several starting plans: the greedy plan, and for
// each backend the plan that puts every free node it supports on it. From each start it
// repeats, until nothing improves: move a whole run of nodes on one backend (a split) to
// another backend; move one node. Each move is evaluated incrementally (the copies its
// sources and its readers need, the split boundaries around it), so a sweep costs about
// the size of the graph times the backends. The result is the best plan found; the greedy
// plan is one of the candidates, so the result is never rated worse than it.

#include <backplane/sched/placement.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace backplane::detail {

class placement_search {
public:
    explicit placement_search(const placement_problem& p) : p_(p), nb_(p.nb) {
        const std::size_t nt = p.root.size();
        readers_.assign(nt, {});
        group_.assign(p.n_nodes, {});
        for (std::size_t i = 0; i < p.n_nodes; ++i) {
            if (!p.computes[i]) continue;
            for (const std::int32_t s : p.srcs[i])
                if (s >= 0) readers_[static_cast<std::size_t>(s)].push_back(static_cast<std::int32_t>(i));
        }
        for (std::size_t s = 0; s < nt; ++s) {
            const std::int32_t r = p.root[s];
            if (r >= 0 && static_cast<std::size_t>(r) < p.n_nodes && p.mem[static_cast<std::size_t>(r)] < 0 &&
                !readers_[s].empty())
                group_[static_cast<std::size_t>(r)].push_back(static_cast<std::int32_t>(s));
        }
        for (std::size_t i = 0; i < p.n_nodes; ++i)
            if (p.computes[i]) order_.push_back(static_cast<std::int32_t>(i));
        prev_.assign(p.n_nodes, -1);
        next_.assign(p.n_nodes, -1);
        for (std::size_t k = 0; k < order_.size(); ++k) {
            const auto i = static_cast<std::size_t>(order_[k]);
            if (k > 0) prev_[i] = order_[k - 1];
            if (k + 1 < order_.size()) next_[i] = order_[k + 1];
        }
    }

    /// The estimate of `assign` (per node; views and fixed nodes as given).
    double evaluate(std::span<const std::int32_t> assign) {
        load(assign);
        return total_;
    }

    /// The best plan found from the greedy assignment `greedy` (see the header comment).
    placement_result run(std::span<const std::int32_t> greedy) {
        placement_result best;
        best.greedy_seconds = evaluate(greedy);
        best.seconds = best.greedy_seconds;
        best.assign.assign(greedy.begin(), greedy.end());
        best.start = "greedy";
        const auto consider = [&](std::span<const std::int32_t> start, std::string name) {
            load(start);
            improve();
            const double t = full_total(); // no drift from the incremental sums
            if (t < best.seconds * (1 - 1e-12)) {
                best.seconds = t;
                best.assign = a_;
                best.start = std::move(name);
            }
        };
        consider(greedy, "greedy");
        std::vector<std::int32_t> start;
        for (std::size_t b = 0; b < nb_; ++b) {
            start.assign(greedy.begin(), greedy.end());
            for (const std::int32_t i : order_) {
                const auto iu = static_cast<std::size_t>(i);
                if (p_.fixed[iu] < 0 && std::isfinite(cost(iu, b))) start[iu] = static_cast<std::int32_t>(b);
            }
            consider(start, "all on " + (b < p_.names.size() ? p_.names[b] : std::to_string(b)));
        }
        // views take their source's backend
        for (std::size_t i = 0; i < p_.n_nodes; ++i) {
            if (p_.computes[i]) continue;
            const std::int32_t r = p_.root[i];
            if (r >= 0 && static_cast<std::size_t>(r) < p_.n_nodes && static_cast<std::size_t>(r) != i)
                best.assign[i] = best.assign[static_cast<std::size_t>(r)];
        }
        return best;
    }

private:
    double cost(std::size_t i, std::size_t b) const noexcept { return p_.node_cost[i * nb_ + b]; }

    // The buffer type tensor s lives in under the current assignment.
    std::int32_t loc(std::size_t s) const noexcept {
        const auto r = static_cast<std::size_t>(p_.root[s] >= 0 ? p_.root[s] : static_cast<std::int32_t>(s));
        if (p_.mem[r] >= 0) return p_.mem[r];
        std::int32_t b = r < p_.n_nodes ? a_[r] : p_.home[r];
        if (b < 0) b = static_cast<std::int32_t>(nb_ - 1);
        return p_.backend_type[static_cast<std::size_t>(b)];
    }
    bool needs(std::int32_t k, std::size_t b) const noexcept {
        return p_.reads[static_cast<std::size_t>(k) * nb_ + b] == 0;
    }
    double copy_cost(std::size_t s, std::int32_t k, std::size_t b) const noexcept {
        const std::size_t l = static_cast<std::size_t>(k) * nb_ + b;
        return p_.link_latency[l] + p_.bytes[s] / p_.link_bandwidth[l];
    }
    double split_in(std::int32_t prev, std::int32_t b) const noexcept {
        // the split cost node with backend b adds given the backend of the computing node
        // before it (-1: none)
        return prev < 0 || a_[static_cast<std::size_t>(prev)] != b ? p_.split_cost[static_cast<std::size_t>(b)] : 0.0;
    }

    void load(std::span<const std::int32_t> assign) {
        a_.assign(assign.begin(), assign.end());
        total_ = full_total();
    }

    // Recomputes the copy counts and the estimate from a_.
    double full_total() {
        cnt_.assign(p_.root.size() * nb_, 0);
        double t = 0;
        std::int32_t prev = -1;
        for (const std::int32_t i : order_) {
            const auto iu = static_cast<std::size_t>(i);
            const std::int32_t b = a_[iu];
            t += cost(iu, static_cast<std::size_t>(b));
            t += prev < 0 || a_[static_cast<std::size_t>(prev)] != b ? p_.split_cost[static_cast<std::size_t>(b)] : 0.0;
            prev = i;
            for (const std::int32_t s : p_.srcs[iu]) {
                if (s < 0) continue;
                const auto su = static_cast<std::size_t>(s);
                const std::int32_t k = loc(su);
                if (needs(k, static_cast<std::size_t>(b)) && cnt_[su * nb_ + static_cast<std::size_t>(b)]++ == 0)
                    t += copy_cost(su, k, static_cast<std::size_t>(b));
            }
        }
        total_ = t;
        return t;
    }

    // Moves computing node i to backend nb, updating the counts and the estimate; returns
    // the change of the estimate.
    double move(std::size_t i, std::int32_t to) {
        const std::int32_t from = a_[i];
        if (from == to) return 0.0;
        const auto tu = static_cast<std::size_t>(to);
        const auto fu = static_cast<std::size_t>(from);
        double d = cost(i, tu) - cost(i, fu);
        const std::int32_t pv = prev_[i];
        const std::int32_t nx = next_[i];
        // split boundaries around i
        d -= split_in(pv, from);
        if (nx >= 0) d -= split_in(static_cast<std::int32_t>(i), a_[static_cast<std::size_t>(nx)]);
        // i's sources: copies to `from` one fewer, to `to` one more
        for (const std::int32_t s : p_.srcs[i]) {
            if (s < 0) continue;
            const auto su = static_cast<std::size_t>(s);
            const std::int32_t k = loc(su);
            if (needs(k, fu) && --cnt_[su * nb_ + fu] == 0) d -= copy_cost(su, k, fu);
            if (needs(k, tu) && cnt_[su * nb_ + tu]++ == 0) d += copy_cost(su, k, tu);
        }
        const std::int32_t k_old = p_.backend_type[fu];
        const std::int32_t k_new = p_.backend_type[tu];
        a_[i] = to;
        d += split_in(pv, to);
        if (nx >= 0) d += split_in(static_cast<std::int32_t>(i), a_[static_cast<std::size_t>(nx)]);
        // what lives in i's memory moved with it: its readers' copies change
        if (k_old != k_new)
            for (const std::int32_t s : group_[i]) {
                const auto su = static_cast<std::size_t>(s);
                for (std::size_t b = 0; b < nb_; ++b)
                    if (cnt_[su * nb_ + b] > 0) d -= copy_cost(su, k_old, b);
                for (std::size_t b = 0; b < nb_; ++b) cnt_[su * nb_ + b] = 0;
                for (const std::int32_t r : readers_[su]) {
                    const auto b = static_cast<std::size_t>(a_[static_cast<std::size_t>(r)]);
                    if (needs(k_new, b) && cnt_[su * nb_ + b]++ == 0) d += copy_cost(su, k_new, b);
                }
            }
        total_ += d;
        return d;
    }

    bool movable(std::size_t i, std::size_t b) const noexcept {
        return p_.fixed[i] < 0 && std::isfinite(cost(i, b));
    }

    // Local search (see the header comment) until no move improves the estimate.
    void improve() {
        const auto better = [&](double before) { return total_ < before - 1e-12 * std::max(1e-9, before); };
        std::vector<std::pair<std::size_t, std::int32_t>> undo;
        for (int round = 0; round < 64; ++round) {
            bool improved = false;
            // whole runs
            for (std::size_t k = 0; k < order_.size();) {
                std::size_t e = k;
                const std::int32_t b0 = a_[static_cast<std::size_t>(order_[k])];
                while (e < order_.size() && a_[static_cast<std::size_t>(order_[e])] == b0) ++e;
                for (std::size_t b = 0; b < nb_; ++b) {
                    if (static_cast<std::int32_t>(b) == b0) continue;
                    const double before = total_;
                    undo.clear();
                    for (std::size_t q = k; q < e; ++q) {
                        const auto i = static_cast<std::size_t>(order_[q]);
                        if (!movable(i, b)) continue;
                        undo.emplace_back(i, a_[i]);
                        move(i, static_cast<std::int32_t>(b));
                    }
                    if (!undo.empty() && better(before)) {
                        improved = true;
                        break;
                    }
                    for (auto it = undo.rbegin(); it != undo.rend(); ++it) move(it->first, it->second);
                    total_ = before; // exact: the moves undone
                }
                k = e;
            }
            // single nodes
            for (const std::int32_t i : order_) {
                const auto iu = static_cast<std::size_t>(i);
                for (std::size_t b = 0; b < nb_; ++b) {
                    const std::int32_t cur = a_[iu];
                    if (static_cast<std::int32_t>(b) == cur || !movable(iu, b)) continue;
                    const double before = total_;
                    move(iu, static_cast<std::int32_t>(b));
                    if (better(before)) {
                        improved = true;
                    } else {
                        move(iu, cur);
                        total_ = before;
                    }
                }
            }
            if (!improved) break;
        }
    }

    const placement_problem& p_;
    std::size_t nb_;
    std::vector<std::int32_t> a_;
    std::vector<std::int32_t> cnt_;
    std::vector<std::vector<std::int32_t>> readers_;
    std::vector<std::vector<std::int32_t>> group_;
    std::vector<std::int32_t> order_, prev_, next_;
    double total_ = 0;
};

} // namespace backplane::detail
