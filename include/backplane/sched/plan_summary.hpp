#pragma once
// What a dry run reports (plan_summary, sched/scheduler_params.hpp), counted from a plan
// (sched/plan.hpp) without allocating anything.

#include <backplane/core/tensor.hpp>
#include <backplane/sched/backend_queries.hpp>
#include <backplane/sched/backend_set.hpp>
#include <backplane/sched/placement.hpp>
#include <backplane/sched/plan.hpp>
#include <backplane/sched/scheduler_params.hpp>

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace backplane::detail {

/// The summary of a plan whose compute buffers need `compute_bytes` per backend:
/// `estimate` is the cost policy's (null: none, the estimates stay NaN). Resident bytes
/// count each tensor with memory of its own under the first backend whose compute buffer
/// type holds it.
template <backend_set Set>
plan_summary summarize_plan(const graph_numbering& num, const assignment& asg, const split_plan& plan,
                            backend_queries<Set>& ask, std::vector<std::size_t> compute_bytes,
                            const placement_result* estimate) {
    const std::size_t nb = ask.size();
    plan_summary out;
    out.compute_bytes = std::move(compute_bytes);
    out.n_nodes = num.n_nodes();
    out.n_splits = plan.splits.size();
    out.n_copies = plan.inputs.size();
    for (std::int32_t s : plan.inputs) out.copy_bytes += num[static_cast<std::size_t>(s)].nbytes();
    out.resident_bytes.assign(nb, 0);
    for (std::size_t i = 0; i < num.tensors().size(); ++i) {
        const tensor& t = num[i];
        if (t.view_src != nullptr || !num.has(i, tensor_info::memory)) continue;
        const std::uint32_t k = num.info[i].mem - 1;
        for (std::size_t b = 0; b < nb; ++b)
            if (ask.type_index(ask.compute_type(b)) == k) {
                out.resident_bytes[b] += t.nbytes();
                break;
            }
    }
    out.assignment.assign(asg.backend.begin(), asg.backend.begin() + static_cast<std::ptrdiff_t>(num.n_nodes()));
    if (estimate != nullptr) {
        out.estimated_seconds = estimate->seconds;
        out.greedy_estimated_seconds = estimate->greedy_seconds;
    }
    return out;
}

} // namespace backplane::detail
