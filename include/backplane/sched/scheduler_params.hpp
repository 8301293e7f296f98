#pragma once
// The values of the scheduler's API (sched/scheduler.hpp): its parameters, what a dry
// run reports, and one split of the last graph as the accessors show it.

#include <backplane/core/graph.hpp>
#include <backplane/core/tensor.hpp>
#include <backplane/memory/buffer.hpp>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <vector>

namespace backplane {

struct scheduler_params {
    /// Pipeline copies: slots per split input and graph input, used in rotation by
    /// successive alloc_graph calls (1: no pipeline parallelism). 1 to max_copies: each
    /// slot holds its own copy of every split input and graph input, and backends rarely
    /// overlap more than a few runs (ggml allows 4).
    int n_copies = 1;
    static constexpr int max_copies = 64;
    /// Let a higher-priority backend take ops on host weights it asks for (offload_op).
    bool op_offload = true;
    /// Record an execution trace of each compute (trace(), sched/trace.hpp). A traced
    /// compute synchronizes each split's backend after its copies and after its nodes to
    /// time them, so backends do not overlap. Backends that time on the device
    /// (timed_backend) also report when their nodes ran there.
    bool trace = false;
    /// Per backend index: the most bytes of compute buffers the scheduler may hold for it
    /// (0, or no entry: no cap). Plans move work off a backend until its buffers fit; a
    /// plan that cannot fit fails with errc::alloc_failed. Backends sharing a buffer type
    /// share one buffer: the first of them's cap applies.
    std::vector<std::size_t> memory_caps = {};
    /// A split that copies weights from memory its backend cannot read ends before the
    /// next such weight once it has copied more than this many bytes of them, so that
    /// the copies' memory is reused (pass 5). 0: before every such weight (ggml's rule);
    /// more: fewer splits, more memory for copies. policy_default: 0 under the greedy
    /// policy; under the cost policy an eighth of the split's device's memory (at least
    /// 64 MiB).
    std::size_t weight_copy_batch = policy_default;
    static constexpr std::size_t policy_default = std::numeric_limits<std::size_t>::max();
    /// Per backend index: the buffer type of that backend's compute buffers (its nodes
    /// and the split inputs copied to it) instead of its default buffer type (nullopt,
    /// or no entry: the default). ggml's `bufts` argument; e.g. pinned host memory for
    /// the CPU's compute buffer when a GPU is present, so copies to and from the GPU run
    /// at full speed. The backend must support the type (supports_buffer_type), and the
    /// last backend's type must be host memory; the buffer type object must outlive the
    /// scheduler. Weights stay where they were allocated.
    std::vector<std::optional<buffer_type_ref>> buffer_types = {};
};

/// What a plan needs, from dry_run(): computed without allocating anything.
struct plan_summary {
    std::size_t n_nodes = 0;
    std::size_t n_splits = 0;
    std::size_t n_copies = 0;   ///< tensors copied between backends per run
    std::size_t copy_bytes = 0; ///< their bytes
    /// Per backend: bytes of compute buffers the plan needs (backends sharing a buffer
    /// type: under the first of them, 0 under the others, as buffer_size()).
    std::vector<std::size_t> compute_bytes;
    /// Per backend: bytes of the graph's tensors that already have memory of that
    /// backend's buffer type (weights, typically; counted like compute_bytes).
    std::vector<std::size_t> resident_bytes;
    /// Per node of the graph: the backend it runs on.
    std::vector<std::int32_t> assignment;
    /// The cost model's estimate of one compute, in seconds, and of the greedy plan
    /// (the cost policy; NaN under the greedy policy, which has no model).
    double estimated_seconds = std::numeric_limits<double>::quiet_NaN();
    double greedy_estimated_seconds = std::numeric_limits<double>::quiet_NaN();

    /// compute_bytes + resident_bytes of backend b.
    [[nodiscard]] std::size_t peak_bytes(std::size_t b) const {
        return (b < compute_bytes.size() ? compute_bytes[b] : 0) + (b < resident_bytes.size() ? resident_bytes[b] : 0);
    }
};

/// One split of the last graph: nodes [first, last) of it on `backend`, reading `inputs`
/// (tensors of other backends copied in before it runs). `nodes` are what the backend
/// computes, after alloc_graph: the graph's nodes, except that a node reading copies is
/// its shadow there (the scheduler's tensor equal to it, its sources naming the copies of
/// the current pipeline slot).
struct split_info {
    std::size_t backend = 0;
    std::size_t first = 0;
    std::size_t last = 0;
    std::span<tensor* const> inputs;
    graph_view nodes;
};

} // namespace backplane
