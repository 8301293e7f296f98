#pragma once
// The memory caps strategy of placement (scheduler_params::memory_caps): while the plan's
// compute buffers exceed a backend's cap, the latter half of the largest run of movable
// nodes on that backend moves to another backend that supports each node and was never
// over its cap (the cheapest under the cost policy, else the last such backend), and the
// plan is split and measured again. Nodes the user, their memory or the input flag placed
// never move.

#include <backplane/core/error.hpp>
#include <backplane/sched/backend_queries.hpp>
#include <backplane/sched/backend_set.hpp>
#include <backplane/sched/cost_placement.hpp>
#include <backplane/sched/greedy_placement.hpp>
#include <backplane/sched/plan.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace backplane::detail {

/// Whether any backend has a cap (0: none).
inline bool any_cap(std::span<const std::size_t> caps) noexcept {
    for (std::size_t c : caps)
        if (c != 0) return true;
    return false;
}

/// Where node i moved off a full backend goes (-1: nowhere): under a cost policy the
/// cheapest backend not `full`, else the last one.
template <class Policy, backend_set Set>
std::int32_t cap_target([[maybe_unused]] Policy& policy, backend_queries<Set>& ask,
                        [[maybe_unused]] const graph_numbering& num, std::size_t i, const std::vector<std::uint8_t>& full) {
    if constexpr (Policy::uses_costs)
        return cost_placement<Policy, Set>::cheapest_free(policy, ask, num, i, full);
    else
        return last_free_backend(ask, i, full);
}

/// Fits an assignment under per-backend caps. `Measure`: `result<std::vector<std::size_t>>()`,
/// the compute buffer bytes per backend of the current plan; `Target`: `std::int32_t(node,
/// const std::vector<std::uint8_t>& full)`, where a node moved off goes (-1: nowhere);
/// `Replan`: `void()`, after nodes moved (views follow, the plan is split again).
template <class Measure, class Target, class Replan>
class cap_fitter {
public:
    cap_fitter(std::span<const std::size_t> caps, std::span<const std::string_view> names, const graph_numbering& num,
               assignment& asg, Measure& measure, Target& target, Replan& replan)
        : caps_(caps), names_(names), num_(num), asg_(asg), measure_(measure), target_(target), replan_(replan) {}

    /// ok when the plan fits (then `fitted`, when given, receives its measure);
    /// errc::alloc_failed when nothing left can move.
    status fit(std::vector<std::size_t>* fitted) {
        const std::size_t nb = names_.size();
        std::vector<std::uint8_t> full(nb, 0);
        for (std::size_t round = 0; round <= num_.n_nodes(); ++round) {
            auto need = measure_();
            if (!need) return need.error();
            std::size_t over = nb;
            for (std::size_t b = 0; b < nb && over == nb; ++b)
                if (cap(b) != 0 && (*need)[b] > cap(b)) over = b;
            if (over == nb) {
                if (fitted != nullptr) *fitted = std::move(*need);
                return {};
            }
            full[over] = 1;
            if (!move_half_run(over, full))
                return {errc::alloc_failed, "scheduler: the plan needs " + std::to_string((*need)[over]) +
                                                " bytes of compute buffers on '" + std::string(names_[over]) +
                                                "', more than its memory cap of " + std::to_string(cap(over)) +
                                                " bytes, and no work left there can move to a backend under its cap"};
            replan_();
        }
        return {errc::alloc_failed, "scheduler: could not fit the plan under the memory caps"};
    }

private:
    std::size_t cap(std::size_t b) const noexcept { return b < caps_.size() ? caps_[b] : 0; }

    bool computes(std::size_t i) const noexcept { return num_.has(i, tensor_info::computes); }

    bool movable(std::size_t i, std::size_t b) const noexcept {
        const placement_cause c = asg_.cause[i];
        return computes(i) && asg_.backend[i] == static_cast<std::int32_t>(b) && c != placement_cause::user &&
               c != placement_cause::buffer && c != placement_cause::input;
    }

    // The largest run (by bytes) of movable nodes on backend b, nodes that compute
    // nothing inside it: its first node and its number of movable nodes.
    std::pair<std::size_t, std::size_t> largest_run(std::size_t b) const {
        std::size_t best_first = 0, best_len = 0, best_bytes = 0;
        for (std::size_t i = 0; i < num_.n_nodes();) {
            if (!movable(i, b)) {
                ++i;
                continue;
            }
            std::size_t j = i, bytes = 0, len = 0;
            for (; j < num_.n_nodes() && (movable(j, b) || !computes(j)); ++j)
                if (computes(j)) {
                    bytes += num_[j].nbytes();
                    ++len;
                }
            if (bytes > best_bytes || best_len == 0) {
                best_first = i;
                best_len = len;
                best_bytes = bytes;
            }
            i = j;
        }
        return {best_first, best_len};
    }

    // Moves the latter half (all of a single node) of backend b's largest run; false
    // when nothing moved.
    bool move_half_run(std::size_t b, const std::vector<std::uint8_t>& full) {
        const auto [first, len] = largest_run(b);
        bool moved = false;
        std::size_t seen = 0;
        for (std::size_t i = first; seen < len && i < num_.n_nodes(); ++i) {
            if (!computes(i)) continue;
            if (seen++ < len / 2) continue;
            const std::int32_t to = target_(i, full);
            if (to < 0) continue;
            asg_.set(i, to, placement_cause::memory);
            moved = true;
        }
        return moved;
    }

    std::span<const std::size_t> caps_;
    std::span<const std::string_view> names_;
    const graph_numbering& num_;
    assignment& asg_;
    Measure& measure_;
    Target& target_;
    Replan& replan_;
};

/// Fits the plan under `caps` (no cap set: nothing to do), moving nodes to cap_target.
/// `measure` and `replan` as cap_fitter's; `fitted`, when given, receives the measure of
/// the plan that fits (left empty without caps).
template <class Policy, backend_set Set, class Measure, class Replan>
status fit_under_caps(std::span<const std::size_t> caps, std::span<const std::string_view> names,
                      const graph_numbering& num, assignment& asg, Policy& policy, backend_queries<Set>& ask,
                      Measure& measure, Replan& replan, std::vector<std::size_t>* fitted) {
    if (!any_cap(caps)) return {};
    auto target = [&](std::size_t i, const std::vector<std::uint8_t>& full) {
        return cap_target(policy, ask, num, i, full);
    };
    return cap_fitter(caps, names, num, asg, measure, target, replan).fit(fitted);
}

} // namespace backplane::detail
