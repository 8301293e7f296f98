#pragma once
// The scheduler's last stage: runs a split plan (sched/plan.hpp) on its backends.
//
// Per split, in order: wait for the previous split's backend (device-side with events,
// else on the host) and for the copies queued from this backend's memory, copy the
// split's inputs (user inputs at once, others with the destination's asynchronous copy
// when it has one), compute the split's nodes, record an event. The eval callback, when
// set, decides where a split's compute pauses; a run_observer (the tracer) sees each
// piece. A set whose backends live in several processes (routed_backend_set) routes
// each copy: here, in another process, or sent or received between them.
//
// The user's graph is never modified: what each pipeline slot's runs hand the backends
// (the node list, shadows of the nodes that read copies, the slot's own copies) is the
// slot's, and stays unchanged until its runs are done (sched/slot_tensors.hpp).

#include <backplane/core/error.hpp>
#include <backplane/core/graph.hpp>
#include <backplane/core/tensor.hpp>
#include <backplane/memory/tensor_copy.hpp>
#include <backplane/sched/backend_set.hpp>
#include <backplane/sched/plan.hpp>
#include <backplane/sched/slot_tensors.hpp>
#include <backplane/sched/trace.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <utility>
#include <vector>

namespace backplane {

/// The eval callback: asked for each node of a split in order with ask = true ("will you
/// look at this node?"); nodes up to the first `true` are computed in one call; then it is
/// called again for that node with ask = false, its result computed and readable (the
/// backend synchronized). Returning false then cancels the compute: nothing after that
/// node runs, and compute returns errc::aborted.
using eval_callback = std::function<bool(tensor& node, bool ask)>;

namespace detail {

/// Runs split plans on the backends of a set (see the header comment).
template <backend_set Set>
class executor {
public:
    explicit executor(std::size_t n_backends) : nb_(n_backends), pending_readers_(n_backends) {}

    /// What one run reads.
    struct run_input {
        const graph& g;
        const graph_numbering& num;
        const assignment& asg;
        const split_plan& plan;
        int slot;            ///< the pipeline slot
        bool pipelined;      ///< more than one slot
        const eval_callback& eval;
        run_observer* observer; ///< null: none
    };

    /// Queues every split of the plan; returns when everything is queued.
    status run(Set& set, const run_input& in) {
        // a backend reading another's memory in place could see it rewritten by this run
        // while an earlier run is still in flight: with pipeline copies, start from idle
        if (in.pipelined && in.plan.cross_inplace)
            if (status s = wait_idle(set); !s) return s;
        if (in.observer != nullptr) in.observer->started();
        std::int32_t prev = -1;
        for (std::size_t k = 0; k < in.plan.splits.size(); ++k) {
            const split_rec& sp = in.plan.splits[k];
            if (sp.first == sp.last) continue;
            if (status s = run_split(set, in, k, prev); !s) return s;
            prev = sp.backend;
        }
        if (in.observer != nullptr) in.observer->finished();
        return {};
    }

    /// Waits until no backend runs anything (before memory in use may move or be freed).
    status wait_idle(Set& set) {
        for (std::size_t b = 0; b < nb_; ++b)
            if (status s = set.synchronize(b); !s) return s;
        return {};
    }
    /// Waits until the last run that used pipeline slot c is done on every backend.
    status wait_slot(Set& set, int c) {
        for (std::size_t b = 0; b < nb_; ++b)
            if (status s = set.event_sync(b, c); !s) return s;
        return {};
    }

    /// What each pipeline slot's runs hand the backends (sched/slot_tensors.hpp).
    [[nodiscard]] slot_tensors& slots() noexcept { return slots_; }
    [[nodiscard]] const slot_tensors& slots() const noexcept { return slots_; }

private:
    // Split k after split `prev`'s backend: its waits, copies, compute and event.
    status run_split(Set& set, const run_input& in, std::size_t k, std::int32_t prev) {
        const split_rec& sp = in.plan.splits[k];
        const auto b = static_cast<std::size_t>(sp.backend);
        // splits run in order: a backend starts after the previous split's backend
        if (prev >= 0 && prev != sp.backend)
            if (status s = set.wait(b, static_cast<std::size_t>(prev), in.slot); !s) return s;
        // and after every queued copy that reads its memory (from earlier runs too); the
        // host waits for them too before it writes that memory itself (copy_inputs)
        for (const auto& [reader, c] : pending_readers_[b])
            if (status s = set.wait(b, static_cast<std::size_t>(reader), c); !s) return s;
        readers_now_.swap(pending_readers_[b]);
        pending_readers_[b].clear();
        if (in.observer != nullptr) in.observer->mark();
        if (status s = copy_inputs(set, in, sp); !s) return s;
        if (in.observer != nullptr && sp.in1 > sp.in0) {
            if (status s = set.synchronize(b); !s) return s;
            std::size_t bytes = 0;
            for (std::uint32_t j = sp.in0; j < sp.in1; ++j) bytes += in.plan.input_ptrs[j]->nbytes();
            in.observer->copied(k, b, sp.in1 - sp.in0, bytes);
        }
        if (in.observer != nullptr) in.observer->mark();
        if (status s = compute_split(set, in, sp); !s) return s;
        if (in.observer != nullptr) {
            if (status s = set.synchronize(b); !s) return s;
            // one compute per split without an eval callback: the device span is the split's
            in.observer->computed(k, b, sp.last - sp.first, in.eval ? std::nullopt : set.last_compute_time(b));
        }
        return set.record(b, in.slot);
    }

    status copy_inputs(Set& set, const run_input& in, const split_rec& sp) {
        const auto b = static_cast<std::size_t>(sp.backend);
        for (std::uint32_t k = sp.in0; k < sp.in1; ++k) {
            const auto su = static_cast<std::size_t>(in.plan.inputs[k]);
            tensor& src = in.num[su];
            tensor& cp = *slots_.copy_for(in.plan, static_cast<std::size_t>(in.plan.copy_of[su * nb_ + b]) +
                                                 static_cast<std::size_t>(in.slot), in.slot);
            const auto a = static_cast<std::size_t>(in.asg.backend[su]);
            if constexpr (routed_backend_set<Set>) {
                const copy_route r = set.route(a, b);
                if (r != copy_route::local) {
                    if (status st = route_copy(set, in, r, a, b, src, cp); !st) return st;
                    if (r != copy_route::send_and_local) continue;
                }
            }
            if (src.has_flag(tensor_flag::input)) {
                // the user may overwrite the input as soon as compute returns: copy now,
                // once the backend no longer reads this slot
                if (status st = host_wait_readers(set); !st) return st;
                if (status st = set.event_sync(b, in.slot); !st) return st;
                if (status st = tensor_copy(src, cp, staging_); !st) return st;
                continue;
            }
            // device memory: the destination's stream copies it when it gets there; the
            // source backend must not rewrite it before then (pending_readers_). Host
            // memory is copied at once, as the host may rewrite it right after (ggml too).
            if (!is_host_memory(src) && set.copy_async(b, src, cp)) {
                if (a != b) pending_readers_[a].emplace_back(sp.backend, in.slot);
                continue;
            }
            if (status st = set.synchronize(a); !st) return st;
            if (status st = host_wait_readers(set); !st) return st;
            if (status st = set.event_sync(b, in.slot); !st) return st;
            if (status st = tensor_copy(src, cp, staging_); !st) return st;
        }
        return {};
    }

    // A copy between processes (routed_backend_set): src is read once its backend is
    // done with it; dst is written once its backend no longer reads this slot.
    status route_copy(Set& set, const run_input& in, copy_route r, std::size_t a, std::size_t b, const tensor& src,
                      tensor& dst) {
        if (r == copy_route::none) return {};
        if (r == copy_route::receive) {
            if (status st = host_wait_readers(set); !st) return st;
            if (status st = set.event_sync(b, in.slot); !st) return st;
            return set.receive(a, b, dst);
        }
        if (status st = set.synchronize(a); !st) return st;
        return set.send(a, b, src);
    }

    // The host is about to write the split's backend's memory: wait until the copies
    // queued on other backends that read that memory are done (their streams' events).
    status host_wait_readers(Set& set) {
        for (const auto& [reader, c] : readers_now_)
            if (status s = set.event_sync(static_cast<std::size_t>(reader), c); !s) return s;
        readers_now_.clear();
        return {};
    }

    static bool is_host_memory(const tensor& t) noexcept {
        const buffer_handle* buf = buffer_of(t);
        return buf == nullptr ? has_memory(t) : buf->is_host();
    }

    status compute_split(Set& set, const run_input& in, const split_rec& sp) {
        const auto b = static_cast<std::size_t>(sp.backend);
        const graph_view exec = slots_.nodes_of(sp, in.g.nodes(), in.plan.kept, in.slot);
        if (!in.eval) return set.compute(b, exec);
        // the callback may read every node it is told of: each is computed (no fusion)
        const graph_view all = in.g.view(); // the callback sees the user's nodes
        for (std::size_t j0 = sp.first; j0 < sp.last;) {
            std::size_t j1 = j0;
            bool need = in.eval(*all[j1], true);
            while (!need && j1 + 1 < sp.last) need = in.eval(*all[++j1], true);
            if (status s = set.compute(b, exec.subview(j0 - sp.first, j1 + 1 - sp.first).keep_all()); !s) return s;
            if (status s = set.synchronize(b); !s) return s;
            if (need && !in.eval(*all[j1], false))
                return {errc::aborted,
                        "scheduler: compute cancelled by the eval callback after node '" + all[j1]->name + "'"};
            j0 = j1 + 1;
        }
        return {};
    }

    std::size_t nb_;
    /// Per backend: (reader backend, slot) of asynchronous copies queued from its memory
    /// that it has not waited for yet.
    std::vector<std::vector<std::pair<std::int32_t, int>>> pending_readers_;
    std::vector<std::pair<std::int32_t, int>> readers_now_; // those of the split being run
    std::vector<std::byte> staging_;
    slot_tensors slots_;
};

} // namespace detail
} // namespace backplane
