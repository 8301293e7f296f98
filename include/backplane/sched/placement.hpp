#pragma once
// Placement policies: what decides which backend runs each node (docs/scheduler.md,
// "Placement policies").
//
// A scheduler's policy is its template parameter:
//  * greedy_policy (the default): ggml's passes, fixed rules (scheduler.hpp's comment);
//  * cost_policy (sched/cost_policy.hpp, recommended): minimises the estimated time of
//    the whole graph under a cost model, starting from the greedy plan and never
//    returning a plan its model rates slower than the greedy one.
//
// A policy other than greedy_policy is handed the graph as a placement_problem (below)
// after the greedy passes, with the greedy assignment, and returns an assignment.

#include <backplane/core/tensor.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace backplane {

/// ggml's greedy passes (the scheduler's default policy).
struct greedy_policy {
    static constexpr bool uses_costs = false;
};

namespace detail {

/// One graph as the cost policy sees it. Tensors are numbered as the scheduler numbers
/// them: nodes [0, n_nodes) in graph order, then leafs and other tensors; buffer types
/// are numbered per graph (`n_types`). Everything a placement changes the cost of is
/// here, so the search runs on these arrays alone.
struct placement_problem {
    static constexpr double unsupported = std::numeric_limits<double>::infinity();

    std::size_t nb = 0;      ///< backends
    std::size_t n_nodes = 0; ///< nodes of the graph
    std::size_t n_types = 0; ///< buffer types met

    // per node
    std::vector<std::uint8_t> computes;            ///< 1: runs a kernel (not a view)
    std::vector<std::int32_t> fixed;               ///< the backend it must run on, -1: free
    std::vector<double> node_cost;                 ///< [node * nb + b] seconds; unsupported: infinity
    std::vector<std::array<std::int32_t, max_srcs>> srcs; ///< tensor numbers of its sources, -1: none

    // per tensor
    std::vector<std::int32_t> root;  ///< the tensor whose memory it uses (its view source, else itself)
    std::vector<std::int32_t> mem;   ///< buffer type of memory of its own, -1: none (placed by the plan)
    std::vector<std::int32_t> home;  ///< for a tensor that is not a node: its backend, -1: unknown
    std::vector<double> bytes;       ///< bytes a copy of it moves

    // per buffer type k and backend b ([k * nb + b])
    std::vector<std::uint8_t> reads;     ///< b computes on memory of type k in place
    std::vector<double> link_latency;    ///< seconds to start a copy from type k to b's memory
    std::vector<double> link_bandwidth;  ///< bytes per second of that copy

    // per backend
    std::vector<std::int32_t> backend_type; ///< the buffer type its compute memory has
    std::vector<double> split_cost;         ///< seconds a split on it adds (launch, synchronization)
    std::vector<std::string> names;         ///< for explanations
};

/// What a policy returns.
struct placement_result {
    std::vector<std::int32_t> assign; ///< per node: its backend (views: their source's)
    double seconds = 0;               ///< the estimate of the plan
    double greedy_seconds = 0;        ///< the estimate of the greedy plan, same model
    std::string start;                ///< which starting plan the search improved ("greedy", "all on X")
};

} // namespace detail
} // namespace backplane
