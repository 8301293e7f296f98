#pragma once
// The cost strategy of placement (docs/scheduler.md, "Placement policies"): after the
// greedy passes, the graph becomes a placement_problem (sched/placement.hpp) priced by
// the policy's cost model, and the policy's search replaces the assignment of every node
// that is free to move. It starts from the greedy assignment and never returns a plan its
// model rates slower. The same problem from the same greedy start reuses the last search.

#include <backplane/core/tensor.hpp>
#include <backplane/sched/backend_queries.hpp>
#include <backplane/sched/placement.hpp>
#include <backplane/sched/plan.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace backplane::detail {

template <class Policy, backend_set Set>
class cost_placement {
public:
    /// Replaces the greedy assignment of the free nodes by the policy's.
    void place(Policy& policy, backend_queries<Set>& ask, const graph_numbering& num, assignment& asg) {
        build_problem(next_, policy, ask, num, asg);
        greedy_.assign(asg.backend.begin(), asg.backend.begin() + static_cast<std::ptrdiff_t>(num.n_nodes()));
        if (!has_result_ || greedy_ != last_greedy_ || !same_problem(next_, problem_)) {
            std::swap(problem_, next_);
            result_ = policy.optimize(problem_, greedy_);
            last_greedy_ = greedy_;
            has_result_ = true;
        }
        for (std::size_t i = 0; i < num.n_nodes(); ++i)
            if (problem_.computes[i] && problem_.fixed[i] < 0) asg.set(i, result_.assign[i], placement_cause::cost);
        follow_views(num, asg);
        has_estimate_ = true;
    }

    /// The estimate no longer describes the plan (a new graph is being placed).
    void forget_estimate() noexcept { has_estimate_ = false; }
    /// Re-prices the plan after the memory caps moved nodes.
    void reprice(Policy& policy, const graph_numbering& num, const assignment& asg) {
        if (has_estimate_) result_.seconds = policy.evaluate(problem_, std::span<const std::int32_t>(asg.backend).first(num.n_nodes()));
    }

    /// The backend not `full` that computes node i fastest, by the policy (-1: none):
    /// where the memory caps move it.
    static std::int32_t cheapest_free(Policy& policy, backend_queries<Set>& ask, const graph_numbering& num,
                                      std::size_t i, const std::vector<std::uint8_t>& full) {
        std::int32_t to = -1;
        double best = placement_problem::unsupported;
        for (std::size_t b = 0; b < ask.size(); ++b) {
            if (full[b] || !ask.supports(i, b)) continue;
            const double c = policy.node_seconds(b, num[i]);
            if (to < 0 || c < best) {
                best = c;
                to = static_cast<std::int32_t>(b);
            }
        }
        return to;
    }

    /// The problem and the search's result when they describe the plan (else null).
    [[nodiscard]] const placement_problem* problem() const noexcept { return has_estimate_ ? &problem_ : nullptr; }
    [[nodiscard]] const placement_result* estimate() const noexcept { return has_estimate_ ? &result_ : nullptr; }

private:
    // The placement problem of the numbered graph, costs from the policy.
    static void build_problem(placement_problem& p, Policy& policy, backend_queries<Set>& ask,
                              const graph_numbering& num, const assignment& asg) {
        const std::size_t nb = ask.size();
        for (std::size_t b = 0; b < nb; ++b) (void)ask.type_index(ask.compute_type(b)); // every backend's type numbered
        p.nb = nb;
        p.n_nodes = num.n_nodes();
        price_nodes(p, policy, ask, num, asg);
        describe_tensors(p, num, asg);
        price_links(p, policy, ask, num);
        p.backend_type.resize(nb);
        p.split_cost.resize(nb);
        p.names.resize(nb);
        for (std::size_t b = 0; b < nb; ++b) {
            p.backend_type[b] = static_cast<std::int32_t>(ask.type_index(ask.compute_type(b)));
            p.split_cost[b] = policy.split_seconds(b);
            p.names[b] = std::string(ask.set().name(b));
        }
    }

    // Per node: computes, fixed backend, cost on each backend, sources.
    static void price_nodes(placement_problem& p, Policy& policy, backend_queries<Set>& ask, const graph_numbering& num,
                            const assignment& asg) {
        const std::size_t nb = ask.size();
        p.computes.resize(num.n_nodes());
        p.fixed.resize(num.n_nodes());
        p.node_cost.resize(num.n_nodes() * nb);
        p.srcs.resize(num.n_nodes());
        for (std::size_t i = 0; i < num.n_nodes(); ++i) {
            const bool c = num.has(i, tensor_info::computes);
            p.computes[i] = c ? 1 : 0;
            const placement_cause why = asg.cause[i];
            const bool pinned = why == placement_cause::user || why == placement_cause::buffer || why == placement_cause::input;
            p.fixed[i] = !c || pinned ? asg.backend[i] : -1;
            for (std::size_t b = 0; b < nb; ++b)
                p.node_cost[i * nb + b] = !c                  ? 0.0
                                          : ask.supports(i, b) ? policy.node_seconds(b, num[i])
                                                               : placement_problem::unsupported;
            p.srcs[i] = num.srcs(i);
            for (std::size_t j = num.info[i].nsrc; j < max_srcs; ++j) p.srcs[i][j] = -1;
        }
    }

    // Per tensor: the tensor whose memory it uses, its own memory's type, its backend
    // when it is not a node, the bytes a copy moves.
    static void describe_tensors(placement_problem& p, const graph_numbering& num, const assignment& asg) {
        const std::size_t nt = num.tensors().size();
        p.root.resize(nt);
        p.mem.resize(nt);
        p.home.resize(nt);
        p.bytes.resize(nt);
        for (std::size_t s = 0; s < nt; ++s) {
            p.root[s] = s < num.size() && num.view_src(s) >= 0 ? num.view_src(s) : static_cast<std::int32_t>(s);
            p.mem[s] = num.info[s].mem != 0 ? static_cast<std::int32_t>(num.info[s].mem - 1) : -1;
            p.home[s] = s >= num.n_nodes() ? asg.backend[s] : -1;
            p.bytes[s] = static_cast<double>(num[s].nbytes());
        }
    }

    // Per buffer type and backend: read in place, or the link a copy takes.
    static void price_links(placement_problem& p, Policy& policy, backend_queries<Set>& ask, const graph_numbering& num) {
        const std::size_t nb = ask.size();
        const std::size_t nk = num.types.size();
        p.n_types = nk;
        p.reads.resize(nk * nb);
        p.link_latency.resize(nk * nb);
        p.link_bandwidth.resize(nk * nb);
        for (std::size_t k = 0; k < nk; ++k)
            for (std::size_t b = 0; b < nb; ++b) {
                const bool r = ask.reads_at(b, k);
                p.reads[k * nb + b] = r ? 1 : 0;
                if (r) { // no copy
                    p.link_latency[k * nb + b] = 0;
                    p.link_bandwidth[k * nb + b] = 1;
                    continue;
                }
                const auto l = policy.link(num.types[k].name(), num.types[k].is_host(), b);
                p.link_latency[k * nb + b] = l.latency;
                p.link_bandwidth[k * nb + b] = l.bandwidth;
            }
    }

    static bool same_problem(const placement_problem& a, const placement_problem& b) noexcept {
        return a.nb == b.nb && a.n_nodes == b.n_nodes && a.computes == b.computes && a.fixed == b.fixed &&
               a.node_cost == b.node_cost && a.srcs == b.srcs && a.root == b.root && a.mem == b.mem &&
               a.home == b.home && a.bytes == b.bytes && a.reads == b.reads && a.link_latency == b.link_latency &&
               a.link_bandwidth == b.link_bandwidth && a.backend_type == b.backend_type;
    }

    placement_problem problem_, next_;
    placement_result result_;
    std::vector<std::int32_t> greedy_, last_greedy_;
    bool has_result_ = false;   // result_ is the search of problem_ from last_greedy_
    bool has_estimate_ = false; // result_ describes the current plan
};

} // namespace backplane::detail
