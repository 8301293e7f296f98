#pragma once
// The scheduler: splits one graph across several backends, allocates it, copies tensors
// between the backends and computes it (DESIGN.md section 5; docs/scheduler.md).
//
//     vulkan_backend gpu(...);  cpu_backend cpu;
//     scheduler sched(gpu, cpu);            // priority order; the last one uses host memory
//     if (auto s = sched.reserve(worst_case); !s) return s;   // optional: size buffers once
//     graph g = build(ctx);                 // a no_alloc context; weights already allocated
//     if (auto s = sched.alloc_graph(g); !s) return s;
//     ...write the inputs...
//     if (auto s = sched.compute(g); !s) return s;
//     ...read the outputs...
//
// Placement, as ggml's scheduler does it (each node records why; placement_cause):
//  1. from the tensor itself: a tensor that already has memory runs on the highest-priority
//     backend that can use that memory and compute its op (buffer); graph inputs go to the
//     last backend (input); an op that reads weights runs where the weights are (weights),
//     unless the weights are in host memory and a higher-priority backend asks to offload
//     the op (offload; switchable). rope's small position tensor never steers. User
//     assignments (set_backend) are never changed (user).
//  2. expansion: the assignments of backends other than the last spread down and then up
//     the node list over unassigned nodes they support, then every assignment does (expand).
//  3. a node moves to a higher-priority backend that has the same buffer type and can read
//     all its sources (upgrade: BLAS and CPU share host memory); a node still unassigned
//     goes to the backend that supports it and can read the most of its sources (best).
//  4. views take their source's backend, sources left unassigned their consumer's (source);
//     anything still unassigned goes to the first backend that supports it (fallback).
//  5. splits: runs of consecutive nodes on one backend (view ops never start one). A
//     source the split's backend cannot read in place becomes a split input: copied into a
//     tensor of that backend's buffer type, once per graph and backend. A node reading
//     weights that live on another backend it cannot read starts a new split (so that the
//     copied weights' memory can be reused). No limit on splits, inputs or copies.
//  6. allocation: one graph_allocator over the backends' buffer types gives every node,
//     leaf and copy an address; it replays its plan while the graph keeps its structure.
//  7. compute: per split, wait for the previous split's backend (device-side with events,
//     else on the host), copy the inputs (user inputs synchronously, others with the
//     destination backend's asynchronous copy when it has one), compute, record an event.
//     With n_copies > 1 (pipeline parallelism), every copy and every graph input has
//     n_copies slots used in rotation, so one run's inputs can be written while earlier
//     runs are still in flight on other backends.
//
// The user's graph is never modified (the allocator gives its tensors addresses, nothing
// else changes): a node that reads copies runs as its shadow, the scheduler's own tensor
// equal to the node but for those sources, which name the copies (one shadow per
// pipeline slot). The allocator is told the same through its topology.
// Errors are statuses on the runtime paths (alloc, compute) and backplane::error from
// the constructors; nothing aborts.

#include <backplane/core/concepts.hpp>
#include <backplane/core/detail/describe.hpp>
#include <backplane/core/detail/single_user.hpp>
#include <backplane/core/error.hpp>
#include <backplane/core/graph.hpp>
#include <backplane/core/tensor.hpp>
#include <backplane/memory/buffer.hpp>
#include <backplane/core/detail/tensor_map.hpp>
#include <backplane/memory/graph_alloc.hpp>
#include <backplane/memory/host_buffer.hpp>
#include <backplane/memory/tensor_copy.hpp>
#include <backplane/memory/tensor_io.hpp>
#include <backplane/sched/backend_set.hpp>
#include <backplane/sched/placement.hpp>
#include <backplane/sched/trace.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <functional>
#include <limits>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

namespace backplane {

/// Why a tensor runs on its backend (see the header comment, passes 1-4).
// 16 bits: the scheduler's per-tensor arrays of these are written in its hottest loops,
// and a character-sized type may alias anything (the compiler then reloads every pointer).
enum class placement_cause : std::uint16_t {
    none,     ///< not placed (not part of the last graph)
    user,     ///< set_backend
    buffer,   ///< it already has memory that backend uses
    input,    ///< a graph input: the last backend
    weights,  ///< it reads weights held there
    offload,  ///< it reads host weights and that backend asked to run it
    expand,   ///< next to nodes on that backend
    upgrade,  ///< moved up to a backend sharing the buffer type
    best,     ///< the supporting backend that reads most of its sources in place
    source,   ///< a view takes its source's backend, a source its consumer's
    fallback, ///< the first backend that supports it
    cost,     ///< the cost policy's choice (explain() gives its estimates)
    memory,   ///< moved off a backend whose memory cap the plan exceeded
};

constexpr std::string_view to_string(placement_cause c) noexcept {
    switch (c) {
    case placement_cause::none: return "none";
    case placement_cause::user: return "user";
    case placement_cause::buffer: return "buffer";
    case placement_cause::input: return "input";
    case placement_cause::weights: return "weights";
    case placement_cause::offload: return "offload";
    case placement_cause::expand: return "expand";
    case placement_cause::upgrade: return "upgrade";
    case placement_cause::best: return "best";
    case placement_cause::source: return "source";
    case placement_cause::fallback: return "fallback";
    case placement_cause::cost: return "cost";
    case placement_cause::memory: return "memory cap";
    }
    return "?";
}

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

/// The eval callback: asked for each node of a split in order with ask = true ("will you
/// look at this node?"); nodes up to the first `true` are computed in one call; then it is
/// called again for that node with ask = false, its result computed and readable (the
/// backend synchronized). Returning false then cancels the compute: nothing after that
/// node runs, and compute returns errc::aborted.
using eval_callback = std::function<bool(tensor& node, bool ask)>;

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

namespace detail {

inline bool has_memory(const tensor& t) noexcept {
    return t.data != nullptr || (t.view_src != nullptr && t.view_src->data != nullptr);
}

} // namespace detail

/// The scheduler over a backend set (see the header comment), placing nodes by `Policy`
/// (sched/placement.hpp). scheduler<B0, ..., Bn> is this over a tuple of backend
/// references; policy_scheduler<P, B0, ..., Bn> the same with policy P;
/// dynamic_scheduler over a run-time list.
///
/// Threads (docs/threading.md): one thread at a time drives a scheduler. Its mutating
/// members (plan, dry_run, reserve, alloc_graph, compute, compute_async, synchronize,
/// reset, set_backend, the setters) detect a call from a second thread while the first is
/// inside: the call changes nothing and returns errc::busy (the void ones throw
/// backplane::error with it).
template <backend_set Set, class Policy = greedy_policy>
class basic_scheduler {
public:
    /// Throws backplane::error (and no other exception) for an empty set, n_copies
    /// outside [1, max_copies], more memory caps than backends, a buffer type override
    /// its backend does not support (or more overrides than backends), a last backend
    /// whose compute buffer type is not host memory, or no memory (errc::alloc_failed).
    explicit basic_scheduler(Set backends, scheduler_params params = {}, Policy policy = {}) try
        : set_(std::move(backends)), params_(std::move(params)), policy_(std::move(policy)), nb_(set_.size()),
          galloc_(make_allocator(set_, params_)) {
        check_params(params_, nb_);
        for (std::size_t b = 0; b < nb_; ++b) // the compute buffer types, fixed for its life
            bt_.push_back(galloc_.buffer_type(static_cast<int>(b)));
        if (!bt_[nb_ - 1].is_host())
            throw error("scheduler: the last backend ('" + std::string(set_.name(nb_ - 1)) +
                            "') must use host memory (it runs graph inputs and whatever no other backend supports)",
                        errc::invalid_argument);
        if (auto s = set_.init_events(params_.n_copies); !s) throw error(s.message(), s.code());
        if (const char* v = std::getenv("BACKPLANE_SCHED_DEBUG")) debug_ = std::atoi(v);
        pending_readers_.resize(nb_);
        exec_.resize(static_cast<std::size_t>(params_.n_copies));
        shadows_.resize(static_cast<std::size_t>(params_.n_copies));
        if constexpr (Policy::uses_costs)
            if (status s = policy_.attach(set_); !s) throw error(s.message(), s.code());
        if (params_.trace)
            for (std::size_t b = 0; b < nb_; ++b) (void)set_.set_timing(b, true);
        copy_batch_.assign(nb_, params_.weight_copy_batch);
        if (params_.weight_copy_batch == scheduler_params::policy_default)
            for (std::size_t b = 0; b < nb_; ++b)
                copy_batch_[b] = Policy::uses_costs ? std::max(std::size_t{64} << 20, set_.memory(b).total / 8) : 0;
    } catch (const error&) {
        throw;
    } catch (const std::bad_alloc&) {
        throw error("scheduler: out of host memory constructing the scheduler", errc::alloc_failed);
    } catch (const std::exception& e) {
        throw error(std::string("scheduler: constructing the scheduler failed: ") + e.what(), errc::failed);
    }

    basic_scheduler(const basic_scheduler&) = delete;
    basic_scheduler& operator=(const basic_scheduler&) = delete;

    [[nodiscard]] Set& backends() noexcept { return set_; }
    [[nodiscard]] Policy& policy() noexcept { return policy_; }
    [[nodiscard]] const Policy& policy() const noexcept { return policy_; }
    [[nodiscard]] std::size_t n_backends() const noexcept { return nb_; }

    // -- assignments ---------------------------------------------------------------------

    /// Runs `t` on backend `i` in every graph until reset(). errc::invalid_argument when
    /// there is no backend i.
    status set_backend(const tensor& t, std::size_t i) {
        const auto use = in_use_.enter();
        if (!use) return busy("set_backend");
        if (i >= nb_)
            return {errc::invalid_argument, "scheduler::set_backend: no backend " + std::to_string(i) + " (it has " +
                                                std::to_string(nb_) + ")"};
        user_[&t] = static_cast<std::int32_t>(i);
        return {};
    }
    /// set_backend by backend object: errc::invalid_argument when b is not one of this
    /// scheduler's backends.
    template <class B>
        requires(!std::is_integral_v<B>)
    status set_backend(const tensor& t, const B& b) {
        const std::size_t i = set_.index_of(b);
        if (i >= nb_)
            return {errc::invalid_argument, "scheduler::set_backend: that backend is not one of this scheduler's"};
        return set_backend(t, i);
    }
    /// The backend of `t` in the last graph (or set by the user), -1 when none.
    [[nodiscard]] int backend_of(const tensor& t) const {
        if (graph_nodes_ != nullptr) {
            ensure_map();
            if (const std::uint32_t id = map_.find(&t); id != detail::tensor_map::npos) return bid_[id];
        }
        if (auto it = user_.find(&t); it != user_.end()) return it->second;
        return -1;
    }
    /// Why `t` runs where it does in the last graph (none when it was not in it).
    [[nodiscard]] placement_cause cause_of(const tensor& t) const {
        if (graph_nodes_ != nullptr) {
            ensure_map();
            if (const std::uint32_t id = map_.find(&t); id != detail::tensor_map::npos) return cause_[id];
        }
        return user_.contains(&t) ? placement_cause::user : placement_cause::none;
    }

    void set_eval_callback(eval_callback cb) {
        const auto use = in_use_.enter();
        if (!use) throw error(busy("set_eval_callback"));
        eval_ = std::move(cb);
    }
    void set_op_offload(bool on) {
        const auto use = in_use_.enter();
        if (!use) throw error(busy("set_op_offload"));
        params_.op_offload = on;
    }
    [[nodiscard]] bool op_offload() const noexcept { return params_.op_offload; }

    // -- the graph -----------------------------------------------------------------------

    /// Places and splits `g` without allocating anything: the accessors, describe() and
    /// to_dot() then show its plan (until the next call that takes a graph, or reset()).
    /// g is left as it was.
    [[nodiscard]] status plan(const graph& g) {
        const auto use = in_use_.enter();
        if (!use) return busy("plan");
        return guarded([&]() -> status {
            if (status s = split(g); !s) return s;
            return fit_caps(g);
        });
    }

    /// A dry run: plan(g), then what the plan needs (plan_summary) without allocating
    /// anything, so that a program can choose what to offload before it loads a model:
    /// weights not allocated yet can be assigned with set_backend() and are then counted
    /// in their backend's compute_bytes. With memory caps the plan respects them (or this
    /// fails). The accessors, describe() and to_dot() then show the plan.
    [[nodiscard]] result<plan_summary> dry_run(const graph& g) {
        const auto use = in_use_.enter();
        if (!use) return busy("dry_run");
        plan_summary out;
        status st = guarded([&]() -> status {
            if (status s = split(g); !s) return s;
            if (status s = fit_caps(g, &out.compute_bytes); !s) return s;
            if (!out.compute_bytes.empty()) return {}; // the caps' last measure
            auto need = measure(g);
            if (!need) return need.error();
            out.compute_bytes = std::move(*need);
            return {};
        });
        if (!st) return st;
        out.n_nodes = n_nodes_;
        out.n_splits = splits_.size();
        out.n_copies = split_inputs_.size();
        for (std::int32_t s : split_inputs_) out.copy_bytes += ts_[static_cast<std::size_t>(s)]->nbytes();
        out.resident_bytes.assign(nb_, 0);
        for (std::size_t i = 0; i < ts_.size(); ++i) {
            const tensor& t = *ts_[i];
            if (t.view_src != nullptr || !has(i, info_memory)) continue;
            const std::uint32_t k = info_[i].mem - 1;
            for (std::size_t b = 0; b < nb_; ++b)
                if (type_index(bt_[b]) == k) {
                    out.resident_bytes[b] += t.nbytes();
                    break;
                }
        }
        out.assignment.assign(bid_.begin(), bid_.begin() + static_cast<std::ptrdiff_t>(n_nodes_));
        if constexpr (Policy::uses_costs) {
            if (has_estimate_) {
                out.estimated_seconds = result_.seconds;
                out.greedy_estimated_seconds = result_.greedy_seconds;
            }
        }
        return out;
    }

    /// Why node `t` of the last plan runs where it does, in words; under the cost
    /// policy with the estimates of each backend and the copies it causes.
    [[nodiscard]] std::string explain(const tensor& t) const;

    /// The cost model's estimate of one compute of the last plan, and of the greedy plan,
    /// in seconds (NaN without a cost policy or a plan).
    [[nodiscard]] double estimated_seconds() const noexcept {
        if constexpr (Policy::uses_costs)
            if (graph_nodes_ != nullptr && has_estimate_) return result_.seconds;
        return std::numeric_limits<double>::quiet_NaN();
    }
    [[nodiscard]] double greedy_estimated_seconds() const noexcept {
        if constexpr (Policy::uses_costs)
            if (graph_nodes_ != nullptr && has_estimate_) return result_.greedy_seconds;
        return std::numeric_limits<double>::quiet_NaN();
    }

    /// Sizes the backends' buffers for `g` (a worst-case graph) without placing its
    /// tensors, so that later graphs up to its size allocate without growing. g is left
    /// as it was and forgotten.
    [[nodiscard]] status reserve(const graph& g) {
        const auto use = in_use_.enter();
        if (!use) return busy("reserve");
        return guarded([&]() -> status {
            // the buffers may grow: runs still queued on them finish first
            if (status s = wait_idle(); !s) return s;
            if (status s = split(g); !s) return s;
            if (status s = fit_caps(g); !s) return s;
            build_alloc_lists(g);
            status s = galloc_.reserve(alloc_nodes_view_, alloc_leafs_view_, alloc_node_ids_view_, alloc_leaf_ids_view_,
                                       &topology_);
            forget_graph();
            return s;
        });
    }

    /// Places every node of `g` on a backend, splits it and gives every tensor without
    /// memory an address (see the header comment). With pipeline copies, waits until the
    /// run that last used this alloc's slot is done, so inputs can be written right away.
    [[nodiscard]] status alloc_graph(const graph& g) {
        const auto use = in_use_.enter(); // nested when compute_async allocates
        if (!use) return busy("alloc_graph");
        return guarded([&]() -> status {
            cur_copy_ = next_copy_;
            next_copy_ = (next_copy_ + 1) % params_.n_copies;
            if (status s = wait_slot(cur_copy_); !s) return s;
            if (status s = split(g); !s) return s;
            if (status s = fit_caps(g); !s) return s;
            build_alloc_lists(g);
            // a new allocation plan may move any tensor, the input slots of runs still in
            // flight included, and grow buffers: with pipeline copies those runs finish first
            const alloc_replan_hook idle{
                [](void* self) -> status {
                    auto& sc = *static_cast<basic_scheduler*>(self);
                    // one copy: wait_slot already waited for the last run
                    return sc.params_.n_copies == 1 ? status{} : sc.wait_idle();
                },
                this};
            status s = galloc_.alloc_graph(alloc_nodes_view_, alloc_leafs_view_, alloc_node_ids_view_,
                                           alloc_leaf_ids_view_, &topology_, idle);
            if (!s) {
                forget_graph();
                return s;
            }
            make_shadows(g);
            allocated_ = &g;
            if (debug_ > 0) std::fputs(describe(debug_).c_str(), stderr);
            return {};
        });
    }

    /// compute_async, then synchronize every backend.
    [[nodiscard]] status compute(const graph& g) {
        const auto use = in_use_.enter(); // held across compute_async and synchronize
        if (!use) return busy("compute");
        if (status s = compute_async(g); !s) {
            (void)synchronize();
            return s;
        }
        return synchronize();
    }

    /// Allocates g unless it is the graph allocated last, then runs its splits; returns
    /// when everything is queued (backends may still be running: synchronize()).
    [[nodiscard]] status compute_async(const graph& g) {
        const auto use = in_use_.enter();
        if (!use) return busy("compute_async");
        if (allocated_ != &g || graph_nodes_ != g.nodes().data() || n_nodes_ != g.n_nodes()) {
            if (status s = alloc_graph(g); !s) return s;
        } else if (status s = check_user_buffers(); !s) { // weights freed since alloc_graph
            return s;
        } else if (!shadows_current(g)) { // a node that runs as a shadow changed since
            if (status st = alloc_graph(g); !st) return st;
        }
        trace_.clear();
        if (params_.trace) trace_start_ = std::chrono::steady_clock::now();
        return guarded([&]() -> status { return run_splits(g); });
    }

    /// The trace of the last compute (empty unless scheduler_params::trace).
    [[nodiscard]] std::span<const trace_event> trace() const noexcept { return trace_; }
    /// The trace as Chrome trace JSON (opens in ui.perfetto.dev), one track per backend.
    [[nodiscard]] std::string trace_json() const { return trace_to_chrome_json(trace_, backend_names()); }
    /// The trace as a table per backend.
    [[nodiscard]] std::string trace_table() const { return trace_summary(trace_, backend_names()); }

    /// Waits for every backend.
    [[nodiscard]] status synchronize() {
        const auto use = in_use_.enter();
        if (!use) return busy("synchronize");
        status first;
        for (std::size_t i = 0; i < nb_; ++i)
            if (status s = set_.synchronize(i); !s && first) (void)(first = std::move(s));
        if (allocated_ == nullptr) next_copy_ = 0; // a stable slot while no graph is held
        return first;
    }

    /// Forgets the last graph and every set_backend assignment. Buffers are kept (the
    /// tensors placed in them keep dangling addresses: allocate their graph again).
    void reset() {
        const auto use = in_use_.enter();
        if (!use) throw error(busy("reset"));
        forget_graph();
        user_.clear();
    }

    // -- what the last graph became --------------------------------------------------------

    [[nodiscard]] std::size_t n_splits() const noexcept { return graph_nodes_ ? splits_.size() : 0; }
    /// Pipeline copies (scheduler_params::n_copies).
    [[nodiscard]] int n_copies() const noexcept { return params_.n_copies; }
    /// Tensors copied between backends per run of the last graph.
    [[nodiscard]] std::size_t n_split_inputs() const noexcept { return graph_nodes_ ? split_inputs_.size() : 0; }
    [[nodiscard]] split_info split_at(std::size_t k) const {
        if (k >= n_splits())
            throw error("scheduler::split_at: no split " + std::to_string(k) + " (the last graph has " +
                            std::to_string(n_splits()) + ")",
                        errc::out_of_range);
        const split_rec& s = splits_[k];
        return {static_cast<std::size_t>(s.backend), s.first, s.last,
                std::span<tensor* const>(split_input_ptrs_).subspan(s.in0, s.in1 - s.in0), exec_view(s)};
    }
    /// Bytes of compute buffers held for backend i (backends sharing a buffer type report
    /// it under the first of them).
    [[nodiscard]] std::size_t buffer_size(std::size_t i) const noexcept {
        return i < nb_ ? galloc_.buffer_size(static_cast<int>(i)) : 0;
    }
    /// The buffer type of backend i's compute buffers: its override
    /// (scheduler_params::buffer_types) or its default.
    [[nodiscard]] buffer_type_ref buffer_type(std::size_t i) const { return bt_[i]; }
    [[nodiscard]] std::string_view backend_name(std::size_t i) const { return set_.name(i); }

    /// The plan in words: level 1 the splits with their inputs and bytes, level 2 also
    /// every node with its backend and cause (what BACKPLANE_SCHED_DEBUG prints). This
    /// and to_dot() read the last graph's tensors: call them while that graph lives.
    [[nodiscard]] std::string describe(int level = 1) const;
    /// The last graph in Graphviz DOT: nodes coloured by backend, splits as clusters,
    /// copies as labelled edges.
    [[nodiscard]] std::string to_dot() const;

private:
    struct split_rec {
        std::int32_t backend;
        std::uint32_t first, last; // nodes of the graph
        std::uint32_t in0, in1;    // its inputs in split_inputs_
    };
    // Node node_index reads its source j from a copy (its shadow's src[j]).
    struct rewrite {
        std::uint32_t node_index;
        std::uint32_t j;         // source slot
        std::uint32_t copy_base; // first of its n_copies slots in copies_
    };

    static status busy(const char* call) { return detail::busy_status("scheduler", call); }

    static void check_params(const scheduler_params& p, std::size_t n_backends) {
        if (p.n_copies < 1 || p.n_copies > scheduler_params::max_copies)
            throw error("scheduler: n_copies must be between 1 and " + std::to_string(scheduler_params::max_copies) +
                            " (scheduler_params::max_copies), got " + std::to_string(p.n_copies),
                        errc::invalid_argument);
        if (p.memory_caps.size() > n_backends)
            throw error("scheduler: memory_caps has " + std::to_string(p.memory_caps.size()) +
                            " entries for " + std::to_string(n_backends) + " backends",
                        errc::invalid_argument);
    }

    /// One compute buffer per backend, of its override's type or its default one.
    static graph_allocator make_allocator(const Set& s, const scheduler_params& p) {
        if (s.size() == 0) throw error("scheduler: needs at least one backend", errc::invalid_argument);
        if (p.buffer_types.size() > s.size())
            throw error("scheduler: " + std::to_string(p.buffer_types.size()) + " buffer type overrides for " +
                            std::to_string(s.size()) + " backend(s)",
                        errc::invalid_argument);
        std::vector<buffer_type_ref> types;
        types.reserve(s.size());
        for (std::size_t i = 0; i < s.size(); ++i) {
            const bool given = i < p.buffer_types.size() && p.buffer_types[i].has_value();
            if (given && !s.supports_buffer_type(i, *p.buffer_types[i]))
                throw error("scheduler: backend " + std::to_string(i) + " ('" + std::string(s.name(i)) +
                                "') does not support buffer type '" + std::string(p.buffer_types[i]->name()) +
                                "' given for its compute buffers (scheduler_params::buffer_types)",
                            errc::invalid_argument);
            types.push_back(given ? *p.buffer_types[i] : s.buffer_type(i));
        }
        return graph_allocator(std::move(types));
    }

    template <class F>
    status guarded(F&& f) {
        try {
            return f();
        } catch (const std::bad_alloc&) {
            forget_graph();
            return {errc::alloc_failed, "scheduler: out of host memory"};
        } catch (const error& e) {
            forget_graph();
            return {e.code(), e.what()};
        }
    }

    void forget_graph() noexcept {
        graph_nodes_ = nullptr;
        allocated_ = nullptr;
        shadowed_ = false;
    }

    // -- numbering ---------------------------------------------------------------------------
    //
    // Tensors are numbered nodes [0, n_nodes), leafs next, then anything reached only as a
    // source or view source. The graph recorded its topology when it was built, so this
    // needs no hashing unless a node was rewired since (checked per source) or a tensor
    // outside the graph is read; map_ (tensor -> number) is built only then, or when a
    // query or a user assignment needs it.

    void ensure_map() const {
        if (map_size_ == ts_.size()) return;
        if (map_size_ == 0) map_.clear(ts_.size() + 16);
        for (std::size_t i = map_size_; i < ts_.size(); ++i) map_.insert(ts_[i], static_cast<std::uint32_t>(i));
        map_size_ = ts_.size();
    }

    // What the passes ask of each tensor, read once per graph: tensors are large and
    // scattered, these arrays small and dense.
    struct tensor_info {
        op_kind op;
        std::uint8_t bits;
        std::uint8_t nsrc; // a node's src[nsrc, max_srcs) are null (0 for other tensors)
        std::uint32_t mem; // 0: no memory of its own; else 1 + its buffer type's index in bt_seen_
    };
    static constexpr std::uint8_t info_input = 1;     // flagged input
    static constexpr std::uint8_t info_memory = 2;    // has memory of its own (has_own_memory)
    static constexpr std::uint8_t info_weights = 4;   // lives in a weights buffer
    static constexpr std::uint8_t info_view_op = 8;   // a view op (computes nothing)
    static constexpr std::uint8_t info_computes = 16; // an op with a kernel (not none, not a view)
    // a node reading a tensor that may still have no backend when pass_sources reaches it:
    // a leaf the first pass left unplaced, a tensor outside the graph's lists, or a later
    // node (every earlier node has one by then)
    static constexpr std::uint8_t info_late_src = 32;

    // What info_of learnt of the last buffer it met: tensors in a row mostly share one.
    // Buffers are told apart by serial: a freed buffer's address may belong to a new one.
    struct buffer_memo {
        const buffer_handle* buffer = nullptr;
        std::uint64_t serial = 0;
        std::uint32_t mem = 0;  // 1 + the index of its type in bt_seen_
        bool weights = false;   // a weights buffer
        bool held = false;      // one of the graph allocator's (memory placed again)
        bool alive = false;     // it exists (docs/lifetime.md); nothing else is read of a dead one
    };

    // Reads t once: what has_own_memory, memory_type and buffer_of would tell. Memory an
    // allocator placed t in and has freed since counts as none (t is placed again); a
    // user's tensor whose buffer was freed is remembered in lost_ (number() reports it).
    [[gnu::always_inline]] tensor_info info_of(const tensor& t) {
        std::uint8_t bits = 0;
        if (t.has_flag(tensor_flag::input)) bits |= info_input;
        if (is_view_op(t.op)) bits |= info_view_op;
        if (computes(t.op)) bits |= info_computes;
        const tensor& root = t.view_src != nullptr ? *t.view_src : t;
        const buffer_handle* b = root.buffer;
        if (b != nullptr && (b != memo_.buffer || root.buffer_serial != memo_.serial)) remember_buffer(root);
        if (b != nullptr && !memo_.alive) {
            if (root.placer == placed_by::user && lost_ == nullptr) lost_ = &t;
            return {t.op, bits, 0, 0};
        }
        if (b != nullptr && memo_.weights) bits |= info_weights;
        std::uint32_t mem = 0;
        if (t.data != nullptr || root.data != nullptr) { // has memory; its own unless the allocator's
            if (b == nullptr)
                mem = 1 + type_index(buffer_type_ref(cpu_buffer_type::instance()));
            else if (root.data == nullptr || !memo_.held)
                mem = memo_.mem;
        }
        if (mem != 0) bits |= info_memory;
        return {t.op, bits, 0, mem};
    }
    // The memo for root's buffer; a user buffer that exists joins user_serials_, which
    // compute checks again when it reuses the allocation.
    void remember_buffer(const tensor& root) {
        memo_ = {root.buffer, root.buffer_serial};
        memo_.held = galloc_.owns_serial(root.buffer, root.buffer_serial);
        memo_.alive = memo_.held || buffer_alive(root);
        if (!memo_.alive) return;
        memo_.mem = 1 + type_index(root.buffer->type());
        memo_.weights = root.buffer->usage() == buffer_usage::weights;
        if (memo_.held) return;
        // few distinct buffers per graph: a linear look, bounded for odd graphs
        if (user_serials_.size() < 64 &&
            std::find(user_serials_.begin(), user_serials_.end(), root.buffer_serial) != user_serials_.end())
            return;
        user_serials_.push_back(root.buffer_serial);
        user_serial_tensors_.push_back(&root);
    }
    // ok while every user buffer the last numbered graph reads exists: one lock.
    status check_user_buffers() const {
        const std::size_t dead = detail::live_buffer_set()->first_dead(user_serials_);
        if (dead == user_serials_.size()) return {};
        return detail::freed_buffer_error("scheduler", *user_serial_tensors_[dead]);
    }
    status out_of_order(std::size_t i, std::size_t k) const {
        const auto name = [](const tensor& t) {
            return (t.name.empty() ? std::string("(unnamed)") : "'" + t.name + "'") + " (" +
                   std::string(to_string(t.op)) + ")";
        };
        return {errc::invalid_argument,
                "scheduler: node " + std::to_string(i) + " " + name(*ts_[i]) + " reads node " + std::to_string(k) + " " +
                    name(*ts_[k]) + ", which the graph computes " + (k == i ? "as itself" : "after it") +
                    ": a source was edited after the graph was built (a cycle, or an order build_forward did "
                    "not make); build the graph again"};
    }
    bool has(std::size_t i, std::uint8_t bit) const noexcept { return (info_[i].bits & bit) != 0; }
    std::span<const std::int32_t> srcs_of(std::size_t i) const noexcept { return {srcs_[i].data(), info_[i].nsrc}; }

    std::int32_t slow_index(const tensor* t) {
        ensure_map();
        const auto next = static_cast<std::uint32_t>(ts_.size());
        const std::uint32_t id = map_.insert(t, next);
        if (id == next) {
            ts_.push_back(const_cast<tensor*>(t));
            bid_.push_back(-1);
            ++unassigned_;
            cause_.push_back(placement_cause::none);
            vsrc_.push_back(-1);
            info_.push_back(info_of(*t));
            map_size_ = ts_.size();
        }
        return static_cast<std::int32_t>(id);
    }

    // Numbers g's tensors and reads what the passes need of them. With `place` (no user
    // assignments to apply first) it also runs the first pass, tensor by tensor, while
    // each is in cache: leafs first, then nodes, as pass_from_tensors does.
    status number(const graph& g, bool place) {
        const auto nodes = g.nodes();
        const auto leafs = g.leafs();
        n_nodes_ = nodes.size();
        n_leafs_ = leafs.size();
        const std::size_t n = n_nodes_ + n_leafs_;
        map_size_ = 0;
        bt_seen_.clear();
        bt_reads_.clear();
        memo_ = {};
        lost_ = nullptr;
        user_serials_.clear();
        user_serial_tensors_.clear();
        ts_.resize(n);
        std::copy(nodes.begin(), nodes.end(), ts_.begin());
        std::copy(leafs.begin(), leafs.end(), ts_.begin() + static_cast<std::ptrdiff_t>(n_nodes_));
        bid_.assign(n, -1);
        cause_.assign(n, placement_cause::none);
        vsrc_.resize(n); // every entry is written below
        info_.resize(n);
        unassigned_ = n;
        srcs_.resize(n_nodes_);
        const auto ids = g.src_ids();
        const auto vids = g.view_src_ids();
        const bool recorded = ids.size() == n_nodes_ && vids.size() == n_nodes_;
        const auto index = [&](std::int32_t id) -> std::int32_t {
            if (id >= 0) return id;
            if (id == graph::no_id) return -1;
            return static_cast<std::int32_t>(n_nodes_) + (-2 - id);
        };
        sup_.assign(n_nodes_ * nb_, -1);
        for (std::size_t i = n_nodes_; i < n; ++i) {
            info_[i] = info_of(*ts_[i]);
            if (place && !place_from_tensor(i)) return no_backend_for_memory(*ts_[i]);
        }
        for (std::size_t i = 0; i < n_nodes_; ++i) info_[i] = info_of(*ts_[i]);
        for (std::size_t i = 0; i < n_nodes_; ++i) {
            const tensor& node = *nodes[i];
            // with one backend every node that computes is asked anyway: ask now, while
            // the node is in cache
            if (nb_ == 1 && has(i, info_computes)) sup_[i] = set_.supports_op(0, node) ? 1 : 0;
            std::size_t nsrc = 0;
            for (std::size_t j = 0; j < max_srcs; ++j) {
                const tensor* src = node.src[j];
                std::int32_t k = -1;
                if (src != nullptr) {
                    k = recorded ? index(ids[i][j]) : -1;
                    if (k < 0 || ts_[static_cast<std::size_t>(k)] != src) k = slow_index(src);
                    const auto ku = static_cast<std::size_t>(k);
                    if (ku >= i && ku < n_nodes_) return out_of_order(i, ku);
                    if (ku >= i && (!place || bid_[ku] < 0)) info_[i].bits |= info_late_src;
                    nsrc = j + 1;
                }
                srcs_[i][j] = k;
            }
            info_[i].nsrc = static_cast<std::uint8_t>(nsrc);
            std::int32_t vk = -1;
            if (const tensor* v = node.view_src) {
                vk = recorded ? index(vids[i]) : -1;
                if (vk < 0 || ts_[static_cast<std::size_t>(vk)] != v) vk = slow_index(v);
            }
            vsrc_[i] = vk;
            if (place && !place_from_tensor(i)) return no_backend_for_memory(*ts_[i]);
        }
        for (std::size_t i = n_nodes_; i < ts_.size(); ++i) { // leafs and extras (grows)
            const tensor* v = ts_[i]->view_src;
            const std::int32_t k = v != nullptr ? slow_index(v) : -1;
            vsrc_[i] = k;
        }
        if (lost_ != nullptr) return detail::freed_buffer_error("scheduler", *lost_);
        return {};
    }

    // -- the passes ----------------------------------------------------------------------------

    [[gnu::always_inline]] bool supports(std::size_t node, std::size_t b) {
        std::int16_t& c = sup_[node * nb_ + b];
        if (c < 0) c = set_.supports_op(b, *ts_[node]) ? 1 : 0;
        return c != 0;
    }

    static buffer_handle* buffer_of(const tensor& t) noexcept {
        return t.view_src != nullptr ? t.view_src->buffer : t.buffer;
    }
    // Memory of t's own that placement must respect: not none, not this scheduler's
    // compute buffers (a tensor placed by an earlier alloc_graph is placed again), and not
    // a buffer since freed.
    bool has_own_memory(const tensor& t) const noexcept {
        const tensor& root = t.view_src != nullptr ? *t.view_src : t;
        return detail::has_memory(t) && !galloc_.holds(root) && buffer_alive(root);
    }
    // The buffer type of t's own memory: its buffer's, or host memory for context host
    // data; false without memory of its own.
    bool memory_type(const tensor& t, buffer_type_ref& out) const {
        if (!has_own_memory(t)) return false;
        if (buffer_handle* b = buffer_of(t)) {
            out = b->type();
            return true;
        }
        out = buffer_type_ref(cpu_buffer_type::instance());
        return true;
    }

    // The highest-priority backend that can use tensor index t's memory and compute `op`
    // (a node index or -1 for a tensor that computes nothing); -1 when t has no memory,
    // -2 when no backend can.
    [[gnu::always_inline]] std::int32_t backend_from_memory(std::size_t t, std::int32_t op_node) {
        const std::uint32_t m = info_[t].mem;
        if (m == 0) return -1;
        for (std::size_t b = 0; b < nb_; ++b)
            if (reads_at(b, m - 1) && (op_node < 0 || supports(static_cast<std::size_t>(op_node), b)))
                return static_cast<std::int32_t>(b);
        return -2;
    }

    // Whether backend b can read tensor index s in place (ggml's buffer_supported).
    bool readable(std::int32_t s, std::size_t b) {
        const auto su = static_cast<std::size_t>(s);
        if (const std::uint32_t m = info_[su].mem; m != 0) return reads_at(b, m - 1);
        std::int32_t owner = bid_[su];
        if (owner < 0 && vsrc_[su] >= 0) owner = bid_[static_cast<std::size_t>(vsrc_[su])];
        if (owner < 0) return false;
        return reads_at(b, type_index(bt_[static_cast<std::size_t>(owner)]));
    }

    // The index of bt in bt_seen_, added on first sight.
    std::uint32_t type_index(const buffer_type_ref& bt) {
        std::size_t k = 0;
        while (k < bt_seen_.size() && !(bt_seen_[k] == bt)) ++k;
        if (k == bt_seen_.size()) {
            bt_seen_.push_back(bt);
            bt_reads_.resize(bt_reads_.size() + nb_, -1);
        }
        return static_cast<std::uint32_t>(k);
    }

    // supports_buffer_type(b, bt_seen_[k]), asked once per graph for each buffer type met
    [[gnu::always_inline]] bool reads_at(std::size_t b, std::size_t k) {
        std::int8_t& c = bt_reads_[k * nb_ + b];
        if (c < 0) c = set_.supports_buffer_type(b, bt_seen_[k]) ? 1 : 0;
        return c != 0;
    }

    static bool computes(op_kind op) noexcept { return op != op_kind::none && !is_view_op(op); }

    status pass_from_tensors() {
        const std::size_t n = n_nodes_ + n_leafs_;
        // leafs first, then nodes, as ggml
        for (std::size_t k = 0; k < n; ++k)
            if (const std::size_t i = k < n_leafs_ ? n_nodes_ + k : k - n_leafs_; !place_from_tensor(i))
                return no_backend_for_memory(*ts_[i]);
        return {};
    }

    // The first pass for tensor index i (a node or a leaf): its memory, its input flag or
    // its weights decide, when they do. False when i has memory no backend can use for
    // its op (no_backend_for_memory says why).
    [[gnu::always_inline]] bool place_from_tensor(std::size_t i) {
        if (bid_[i] >= 0) return true; // the user's
        const bool is_node = i < n_nodes_;
        const std::int32_t op_node = is_node && has(i, info_computes) ? static_cast<std::int32_t>(i) : -1;
        if (has(i, info_memory)) {
            const std::int32_t from = backend_from_memory(i, op_node);
            if (from >= 0) {
                set(i, from, placement_cause::buffer);
                return true;
            }
            if (from == -2) return false;
        }
        if (has(i, info_input)) {
            set(i, static_cast<std::int32_t>(nb_ - 1), placement_cause::input);
            return true;
        }
        if (!is_node || info_[i].op == op_kind::rope) return true;
        for (const std::int32_t s : srcs_of(i)) {
            if (s < 0 || !has(static_cast<std::size_t>(s), info_weights)) continue;
            const std::int32_t w = backend_from_memory(static_cast<std::size_t>(s), op_node);
            if (params_.op_offload && nb_ > 1 && w == static_cast<std::int32_t>(nb_ - 1) &&
                buffer_of(*ts_[static_cast<std::size_t>(s)])->is_host()) {
                for (std::size_t b = 0; b + 1 < nb_; ++b)
                    if (supports(i, b) && set_.offload_op(b, *ts_[i])) {
                        set(i, static_cast<std::int32_t>(b), placement_cause::offload);
                        return true;
                    }
            }
            if (w >= 0) set(i, w, placement_cause::weights);
            break;
        }
        return true;
    }

    status no_backend_for_memory(const tensor& t) const {
        const buffer_handle* buf = buffer_of(t);
        const std::string where = buf ? "a buffer of type '" + std::string(buf->type().name()) + "'" : "host memory";
        std::string msg = "scheduler: tensor '" + t.name + "' (" + std::string(to_string(t.op)) + ") lives in " + where;
        bool any_reads = false;
        buffer_type_ref bt(cpu_buffer_type::instance());
        (void)memory_type(t, bt);
        for (std::size_t b = 0; b < nb_; ++b) any_reads = any_reads || set_.supports_buffer_type(b, bt);
        msg += any_reads ? ", and no backend that can use that memory supports its op"
                         : ", which none of the scheduler's backends can use";
        return {errc::not_supported, msg};
    }

    [[gnu::always_inline]] void set(std::size_t i, std::int32_t b, placement_cause c) noexcept {
        if (bid_[i] < 0) --unassigned_;
        bid_[i] = b;
        cause_[i] = c;
    }

    void expand_sweep(bool down, bool include_last) {
        std::int32_t cur = -1;
        const auto last = static_cast<std::int32_t>(nb_ - 1);
        for (std::size_t k = 0; k < n_nodes_; ++k) {
            const std::size_t i = down ? k : n_nodes_ - 1 - k;
            if (has(i, info_view_op)) continue;
            const std::int32_t b = bid_[i];
            if (b >= 0) {
                cur = (!include_last && b == last) ? -1 : b;
            } else if (cur >= 0 && supports(i, static_cast<std::size_t>(cur))) {
                set(i, cur, placement_cause::expand);
            }
        }
    }

    // expand_sweep(down and up, with the last backend) then pass_upgrade_and_best, for one
    // backend: once any node that computes is placed, the sweeps reach every other node
    // it supports (expand); when none is, the best pass takes them (best); there is
    // nothing to upgrade to.
    void expand_single() {
        bool any = false;
        for (std::size_t i = 0; i < n_nodes_ && !any; ++i) any = !has(i, info_view_op) && bid_[i] >= 0;
        const placement_cause c = any ? placement_cause::expand : placement_cause::best;
        for (std::size_t i = 0; i < n_nodes_; ++i)
            if (bid_[i] < 0 && !has(i, info_view_op) && supports(i, 0)) set(i, 0, c);
    }

    void pass_upgrade_and_best() {
        for (std::size_t i = 0; i < n_nodes_; ++i) {
            if (has(i, info_view_op)) continue;
            const std::int32_t cur = bid_[i];
            if (cur < 0) {
                int best_count = -1;
                for (std::size_t b = 0; b < nb_; ++b) {
                    if (!supports(i, b)) continue;
                    int count = 0;
                    for (std::int32_t s : srcs_of(i)) {
                        if (s < 0) continue;
                        const auto su = static_cast<std::size_t>(s);
                        const bool placed = bid_[su] >= 0 || (vsrc_[su] >= 0 && bid_[static_cast<std::size_t>(vsrc_[su])] >= 0);
                        if (placed && readable(s, b)) ++count;
                    }
                    if (count > best_count) {
                        best_count = count;
                        set(i, static_cast<std::int32_t>(b), placement_cause::best);
                    }
                }
            } else if (cause_[i] != placement_cause::user) {
                for (std::size_t b = 0; b < static_cast<std::size_t>(cur); ++b) {
                    if (!(bt_[b] == bt_[static_cast<std::size_t>(cur)]) || !supports(i, b)) continue;
                    bool all = true;
                    for (std::int32_t s : srcs_of(i))
                        if (s >= 0 && !readable(s, b)) {
                            all = false;
                            break;
                        }
                    if (all) {
                        set(i, static_cast<std::int32_t>(b), placement_cause::upgrade);
                        break;
                    }
                }
            }
        }
    }

    status pass_sources() {
        for (std::size_t i = 0; i < n_nodes_; ++i) {
            if (bid_[i] >= 0 && !has(i, info_late_src)) continue; // it and its sources are placed
            if (bid_[i] < 0 && vsrc_[i] >= 0 && bid_[static_cast<std::size_t>(vsrc_[i])] >= 0)
                set(i, bid_[static_cast<std::size_t>(vsrc_[i])], placement_cause::source);
            for (std::int32_t s : srcs_of(i)) {
                if (s < 0) continue;
                const auto su = static_cast<std::size_t>(s);
                if (bid_[su] >= 0) continue;
                const std::int32_t v = vsrc_[su];
                if (v >= 0 && bid_[static_cast<std::size_t>(v)] >= 0)
                    set(su, bid_[static_cast<std::size_t>(v)], placement_cause::source);
                else if (bid_[i] >= 0)
                    set(su, bid_[i], placement_cause::source);
            }
            for (std::size_t b = 0; b < nb_ && bid_[i] < 0; ++b)
                if (!has(i, info_computes) || supports(i, b)) set(i, static_cast<std::int32_t>(b), placement_cause::fallback);
            if (bid_[i] < 0) {
                const tensor& t = *ts_[i];
                return {errc::not_supported, "scheduler: no backend supports node '" + t.name + "' (" +
                                                 std::string(to_string(t.op)) + ", " + std::string(to_string(t.type)) +
                                                 ")"};
            }
        }
        if (unassigned_ == 0) return {};
        // what is still unplaced (views of views whose root was placed after them, sources
        // of such views): their consumer's backend, backwards
        for (std::size_t k = n_nodes_; k-- > 0;)
            for (std::int32_t s : srcs_of(k))
                if (s >= 0 && bid_[static_cast<std::size_t>(s)] < 0) set(static_cast<std::size_t>(s), bid_[k], placement_cause::source);
        for (std::size_t i = 0; i < ts_.size(); ++i)
            if (bid_[i] < 0) {
                const std::int32_t v = vsrc_[i];
                set(i, v >= 0 && bid_[static_cast<std::size_t>(v)] >= 0 ? bid_[static_cast<std::size_t>(v)]
                                                                        : static_cast<std::int32_t>(nb_ - 1),
                    placement_cause::source);
            }
        return {};
    }

    // -- splits and copies ---------------------------------------------------------------------

    tensor& new_pool_tensor() {
        if (pool_used_ == pool_.size()) pool_.emplace_back();
        tensor& t = pool_[pool_used_++];
        t = tensor{};
        return t;
    }

    // The n_copies slots of tensor index s on backend b, made on first use.
    std::uint32_t copies_of(std::int32_t s, std::size_t b, bool& made) {
        std::int32_t& slot = copy_of_[static_cast<std::size_t>(s) * nb_ + b];
        made = slot < 0;
        if (!made) return static_cast<std::uint32_t>(slot);
        const tensor& src = *ts_[static_cast<std::size_t>(s)];
        slot = static_cast<std::int32_t>(copies_.size());
        for (int c = 0; c < params_.n_copies; ++c) {
            tensor& t = new_pool_tensor();
            t.type = src.type;
            t.ne = src.ne;
            t.nb = src.nb;
            t.name.reserve(src.name.size() + 16);
            t.name.append(set_.name(b)).append("#").append(src.name).append("#").append(std::to_string(c));
            if (params_.n_copies > 1) {
                t.set_input();
                t.set_output();
            }
            copies_.push_back(&t);
        }
        return static_cast<std::uint32_t>(slot);
    }

    void pass_splits() {
        splits_.clear();
        split_inputs_.clear();
        split_input_ptrs_.clear();
        copies_.clear();
        rewrites_.clear();
        graph_inputs_.clear();
        pool_used_ = 0;
        cross_inplace_ = false;
        if (nb_ == 1 && params_.n_copies == 1) { // one split, nothing to copy, no slots
            splits_.push_back(split_rec{0, 0, static_cast<std::uint32_t>(n_nodes_), 0, 0});
            return;
        }
        copy_of_.assign(ts_.size() * nb_, -1);

        const std::vector<std::size_t>& batch_of = copy_batch_;
        std::size_t weights_copied = 0; // bytes of weights the current split copies
        std::size_t i = 0;
        while (i < n_nodes_ && has(i, info_view_op)) ++i;
        std::int32_t cur = i < n_nodes_ ? bid_[i] : bid_.empty() ? static_cast<std::int32_t>(nb_ - 1) : bid_[0];
        splits_.push_back(split_rec{cur, 0, 0, 0, 0});
        for (; i < n_nodes_; ++i) {
            if (has(i, info_view_op)) continue;
            const std::int32_t b = bid_[i];
            bool new_split = b != cur;
            split_rec* sp = &splits_.back();
            if (!new_split && sp->in1 > sp->in0) {
                for (std::int32_t s : srcs_of(i)) {
                    if (s < 0) continue;
                    const auto su = static_cast<std::size_t>(s);
                    if (has(su, info_weights) && bid_[su] != cur && !readable(s, static_cast<std::size_t>(cur)) &&
                        (batch_of[static_cast<std::size_t>(cur)] == 0 ||
                         (copy_of_[su * nb_ + static_cast<std::size_t>(cur)] < 0 &&
                          weights_copied + ts_[su]->nbytes() > batch_of[static_cast<std::size_t>(cur)]))) {
                        new_split = true;
                        break;
                    }
                }
            }
            if (new_split) {
                sp->last = static_cast<std::uint32_t>(i);
                const auto in = static_cast<std::uint32_t>(split_inputs_.size());
                splits_.push_back(split_rec{b, static_cast<std::uint32_t>(i), 0, in, in});
                sp = &splits_.back();
                cur = b;
                weights_copied = 0;
            }
            const auto cb = static_cast<std::size_t>(cur);
            for (std::size_t j = 0; j < info_[i].nsrc; ++j) {
                const std::int32_t s = srcs_[i][j];
                if (s < 0) continue;
                const auto su = static_cast<std::size_t>(s);
                if (params_.n_copies > 1 && has(su, info_input)) {
                    bool made = false;
                    (void)copies_of(s, static_cast<std::size_t>(bid_[su]), made);
                    if (made) graph_inputs_.push_back(s);
                }
                if (bid_[su] == cur) continue;
                if (readable(s, cb)) {
                    if (!has(su, info_weights)) cross_inplace_ = true;
                    continue;
                }
                bool made = false;
                const std::uint32_t base = copies_of(s, cb, made);
                if (made) {
                    split_inputs_.push_back(s);
                    split_input_ptrs_.push_back(ts_[su]);
                    sp->in1 = static_cast<std::uint32_t>(split_inputs_.size());
                    if (has(su, info_weights)) weights_copied += ts_[su]->nbytes();
                }
                rewrites_.push_back(rewrite{static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(j), base});
            }
        }
        splits_.back().last = static_cast<std::uint32_t>(n_nodes_);
    }

    // The allocator's view of the graph. Nodes: per split, each input's copy, then the
    // split's nodes. Without pipeline copies the copy is itself a node reading the input
    // (so the input lives until it is copied). With n_copies > 1, every slot of every
    // rotated graph input and of every copy comes first, in slot order: input-flagged
    // tensors are placed first, in node order, and never freed, so each slot keeps its
    // own memory from one run to the next; the rotated input itself stands at the
    // position of the current slot; and a view node keeps each split input alive until it
    // is copied.
    void build_alloc_lists(const graph& g) {
        const std::size_t n = n_nodes_ + n_leafs_;
        if (split_inputs_.empty() && params_.n_copies == 1) {
            // nothing copied: the graph's own lists, numbered as the passes numbered them
            alloc_nodes_view_ = g.nodes();
            alloc_leafs_view_ = g.leafs();
            alloc_node_ids_view_ = std::span<const int>(bid_).first(n_nodes_);
            alloc_leaf_ids_view_ = std::span<const int>(bid_).subspan(n_nodes_, n_leafs_);
            topology_ = alloc_topology{srcs_, std::span<const std::int32_t>(vsrc_).first(n), true};
            return;
        }
        alloc_nodes_.clear();
        alloc_node_ids_.clear();
        alloc_leafs_.clear();
        alloc_leaf_ids_.clear();
        pos_of_.assign(ts_.size(), -1);
        copy_pos_.assign(copies_.size(), -1);
        topo_srcs_.clear();
        const std::array<std::int32_t, max_srcs> none{-1, -1, -1, -1};
        const auto push_node = [&](tensor* t, std::int32_t id, const std::array<std::int32_t, max_srcs>& srcs) {
            alloc_nodes_.push_back(t);
            alloc_node_ids_.push_back(id);
            topo_srcs_.push_back(srcs); // ts_ indices for now; positions below
        };
        const bool pipeline = params_.n_copies > 1;
        const auto nodes = g.nodes();
        if (pipeline) {
            for (std::int32_t s : graph_inputs_) {
                const auto su = static_cast<std::size_t>(s);
                if (!rotated(su)) continue;
                const std::uint32_t base = copy_base(s, bid_[su]);
                for (int c = 0; c < params_.n_copies; ++c) {
                    tensor* slot = c == cur_copy_ ? ts_[su] : copies_[base + static_cast<std::uint32_t>(c)];
                    slot->flags = ts_[su]->flags; // the same key in every rotation
                    if (c == cur_copy_)
                        pos_of_[su] = static_cast<std::int32_t>(alloc_nodes_.size());
                    else
                        copy_pos_[base + static_cast<std::uint32_t>(c)] = static_cast<std::int32_t>(alloc_nodes_.size());
                    push_node(slot, bid_[su], none);
                }
            }
            for (const split_rec& sp : splits_)
                for (std::uint32_t k = sp.in0; k < sp.in1; ++k) {
                    const std::uint32_t base = copy_base(split_inputs_[k], sp.backend);
                    for (int c = 0; c < params_.n_copies; ++c) {
                        copy_pos_[base + static_cast<std::uint32_t>(c)] = static_cast<std::int32_t>(alloc_nodes_.size());
                        push_node(copies_[base + static_cast<std::uint32_t>(c)], sp.backend, none);
                    }
                }
        }
        dep_view_.clear();
        for (const split_rec& sp : splits_) {
            for (std::uint32_t k = sp.in0; k < sp.in1; ++k) {
                const std::int32_t s = split_inputs_[k];
                tensor* in = ts_[static_cast<std::size_t>(s)];
                if (pipeline) {
                    tensor& dep = new_pool_tensor(); // reads the input here; computes nothing
                    dep.type = in->type;
                    dep.ne = in->ne;
                    dep.nb = in->nb;
                    dep.op = op_kind::view;
                    dep.src[0] = in;
                    dep.view_src = in->view_src != nullptr ? in->view_src : in;
                    dep.view_offs = in->view_src != nullptr ? in->view_offs : 0;
                    dep.name = in->name + " (kept for its copy)";
                    const std::int32_t root = vsrc_[static_cast<std::size_t>(s)] >= 0 ? vsrc_[static_cast<std::size_t>(s)] : s;
                    dep_view_.emplace_back(static_cast<std::int32_t>(alloc_nodes_.size()), root);
                    push_node(&dep, bid_[static_cast<std::size_t>(s)], {s, -1, -1, -1});
                } else {
                    const std::uint32_t base = copy_base(s, sp.backend);
                    tensor* cp = copies_[base];
                    cp->src[0] = in;
                    copy_pos_[base] = static_cast<std::int32_t>(alloc_nodes_.size());
                    push_node(cp, sp.backend, {s, -1, -1, -1});
                }
            }
            for (std::uint32_t i = sp.first; i < sp.last; ++i) {
                pos_of_[i] = static_cast<std::int32_t>(alloc_nodes_.size());
                push_node(nodes[i], bid_[i], srcs_[i]);
            }
        }
        for (std::size_t k = 0; k < n_leafs_; ++k) {
            const std::size_t i = n_nodes_ + k;
            if (pipeline && rotated(i)) continue; // placed with its slots above
            pos_of_[i] = static_cast<std::int32_t>(alloc_nodes_.size() + alloc_leafs_.size());
            alloc_leafs_.push_back(ts_[i]);
            alloc_leaf_ids_.push_back(bid_[i]);
        }
        // the topology for the allocator: sources and view sources as list positions
        for (auto& srcs : topo_srcs_)
            for (std::int32_t& k : srcs) k = k >= 0 ? pos_of_[static_cast<std::size_t>(k)] : -1;
        for (const rewrite& r : rewrites_) {
            const std::int32_t p = pos_of_[r.node_index];
            if (p >= 0) topo_srcs_[static_cast<std::size_t>(p)][r.j] = copy_pos_[r.copy_base + static_cast<std::uint32_t>(cur_copy_)];
        }
        topo_vsrcs_.assign(alloc_nodes_.size() + alloc_leafs_.size(), -1);
        for (std::size_t i = 0; i < ts_.size(); ++i)
            if (pos_of_[i] >= 0 && vsrc_[i] >= 0) topo_vsrcs_[static_cast<std::size_t>(pos_of_[i])] = pos_of_[static_cast<std::size_t>(vsrc_[i])];
        for (const auto& [p, root] : dep_view_) topo_vsrcs_[static_cast<std::size_t>(p)] = pos_of_[static_cast<std::size_t>(root)];
        topology_ = alloc_topology{topo_srcs_, topo_vsrcs_, true};
        alloc_nodes_view_ = alloc_nodes_;
        alloc_leafs_view_ = alloc_leafs_;
        alloc_node_ids_view_ = alloc_node_ids_;
        alloc_leaf_ids_view_ = alloc_leaf_ids_;
    }

    // A graph input that gets pipeline slots: an input-flagged leaf without memory of its
    // own (one the user placed keeps its place).
    bool rotated(std::size_t i) const noexcept {
        return i >= n_nodes_ && i < n_nodes_ + n_leafs_ && has(i, info_input) && !has(i, info_memory) &&
               copy_of_[i * nb_ + static_cast<std::size_t>(bid_[i])] >= 0;
    }

    std::uint32_t copy_base(std::int32_t s, std::int32_t b) const noexcept {
        return static_cast<std::uint32_t>(copy_of_[static_cast<std::size_t>(s) * nb_ + static_cast<std::size_t>(b)]);
    }

    status split(const graph& g) {
        forget_graph();
        if (status s = number(g, user_.empty()); !s) return s;
        if (!user_.empty()) {
            ensure_map();
            for (const auto& [t, b] : user_)
                if (const std::uint32_t id = map_.find(t); id != detail::tensor_map::npos) set(id, b, placement_cause::user);
            if (status s = pass_from_tensors(); !s) return s;
        }
        if (nb_ > 1) {
            expand_sweep(true, false);
            expand_sweep(false, false);
            expand_sweep(true, true);
            expand_sweep(false, true);
            pass_upgrade_and_best();
        } else {
            expand_single();
        }
        if (status s = pass_sources(); !s) return s;
        if constexpr (Policy::uses_costs) {
            has_estimate_ = false;
            if (nb_ > 1) apply_policy();
        }
        pass_splits();
        graph_nodes_ = g.nodes().data();
        return {};
    }

    // -- the cost policy ---------------------------------------------------------------------

    // The placement problem of the numbered graph (placement.hpp), costs from the policy.
    void build_problem(detail::placement_problem& p) {
        for (std::size_t b = 0; b < nb_; ++b) (void)type_index(bt_[b]); // every backend's type numbered
        const std::size_t nt = ts_.size();
        p.nb = nb_;
        p.n_nodes = n_nodes_;
        p.computes.resize(n_nodes_);
        p.fixed.resize(n_nodes_);
        p.node_cost.resize(n_nodes_ * nb_);
        p.srcs.resize(n_nodes_);
        for (std::size_t i = 0; i < n_nodes_; ++i) {
            const bool c = has(i, info_computes);
            p.computes[i] = c ? 1 : 0;
            const placement_cause why = cause_[i];
            p.fixed[i] = !c || why == placement_cause::user || why == placement_cause::buffer ||
                                 why == placement_cause::input
                             ? bid_[i]
                             : -1;
            for (std::size_t b = 0; b < nb_; ++b)
                p.node_cost[i * nb_ + b] = !c                ? 0.0
                                           : supports(i, b) ? policy_.node_seconds(b, *ts_[i])
                                                            : detail::placement_problem::unsupported;
            p.srcs[i] = srcs_[i];
            for (std::size_t j = info_[i].nsrc; j < max_srcs; ++j) p.srcs[i][j] = -1;
        }
        p.root.resize(nt);
        p.mem.resize(nt);
        p.home.resize(nt);
        p.bytes.resize(nt);
        for (std::size_t s = 0; s < nt; ++s) {
            p.root[s] = s < vsrc_.size() && vsrc_[s] >= 0 ? vsrc_[s] : static_cast<std::int32_t>(s);
            p.mem[s] = info_[s].mem != 0 ? static_cast<std::int32_t>(info_[s].mem - 1) : -1;
            p.home[s] = s >= n_nodes_ ? bid_[s] : -1;
            p.bytes[s] = static_cast<double>(ts_[s]->nbytes());
        }
        const std::size_t nk = bt_seen_.size();
        p.n_types = nk;
        p.reads.resize(nk * nb_);
        p.link_latency.resize(nk * nb_);
        p.link_bandwidth.resize(nk * nb_);
        for (std::size_t k = 0; k < nk; ++k)
            for (std::size_t b = 0; b < nb_; ++b) {
                const bool r = reads_at(b, k);
                p.reads[k * nb_ + b] = r ? 1 : 0;
                if (r) {
                    p.link_latency[k * nb_ + b] = 0;
                    p.link_bandwidth[k * nb_ + b] = 1;
                    continue;
                }
                const auto l = policy_.link(bt_seen_[k].name(), bt_seen_[k].is_host(), b);
                p.link_latency[k * nb_ + b] = l.latency;
                p.link_bandwidth[k * nb_ + b] = l.bandwidth;
            }
        p.backend_type.resize(nb_);
        p.split_cost.resize(nb_);
        p.names.resize(nb_);
        for (std::size_t b = 0; b < nb_; ++b) {
            p.backend_type[b] = static_cast<std::int32_t>(type_index(bt_[b]));
            p.split_cost[b] = policy_.split_seconds(b);
            p.names[b] = std::string(set_.name(b));
        }
    }

    static bool same_problem(const detail::placement_problem& a, const detail::placement_problem& b) noexcept {
        return a.nb == b.nb && a.n_nodes == b.n_nodes && a.computes == b.computes && a.fixed == b.fixed &&
               a.node_cost == b.node_cost && a.srcs == b.srcs && a.root == b.root && a.mem == b.mem &&
               a.home == b.home && a.bytes == b.bytes && a.reads == b.reads && a.link_latency == b.link_latency &&
               a.link_bandwidth == b.link_bandwidth && a.backend_type == b.backend_type;
    }

    // Replaces the greedy assignment of the free nodes by the policy's (the same graph
    // as last time reuses the last search).
    void apply_policy() {
        build_problem(next_problem_);
        greedy_.assign(bid_.begin(), bid_.begin() + static_cast<std::ptrdiff_t>(n_nodes_));
        if (!has_result_ || greedy_ != last_greedy_ || !same_problem(next_problem_, problem_)) {
            std::swap(problem_, next_problem_);
            result_ = policy_.optimize(problem_, greedy_);
            last_greedy_ = greedy_;
            has_result_ = true;
        }
        for (std::size_t i = 0; i < n_nodes_; ++i) {
            if (!problem_.computes[i] || problem_.fixed[i] >= 0) continue;
            set(i, result_.assign[i], placement_cause::cost);
        }
        derive_views();
        has_estimate_ = true;
    }

    // Views whose memory is a node's (no memory of their own) follow that node.
    void derive_views() {
        for (std::size_t i = 0; i < n_nodes_; ++i) {
            if (has(i, info_computes) || has(i, info_memory)) continue;
            const std::int32_t r = vsrc_[i];
            if (r < 0 || static_cast<std::size_t>(r) >= n_nodes_ || cause_[i] == placement_cause::user) continue;
            bid_[i] = bid_[static_cast<std::size_t>(r)];
        }
    }

    // -- memory caps ---------------------------------------------------------------------------

    // The bytes each backend's compute buffers need for the current plan (see
    // graph_allocator::measure).
    result<std::vector<std::size_t>> measure(const graph& g) {
        build_alloc_lists(g);
        return galloc_.measure(alloc_nodes_view_, alloc_leafs_view_, alloc_node_ids_view_, alloc_leaf_ids_view_,
                               &topology_);
    }

    std::size_t cap_of(std::size_t b) const noexcept {
        return b < params_.memory_caps.size() ? params_.memory_caps[b] : 0;
    }

    // Moves work off backends whose compute buffers would exceed their caps: the latter
    // half of the largest run of free nodes on such a backend goes to the cheapest other
    // backend that supports each node (the last backend under the greedy policy) and was
    // never over its cap, until every backend fits. `fitted`, when given, receives the
    // measure of the plan that fits (left empty without caps).
    status fit_caps(const graph& g, std::vector<std::size_t>* fitted = nullptr) {
        bool any = false;
        for (std::size_t b = 0; b < nb_; ++b) any = any || cap_of(b) != 0;
        if (!any) return {};
        std::vector<std::uint8_t> full(nb_, 0);
        for (std::size_t round = 0; round <= n_nodes_; ++round) {
            auto need = measure(g);
            if (!need) return need.error();
            std::size_t over = nb_;
            for (std::size_t b = 0; b < nb_ && over == nb_; ++b)
                if (cap_of(b) != 0 && (*need)[b] > cap_of(b)) over = b;
            if (over == nb_) {
                if (fitted != nullptr) *fitted = std::move(*need);
                return {};
            }
            full[over] = 1;
            // the largest run of movable nodes on `over`
            std::size_t best_first = 0, best_len = 0, best_bytes = 0;
            for (std::size_t i = 0; i < n_nodes_;) {
                if (!movable(i, over)) {
                    ++i;
                    continue;
                }
                std::size_t j = i, bytes = 0, len = 0;
                for (; j < n_nodes_ && (movable(j, over) || !has(j, info_computes)); ++j)
                    if (has(j, info_computes)) {
                        bytes += ts_[j]->nbytes();
                        ++len;
                    }
                if (bytes > best_bytes || best_len == 0) {
                    best_first = i;
                    best_len = len;
                    best_bytes = bytes;
                }
                i = j;
            }
            bool moved = false;
            if (best_len > 0) {
                std::size_t seen = 0;
                for (std::size_t i = best_first; seen < best_len && i < n_nodes_; ++i) {
                    if (!has(i, info_computes)) continue;
                    if (seen++ < best_len / 2) continue; // the latter half (all of a single node)
                    const std::int32_t to = cap_target(i, full);
                    if (to < 0) continue;
                    set(i, to, placement_cause::memory);
                    moved = true;
                }
            }
            if (!moved) {
                const std::size_t n = (*need)[over];
                return {errc::alloc_failed,
                        "scheduler: the plan needs " + std::to_string(n) + " bytes of compute buffers on '" +
                            std::string(set_.name(over)) + "', more than its memory cap of " +
                            std::to_string(cap_of(over)) +
                            " bytes, and no work left there can move to a backend under its cap"};
            }
            derive_views();
            if constexpr (Policy::uses_costs)
                if (has_estimate_) result_.seconds = policy_.evaluate(problem_, std::span<const std::int32_t>(bid_).first(n_nodes_));
            pass_splits();
        }
        return {errc::alloc_failed, "scheduler: could not fit the plan under the memory caps"};
    }

    bool movable(std::size_t i, std::size_t b) const noexcept {
        return has(i, info_computes) && bid_[i] == static_cast<std::int32_t>(b) &&
               cause_[i] != placement_cause::user && cause_[i] != placement_cause::buffer &&
               cause_[i] != placement_cause::input;
    }

    // Where a node moved off a full backend goes (-1: nowhere).
    std::int32_t cap_target(std::size_t i, const std::vector<std::uint8_t>& full) {
        std::int32_t to = -1;
        if constexpr (Policy::uses_costs) {
            double best = detail::placement_problem::unsupported;
            for (std::size_t b = 0; b < nb_; ++b) {
                if (full[b] || !supports(i, b)) continue;
                const double c = policy_.node_seconds(b, *ts_[i]);
                if (to < 0 || c < best) {
                    best = c;
                    to = static_cast<std::int32_t>(b);
                }
            }
        } else {
            for (std::size_t k = nb_; k-- > 0;)
                if (!full[k] && supports(i, k)) return static_cast<std::int32_t>(k);
        }
        return to;
    }

    // -- shadows -------------------------------------------------------------------------------

    // Calls f(node index, rewrites [k0, k1)) for each node that reads copies (its rewrites
    // are consecutive).
    template <class F>
    void for_each_shadowed(F&& f) const {
        for (std::size_t k0 = 0, k1 = 0; k0 < rewrites_.size(); k0 = k1) {
            while (k1 < rewrites_.size() && rewrites_[k1].node_index == rewrites_[k0].node_index) ++k1;
            f(static_cast<std::size_t>(rewrites_[k0].node_index), k0, k1);
        }
    }

    // The sources node i's shadow has in slot c: the node's, those of rewrites [k0, k1)
    // replaced by their copies.
    std::array<tensor*, max_srcs> shadow_srcs(const tensor& node, std::size_t k0, std::size_t k1, int c) const {
        std::array<tensor*, max_srcs> srcs = node.src;
        for (std::size_t k = k0; k < k1; ++k)
            srcs[rewrites_[k].j] = copies_[rewrites_[k].copy_base + static_cast<std::uint32_t>(c)];
        return srcs;
    }

    // The node list the runs of the current slot compute (exec_): g's nodes, each node that
    // reads copies replaced by its shadow. Made when the slot is allocated, after its last
    // run is done, so no backend still reads the shadows it replaces.
    void make_shadows(const graph& g) {
        const auto c = static_cast<std::size_t>(cur_copy_);
        std::vector<tensor*>& exec = exec_[c];
        exec.clear();
        shadowed_ = true;
        if (rewrites_.empty()) return; // the runs compute g's own nodes
        const auto nodes = g.nodes();
        exec.assign(nodes.begin(), nodes.end());
        std::deque<tensor>& pool = shadows_[c];
        std::size_t used = 0;
        for_each_shadowed([&](std::size_t i, std::size_t k0, std::size_t k1) {
            if (used == pool.size()) pool.emplace_back();
            tensor& sh = pool[used++];
            sh = *nodes[i];
            sh.src = shadow_srcs(*nodes[i], k0, k1, cur_copy_);
            exec[i] = &sh;
        });
    }

    // Every shadow still equals its node but for the copied sources: false when the user
    // changed such a node after alloc_graph (its parameters, say), which then runs again.
    bool shadows_current(const graph& g) const {
        const std::vector<tensor*>& exec = exec_[static_cast<std::size_t>(cur_copy_)];
        if (!shadowed_ || exec.empty()) return true;
        const auto nodes = g.nodes();
        bool same = true;
        for_each_shadowed([&](std::size_t i, std::size_t k0, std::size_t k1) {
            const tensor& n = *nodes[i];
            const tensor& sh = *exec[i];
            same = same && sh.src == shadow_srcs(n, k0, k1, cur_copy_) && sh.type == n.type && sh.op == n.op &&
                   sh.flags == n.flags && sh.ne == n.ne && sh.nb == n.nb && sh.op_params == n.op_params &&
                   sh.view_src == n.view_src && sh.view_offs == n.view_offs && sh.data == n.data &&
                   sh.buffer == n.buffer && sh.buffer_serial == n.buffer_serial;
        });
        return same;
    }

    // What split sp's backend computes: its nodes, shadows included.
    graph_view exec_view(const split_rec& sp) const {
        const std::vector<tensor*>& exec = exec_[static_cast<std::size_t>(cur_copy_)];
        const std::span<tensor* const> all = shadowed_ && !exec.empty() ? std::span<tensor* const>(exec)
                                                                          : std::span<tensor* const>(graph_nodes_, n_nodes_);
        return graph_view(all.subspan(sp.first, sp.last - sp.first));
    }

    // -- compute ---------------------------------------------------------------------------------

    /// Waits until no backend runs anything (before memory in use may move or be freed).
    status wait_idle() {
        for (std::size_t b = 0; b < nb_; ++b)
            if (status s = set_.synchronize(b); !s) return s;
        return {};
    }

    status wait_slot(int c) {
        for (std::size_t b = 0; b < nb_; ++b)
            if (status s = set_.event_sync(b, c); !s) return s;
        return {};
    }

    status copy_inputs(const split_rec& sp) {
        const auto b = static_cast<std::size_t>(sp.backend);
        for (std::uint32_t k = sp.in0; k < sp.in1; ++k) {
            const std::int32_t s = split_inputs_[k];
            const auto su = static_cast<std::size_t>(s);
            tensor& in = *ts_[su];
            tensor& cp = *copies_[static_cast<std::size_t>(copy_of_[su * nb_ + b]) + static_cast<std::size_t>(cur_copy_)];
            if (in.has_flag(tensor_flag::input)) {
                // the user may overwrite the input as soon as compute returns: copy now,
                // once the backend no longer reads this slot
                if (status st = host_wait_readers(); !st) return st;
                if (status st = set_.event_sync(b, cur_copy_); !st) return st;
                if (status st = tensor_copy(in, cp, staging_); !st) return st;
                continue;
            }
            // device memory: the destination's stream copies it when it gets there; the
            // source backend must not rewrite it before then (pending_readers_). Host
            // memory is copied at once, as the host may rewrite it right after (ggml too).
            const auto a = static_cast<std::size_t>(bid_[su]);
            if (!is_host_memory(in) && set_.copy_async(b, in, cp)) {
                if (a != b) pending_readers_[a].emplace_back(sp.backend, cur_copy_);
                continue;
            }
            if (status st = set_.synchronize(a); !st) return st;
            if (status st = host_wait_readers(); !st) return st;
            if (status st = set_.event_sync(b, cur_copy_); !st) return st;
            if (status st = tensor_copy(in, cp, staging_); !st) return st;
        }
        return {};
    }

    // The host is about to write the split's backend's memory: wait until the copies
    // queued on other backends that read that memory are done (their streams' events).
    status host_wait_readers() {
        for (const auto& [reader, c] : readers_now_)
            if (status s = set_.event_sync(static_cast<std::size_t>(reader), c); !s) return s;
        readers_now_.clear();
        return {};
    }

    static bool is_host_memory(const tensor& t) noexcept {
        const buffer_handle* buf = buffer_of(t);
        return buf == nullptr ? detail::has_memory(t) : buf->is_host();
    }

    status compute_split(const graph& g, const split_rec& sp) {
        const auto b = static_cast<std::size_t>(sp.backend);
        const graph_view exec = exec_view(sp);
        if (!eval_) return set_.compute(b, exec);
        const graph_view all = g.view(); // the callback sees the user's nodes
        for (std::size_t j0 = sp.first; j0 < sp.last;) {
            std::size_t j1 = j0;
            bool need = eval_(*all[j1], true);
            while (!need && j1 + 1 < sp.last) need = eval_(*all[++j1], true);
            if (status s = set_.compute(b, exec.subview(j0 - sp.first, j1 + 1 - sp.first)); !s) return s;
            if (status s = set_.synchronize(b); !s) return s;
            if (need && !eval_(*all[j1], false))
                return {errc::aborted, "scheduler: compute cancelled by the eval callback after node '" + all[j1]->name + "'"};
            j0 = j1 + 1;
        }
        return {};
    }

    status run_splits(const graph& g) {
        // a backend reading another's memory in place could see it rewritten by this run
        // while an earlier run is still in flight: with pipeline copies, start from idle
        if (params_.n_copies > 1 && cross_inplace_)
            for (std::size_t b = 0; b < nb_; ++b)
                if (status s = set_.synchronize(b); !s) return s;
        std::int32_t prev = -1;
        for (const split_rec& sp : splits_) {
            if (sp.first == sp.last) continue;
            const auto b = static_cast<std::size_t>(sp.backend);
            // splits run in order: a backend starts after the previous split's backend
            if (prev >= 0 && prev != sp.backend)
                if (status s = set_.wait(b, static_cast<std::size_t>(prev), cur_copy_); !s) return s;
            // and after every queued copy that reads its memory (from earlier runs too); the
            // host waits for them too before it writes that memory itself (copy_inputs)
            for (const auto& [reader, c] : pending_readers_[b])
                if (status s = set_.wait(b, static_cast<std::size_t>(reader), c); !s) return s;
            readers_now_.swap(pending_readers_[b]);
            pending_readers_[b].clear();
            const std::int64_t t0 = params_.trace ? trace_now() : 0;
            if (status s = copy_inputs(sp); !s) return s;
            if (params_.trace && sp.in1 > sp.in0) {
                if (status s = set_.synchronize(b); !s) return s;
                trace_copy(sp, t0);
            }
            const std::int64_t t1 = params_.trace ? trace_now() : 0;
            if (status s = compute_split(g, sp); !s) return s;
            if (params_.trace) {
                if (status st = set_.synchronize(b); !st) return st;
                trace_event e{trace_event::kind::compute, static_cast<std::size_t>(&sp - splits_.data()), b,
                              sp.last - sp.first, 0, t1, trace_now()};
                if (!eval_) // one compute per split: the device span is the split's
                    if (const auto d = set_.last_compute_time(b)) {
                        e.has_device_time = true;
                        e.device_start_ns = static_cast<std::int64_t>(d->start_ns);
                        e.device_end_ns = static_cast<std::int64_t>(d->end_ns);
                    }
                trace_.push_back(e);
            }
            if (status r = set_.record(b, cur_copy_); !r) return r;
            prev = sp.backend;
        }
        if (params_.trace) place_device_times();
        return {};
    }

    // Moves each backend's device times (its own clock) onto the trace's: one offset per
    // backend, the largest that ends no device span after the host saw it end.
    void place_device_times() {
        std::vector<std::int64_t> offset(nb_, std::numeric_limits<std::int64_t>::max());
        for (const trace_event& e : trace_)
            if (e.has_device_time) offset[e.backend] = std::min(offset[e.backend], e.end_ns - e.device_end_ns);
        for (trace_event& e : trace_)
            if (e.has_device_time) {
                e.device_start_ns += offset[e.backend];
                e.device_end_ns += offset[e.backend];
            }
    }

    [[nodiscard]] std::int64_t trace_now() const {
        return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - trace_start_)
            .count();
    }
    void trace_copy(const split_rec& sp, std::int64_t t0) {
        std::size_t bytes = 0;
        for (std::uint32_t k = sp.in0; k < sp.in1; ++k) bytes += ts_[static_cast<std::size_t>(split_inputs_[k])]->nbytes();
        trace_.push_back({trace_event::kind::copy, static_cast<std::size_t>(&sp - splits_.data()),
                          static_cast<std::size_t>(sp.backend), sp.in1 - sp.in0, bytes, t0, trace_now()});
    }
    [[nodiscard]] std::vector<std::string> backend_names() const {
        std::vector<std::string> v;
        for (std::size_t i = 0; i < nb_; ++i) v.emplace_back(set_.name(i));
        return v;
    }

    Set set_;
    scheduler_params params_;
    Policy policy_;
    // the cost policy's last search (unused under the greedy policy)
    detail::placement_problem problem_, next_problem_;
    detail::placement_result result_;
    std::vector<std::int32_t> greedy_, last_greedy_;
    bool has_result_ = false;   // result_ is the search of problem_ from last_greedy_
    bool has_estimate_ = false; // result_ describes the current plan
    std::vector<trace_event> trace_;
    std::chrono::steady_clock::time_point trace_start_{};
    std::size_t nb_;
    graph_allocator galloc_;
    eval_callback eval_;
    int debug_ = 0;
    std::unordered_map<const tensor*, std::int32_t> user_;

    // the last graph
    const graph* allocated_ = nullptr;
    tensor* const* graph_nodes_ = nullptr;
    int cur_copy_ = 0;
    int next_copy_ = 0;
    std::size_t n_nodes_ = 0;
    std::size_t n_leafs_ = 0;
    mutable detail::tensor_map map_;
    mutable std::size_t map_size_ = 0; // ts_[0, map_size_) are in map_
    std::size_t unassigned_ = 0;       // tensors without a backend yet
    std::vector<tensor*> ts_;
    std::vector<std::int32_t> bid_;
    std::vector<placement_cause> cause_;
    std::vector<std::int32_t> vsrc_;
    std::vector<tensor_info> info_;
    std::vector<std::array<std::int32_t, max_srcs>> srcs_;
    std::vector<std::int16_t> sup_;
    std::vector<buffer_type_ref> bt_;
    std::vector<buffer_type_ref> bt_seen_; // buffer types met in this graph
    buffer_memo memo_;
    const tensor* lost_ = nullptr;                 // a user's tensor whose buffer was freed (number)
    std::vector<std::uint64_t> user_serials_;      // the user buffers the numbered graph reads
    std::vector<const tensor*> user_serial_tensors_; // a tensor in each (for messages)
    std::vector<std::int8_t> bt_reads_;  // [type][backend]: -1 not asked yet

    std::vector<split_rec> splits_;
    std::vector<std::size_t> copy_batch_; // per backend: weight_copy_batch resolved
    std::vector<std::int32_t> split_inputs_;
    std::vector<tensor*> split_input_ptrs_;
    std::vector<std::int32_t> copy_of_;
    std::vector<tensor*> copies_;
    std::vector<std::int32_t> graph_inputs_;
    std::vector<rewrite> rewrites_;
    // per pipeline slot: the node list its runs compute (empty: the graph's own) and the
    // shadows in it
    std::vector<std::vector<tensor*>> exec_;
    std::vector<std::deque<tensor>> shadows_;
    bool shadowed_ = false; // exec_ of the current slot is the last graph's (alloc_graph made it)
    bool cross_inplace_ = false; // a split reads another backend's compute memory in place
    /// Per backend: (reader backend, slot) of asynchronous copies queued from its memory
    /// that it has not waited for yet.
    std::vector<std::vector<std::pair<std::int32_t, int>>> pending_readers_;
    std::vector<std::pair<std::int32_t, int>> readers_now_; // those of the split being run
    std::deque<tensor> pool_;
    std::size_t pool_used_ = 0;
    std::vector<std::byte> staging_;

    std::vector<std::int32_t> pos_of_;   // list position of each numbered tensor (-1)
    std::vector<std::int32_t> copy_pos_; // list position of each copy slot (-1)
    std::vector<std::pair<std::int32_t, std::int32_t>> dep_view_; // (position, root index)
    std::vector<std::array<std::int32_t, max_srcs>> topo_srcs_;
    std::vector<std::int32_t> topo_vsrcs_;
    alloc_topology topology_;
    std::span<tensor* const> alloc_nodes_view_, alloc_leafs_view_; // what the allocator gets
    std::span<const int> alloc_node_ids_view_, alloc_leaf_ids_view_;
    std::vector<tensor*> alloc_nodes_;
    std::vector<tensor*> alloc_leafs_;
    std::vector<int> alloc_node_ids_;
    std::vector<int> alloc_leaf_ids_;
    detail::single_user in_use_; // the thread inside an entry point (docs/threading.md)
};

// -- explaining the plan ---------------------------------------------------------------------

namespace detail {

inline std::string human_bytes(std::size_t n) {
    static constexpr const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = static_cast<double>(n);
    std::size_t u = 0;
    while (v >= 1024.0 && u + 1 < std::size(units)) {
        v /= 1024.0;
        ++u;
    }
    char buf[32];
    std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
    return buf;
}


inline std::string human_seconds(double s) {
    char buf[32];
    if (s >= 1.0)
        std::snprintf(buf, sizeof buf, "%.3g s", s);
    else if (s >= 1e-3)
        std::snprintf(buf, sizeof buf, "%.3g ms", s * 1e3);
    else
        std::snprintf(buf, sizeof buf, "%.3g us", s * 1e6);
    return buf;
}

/// "f32 [8, 2, 1, 1]", as error messages write shapes.
inline std::string typed_shape(const tensor& t) { return std::string(to_string(t.type)) + " " + shape_string(t.ne); }

/// A DOT string literal (line breaks become DOT's \n).
inline std::string dot_quote(std::string_view s) {
    std::string out = "\"";
    for (char c : s) {
        if (c == '\n') {
            out += "\\n";
            continue;
        }
        if (c == '"' || c == '\\') out += '\\';
        out += c;
    }
    return out + '"';
}

} // namespace detail

template <backend_set Set, class Policy>
std::string basic_scheduler<Set, Policy>::describe(int level) const {
    std::string out = "scheduler: " + std::to_string(nb_) + " backend(s) (";
    for (std::size_t b = 0; b < nb_; ++b) out += (b ? ", " : "") + std::string(set_.name(b));
    out += ")";
    if (graph_nodes_ == nullptr) return out + ", no graph\n";
    std::size_t copied = 0;
    for (std::int32_t s : split_inputs_) copied += ts_[static_cast<std::size_t>(s)]->nbytes();
    out += ", " + std::to_string(n_nodes_) + " nodes, " + std::to_string(splits_.size()) + " split(s), " +
           std::to_string(split_inputs_.size()) + " input(s) copied per run (" + detail::human_bytes(copied) +
           "), pipeline copies " + std::to_string(params_.n_copies) + "\n";
    if constexpr (Policy::uses_costs)
        if (has_estimate_)
            out += "cost policy: estimated " + detail::human_seconds(result_.seconds) + " per compute (greedy plan " +
                   detail::human_seconds(result_.greedy_seconds) + "; search from " + result_.start + ")\n";
    for (std::size_t k = 0; k < splits_.size(); ++k) {
        const split_rec& sp = splits_[k];
        const auto b = static_cast<std::size_t>(sp.backend);
        std::size_t computing = 0;
        for (std::uint32_t i = sp.first; i < sp.last; ++i) computing += is_view_op(ts_[i]->op) ? 0 : 1;
        out += "split " + std::to_string(k) + ": " + std::string(set_.name(b)) + ", nodes " + std::to_string(sp.first) +
               ".." + std::to_string(sp.last == 0 ? 0 : sp.last - 1) + " (" + std::to_string(computing) + " computing)";
        if (sp.in1 > sp.in0) {
            out += ", inputs:";
            for (std::uint32_t j = sp.in0; j < sp.in1; ++j) {
                const auto s = static_cast<std::size_t>(split_inputs_[j]);
                const tensor& t = *ts_[s];
                out += " '" + t.name + "' (" + std::string(set_.name(static_cast<std::size_t>(bid_[s]))) + " -> " +
                       std::string(set_.name(b)) + ", " + detail::human_bytes(t.nbytes()) +
                       (t.has_flag(tensor_flag::input) ? ", user input" : "") + ")";
            }
        }
        out += "\n";
        if (level < 2) continue;
        for (std::uint32_t i = sp.first; i < sp.last; ++i) {
            const tensor& t = *ts_[i];
            out += "  node " + std::to_string(i) + " '" + t.name + "' " + std::string(to_string(t.op)) + " " +
                   detail::typed_shape(t) + " -> " + std::string(set_.name(static_cast<std::size_t>(bid_[i]))) + " (" +
                   std::string(to_string(cause_[i])) + ")";
            if constexpr (Policy::uses_costs)
                if (has_estimate_ && problem_.computes[i])
                    out += " est " + detail::human_seconds(problem_.node_cost[i * nb_ + static_cast<std::size_t>(bid_[i])]);
            out += "\n";
        }
    }
    out += "buffers:";
    for (std::size_t b = 0; b < nb_; ++b) {
        const bool overridden = b < params_.buffer_types.size() && params_.buffer_types[b].has_value();
        out += " " + std::string(set_.name(b)) + " " + detail::human_bytes(galloc_.buffer_size(static_cast<int>(b))) +
               (overridden ? " (" + std::string(bt_[b].name()) + ")" : "") + (b + 1 < nb_ ? "," : "");
    }
    return out + "\n";
}

template <backend_set Set, class Policy>
std::string basic_scheduler<Set, Policy>::explain(const tensor& t) const {
    if (graph_nodes_ == nullptr) return "no plan";
    ensure_map();
    const std::uint32_t id = map_.find(&t);
    if (id == detail::tensor_map::npos) return "'" + t.name + "' is not in the last graph";
    const auto i = static_cast<std::size_t>(id);
    const auto b = static_cast<std::size_t>(bid_[i]);
    std::string out = "'" + t.name + "' (" + std::string(to_string(t.op)) + ") runs on " + std::string(set_.name(b)) +
                      " (" + std::string(to_string(cause_[i])) + ")";
    if constexpr (Policy::uses_costs) {
        if (has_estimate_ && i < n_nodes_ && problem_.computes[i]) {
            out += ": estimated";
            for (std::size_t k = 0; k < nb_; ++k) {
                const double c = problem_.node_cost[i * nb_ + k];
                out += (k ? ", " : " ") + std::string(set_.name(k)) + " " +
                       (std::isfinite(c) ? detail::human_seconds(c) : std::string("unsupported"));
            }
            std::string copies;
            for (std::int32_t s : srcs_of(i)) {
                if (s < 0) continue;
                const auto su = static_cast<std::size_t>(s);
                const std::int32_t cp = copy_of_.empty() ? -1 : copy_of_[su * nb_ + b];
                if (cp < 0) continue;
                const std::uint32_t m = info_[su].mem;
                const std::size_t k = m != 0 ? m - 1 : static_cast<std::size_t>(problem_.backend_type[static_cast<std::size_t>(bid_[su])]);
                const double sec = problem_.link_latency[k * nb_ + b] + problem_.bytes[su] / problem_.link_bandwidth[k * nb_ + b];
                copies += (copies.empty() ? "" : ", ") + ("'" + ts_[su]->name + "' " + detail::human_bytes(ts_[su]->nbytes()) +
                                                          " " + detail::human_seconds(sec));
            }
            if (!copies.empty()) out += "; copies in: " + copies;
        }
    }
    return out;
}

template <backend_set Set, class Policy>
std::string basic_scheduler<Set, Policy>::to_dot() const {
    static constexpr const char* palette[] = {"#8dd3c7", "#ffffb3", "#bebada", "#fb8072",
                                              "#80b1d3", "#fdb462", "#b3de69", "#fccde5"};
    const auto colour = [](std::int32_t b) { return palette[static_cast<std::size_t>(b) % std::size(palette)]; };
    std::string out = "digraph backplane {\n  rankdir=TB;\n  node [shape=box, style=filled, fontname=\"monospace\"];\n";
    if (graph_nodes_ == nullptr) return out + "}\n";
    const auto label = [&](std::size_t i) {
        const tensor& t = *ts_[i];
        return detail::dot_quote((t.name.empty() ? "#" + std::to_string(i) : t.name) + "\n" +
                                 std::string(to_string(t.op)) + " " + detail::typed_shape(t) + "\n" +
                                 std::string(set_.name(static_cast<std::size_t>(bid_[i]))) + " (" +
                                 std::string(to_string(cause_[i])) + ")");
    };
    for (std::size_t k = 0; k < splits_.size(); ++k) {
        const split_rec& sp = splits_[k];
        out += "  subgraph cluster_" + std::to_string(k) + " {\n    label=" +
               detail::dot_quote("split " + std::to_string(k) + ": " +
                                 std::string(set_.name(static_cast<std::size_t>(sp.backend)))) +
               ";\n    style=rounded;\n";
        for (std::uint32_t i = sp.first; i < sp.last; ++i)
            out += "    t" + std::to_string(i) + " [label=" + label(i) + ", fillcolor=\"" + colour(bid_[i]) + "\"];\n";
        out += "  }\n";
    }
    for (std::size_t i = n_nodes_; i < ts_.size(); ++i)
        out += "  t" + std::to_string(i) + " [shape=ellipse, label=" + label(i) + ", fillcolor=\"" + colour(bid_[i]) +
               "\"];\n";
    for (std::size_t i = 0; i < n_nodes_; ++i)
        for (std::int32_t s : srcs_of(i)) {
            if (s < 0) continue;
            const auto su = static_cast<std::size_t>(s);
            out += "  t" + std::to_string(su) + " -> t" + std::to_string(i);
            const std::int32_t cp = copy_of_.empty() ? -1 : copy_of_[su * nb_ + static_cast<std::size_t>(bid_[i])];
            if (cp >= 0 && bid_[su] != bid_[i])
                out += " [style=dashed, color=\"#d62728\", label=" +
                       detail::dot_quote("copy " + detail::human_bytes(ts_[su]->nbytes())) + "]";
            out += ";\n";
        }
    return out + "}\n";
}

/// A scheduler over backends known at compile time, in priority order; the last must be a
/// host backend. Holds references: the backends must outlive it.
///
///     scheduler sched(blas, cpu);                       // or scheduler<blas_backend, cpu_backend>
///     scheduler sched2(scheduler_params{.n_copies = 2}, gpu, cpu);
template <backend... Bs>
class scheduler : public basic_scheduler<tuple_backend_set<Bs...>> {
    static_assert(sizeof...(Bs) > 0, "a scheduler needs at least one backend");
    static_assert(host_backend<std::tuple_element_t<sizeof...(Bs) - 1, std::tuple<Bs...>>>,
                  "the last backend of a scheduler must be a host backend (its buffer type is host memory): it "
                  "runs graph inputs and every op no other backend supports");
    using base = basic_scheduler<tuple_backend_set<Bs...>>;

public:
    explicit scheduler(Bs&... backends) : base(tuple_backend_set<Bs...>(backends...)) {}
    scheduler(scheduler_params params, Bs&... backends) : base(tuple_backend_set<Bs...>(backends...), params) {}
};

template <backend... Bs>
scheduler(Bs&...) -> scheduler<Bs...>;
template <backend... Bs>
scheduler(scheduler_params, Bs&...) -> scheduler<Bs...>;

/// A scheduler over backends known at compile time with placement policy `Policy`
/// (sched/placement.hpp), for example cost_scheduler = policy_scheduler<cost_policy, ...>:
///
///     policy_scheduler sched(cost_policy{}, scheduler_params{}, gpu, cpu);
template <class Policy, backend... Bs>
class policy_scheduler : public basic_scheduler<tuple_backend_set<Bs...>, Policy> {
    static_assert(sizeof...(Bs) > 0, "a scheduler needs at least one backend");
    static_assert(host_backend<std::tuple_element_t<sizeof...(Bs) - 1, std::tuple<Bs...>>>,
                  "the last backend of a scheduler must be a host backend (its buffer type is host memory): it "
                  "runs graph inputs and every op no other backend supports");
    using base = basic_scheduler<tuple_backend_set<Bs...>, Policy>;

public:
    policy_scheduler(Policy policy, scheduler_params params, Bs&... backends)
        : base(tuple_backend_set<Bs...>(backends...), std::move(params), std::move(policy)) {}
    explicit policy_scheduler(Policy policy, Bs&... backends)
        : base(tuple_backend_set<Bs...>(backends...), scheduler_params{}, std::move(policy)) {}
};

template <class Policy, backend... Bs>
policy_scheduler(Policy, scheduler_params, Bs&...) -> policy_scheduler<Policy, Bs...>;
template <class Policy, backend... Bs>
policy_scheduler(Policy, Bs&...) -> policy_scheduler<Policy, Bs...>;

/// A scheduler over backends chosen at run time.
using dynamic_scheduler = basic_scheduler<dynamic_backend_set>;

} // namespace backplane
