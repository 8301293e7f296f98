#pragma once
// ggml's placement passes (docs/scheduler.md, "Placement"), the greedy strategy: from a
// numbering, an assignment of every tensor to a backend with its cause.
//  1. from the tensor itself (place_from_tensor): its memory, its input flag, the weights
//     it reads, an offload request;
//  2. expansion: assignments spread down and up the node list over nodes their backend
//     supports (expand_sweep; expand_single with one backend);
//  3. upgrade to a higher-priority backend of the same buffer type, or the supporting
//     backend that reads most of the node's sources (pass_upgrade_and_best);
//  4. views and sources take their neighbours' backends, the rest the first backend
//     that supports them (pass_sources).
// User assignments (set_backend) are made before and never changed.

#include <backplane/core/error.hpp>
#include <backplane/core/tensor.hpp>
#include <backplane/sched/backend_queries.hpp>
#include <backplane/sched/plan.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace backplane::detail {

template <backend_set Set>
class greedy_placement {
public:
    greedy_placement(backend_queries<Set>& ask, const graph_numbering& num, assignment& asg, bool op_offload)
        : ask_(ask), num_(num), asg_(asg), nb_(ask.size()), op_offload_(op_offload) {}

    /// Pass 1 for every tensor, leafs first, then nodes (as ggml); false with `failed`
    /// set when a tensor has memory no backend can use for its op.
    bool place_from_tensors(std::size_t& failed) {
        const std::size_t n = num_.n_nodes() + num_.n_leafs();
        for (std::size_t k = 0; k < n; ++k) {
            const std::size_t i = k < num_.n_leafs() ? num_.n_nodes() + k : k - num_.n_leafs();
            if (!place_from_tensor(i)) {
                failed = i;
                return false;
            }
        }
        return true;
    }

    /// Passes 2 to 4 after pass 1; errc::not_supported names a node no backend supports.
    status place_rest() {
        if (nb_ > 1) {
            expand_sweep(true, false);
            expand_sweep(false, false);
            expand_sweep(true, true);
            expand_sweep(false, true);
            pass_upgrade_and_best();
        } else {
            expand_single();
        }
        return pass_sources();
    }

    // The first pass for tensor index i (a node or a leaf): its memory, its input flag or
    // its weights decide, when they do. False when i has memory no backend can use for
    // its op (no_backend_for_memory says why).
    [[gnu::always_inline]] bool place_from_tensor(std::size_t i) {
        if (asg_.backend[i] >= 0) return true; // the user's
        const bool is_node = i < num_.n_nodes();
        const std::int32_t op_node = is_node && num_.has(i, tensor_info::computes) ? static_cast<std::int32_t>(i) : -1;
        if (num_.has(i, tensor_info::memory)) {
            const std::int32_t from = backend_from_memory(i, op_node);
            if (from >= 0) {
                asg_.set(i, from, placement_cause::buffer);
                return true;
            }
            if (from == -2) return false;
        }
        if (num_.has(i, tensor_info::input)) {
            asg_.set(i, static_cast<std::int32_t>(nb_ - 1), placement_cause::input);
            return true;
        }
        if (!is_node || num_.info[i].op == op_kind::rope) return true;
        for (const std::int32_t s : num_.srcs_of(i)) {
            if (s < 0 || !num_.has(static_cast<std::size_t>(s), tensor_info::weights)) continue;
            const std::int32_t w = backend_from_memory(static_cast<std::size_t>(s), op_node);
            if (op_offload_ && nb_ > 1 && w == static_cast<std::int32_t>(nb_ - 1) &&
                detail::buffer_of(num_[static_cast<std::size_t>(s)])->is_host()) {
                for (std::size_t b = 0; b + 1 < nb_; ++b)
                    if (ask_.supports(i, b) && ask_.set().offload_op(b, num_[i])) {
                        asg_.set(i, static_cast<std::int32_t>(b), placement_cause::offload);
                        return true;
                    }
            }
            if (w >= 0) asg_.set(i, w, placement_cause::weights);
            break;
        }
        return true;
    }


private:
    // The highest-priority backend that can use tensor index t's memory and compute `op`
    // (a node index or -1 for a tensor that computes nothing); -1 when t has no memory,
    // -2 when no backend can.
    [[gnu::always_inline]] std::int32_t backend_from_memory(std::size_t t, std::int32_t op_node) {
        const std::uint32_t m = num_.info[t].mem;
        if (m == 0) return -1;
        for (std::size_t b = 0; b < nb_; ++b)
            if (ask_.reads_at(b, m - 1) && (op_node < 0 || ask_.supports(static_cast<std::size_t>(op_node), b)))
                return static_cast<std::int32_t>(b);
        return -2;
    }


    void expand_sweep(bool down, bool include_last) {
        // local views of the arrays: the calls in the loop would make the compiler reload
        // them through num_ and asg_ on every node (so in the passes below)
        const std::span<const tensor_info> info = num_.info;
        const std::span<const std::int32_t> bid = asg_.backend;
        const std::size_t n = num_.n_nodes();
        std::int32_t cur = -1;
        const auto last = static_cast<std::int32_t>(nb_ - 1);
        for (std::size_t k = 0; k < n; ++k) {
            const std::size_t i = down ? k : n - 1 - k;
            if ((info[i].bits & tensor_info::view_op) != 0) continue;
            const std::int32_t b = bid[i];
            if (b >= 0) {
                cur = (!include_last && b == last) ? -1 : b;
            } else if (cur >= 0 && ask_.supports(i, static_cast<std::size_t>(cur))) {
                asg_.set(i, cur, placement_cause::expand);
            }
        }
    }

    // expand_sweep(down and up, with the last backend) then pass_upgrade_and_best, for one
    // backend: once any node that computes is placed, the sweeps reach every other node
    // it supports (expand); when none is, the best pass takes them (best); there is
    // nothing to upgrade to.
    void expand_single() {
        bool any = false;
        for (std::size_t i = 0; i < num_.n_nodes() && !any; ++i) any = !num_.has(i, tensor_info::view_op) && asg_.backend[i] >= 0;
        const placement_cause c = any ? placement_cause::expand : placement_cause::best;
        const std::span<const tensor_info> info = num_.info;
        const std::span<const std::int32_t> bid = asg_.backend;
        const std::size_t n = num_.n_nodes();
        for (std::size_t i = 0; i < n; ++i)
            if (bid[i] < 0 && (info[i].bits & tensor_info::view_op) == 0 && ask_.supports(i, 0)) asg_.set(i, 0, c);
    }

    void pass_upgrade_and_best() {
        const std::span<const tensor_info> info = num_.info;
        const std::span<const std::int32_t> bid = asg_.backend;
        const std::span<const placement_cause> cause = asg_.cause;
        const std::size_t n = num_.n_nodes();
        for (std::size_t i = 0; i < n; ++i) {
            if ((info[i].bits & tensor_info::view_op) != 0) continue;
            const std::int32_t cur = bid[i];
            if (cur < 0) {
                int best_count = -1;
                for (std::size_t b = 0; b < nb_; ++b) {
                    if (!ask_.supports(i, b)) continue;
                    int count = 0;
                    for (std::int32_t s : num_.srcs_of(i)) {
                        if (s < 0) continue;
                        const auto su = static_cast<std::size_t>(s);
                        const bool placed = asg_.backend[su] >= 0 || (num_.view_src(su) >= 0 && asg_.backend[static_cast<std::size_t>(num_.view_src(su))] >= 0);
                        if (placed && ask_.readable(asg_, s, b)) ++count;
                    }
                    if (count > best_count) {
                        best_count = count;
                        asg_.set(i, static_cast<std::int32_t>(b), placement_cause::best);
                    }
                }
            } else if (cause[i] != placement_cause::user) {
                for (std::size_t b = 0; b < static_cast<std::size_t>(cur); ++b) {
                    if (!(ask_.compute_type(b) == ask_.compute_type(static_cast<std::size_t>(cur))) || !ask_.supports(i, b)) continue;
                    bool all = true;
                    for (std::int32_t s : num_.srcs_of(i))
                        if (s >= 0 && !ask_.readable(asg_, s, b)) {
                            all = false;
                            break;
                        }
                    if (all) {
                        asg_.set(i, static_cast<std::int32_t>(b), placement_cause::upgrade);
                        break;
                    }
                }
            }
        }
    }

    status pass_sources() {
        const std::span<const tensor_info> info = num_.info;
        const std::span<const std::int32_t> bid = asg_.backend;
        const std::size_t n = num_.n_nodes();
        for (std::size_t i = 0; i < n; ++i) {
            if (bid[i] >= 0 && (info[i].bits & tensor_info::late_src) == 0) continue; // it and its sources are placed
            if (asg_.backend[i] < 0 && num_.view_src(i) >= 0 && asg_.backend[static_cast<std::size_t>(num_.view_src(i))] >= 0)
                asg_.set(i, asg_.backend[static_cast<std::size_t>(num_.view_src(i))], placement_cause::source);
            for (std::int32_t s : num_.srcs_of(i)) {
                if (s < 0) continue;
                const auto su = static_cast<std::size_t>(s);
                if (asg_.backend[su] >= 0) continue;
                const std::int32_t v = num_.view_src(su);
                if (v >= 0 && asg_.backend[static_cast<std::size_t>(v)] >= 0)
                    asg_.set(su, asg_.backend[static_cast<std::size_t>(v)], placement_cause::source);
                else if (asg_.backend[i] >= 0)
                    asg_.set(su, asg_.backend[i], placement_cause::source);
            }
            for (std::size_t b = 0; b < nb_ && asg_.backend[i] < 0; ++b)
                if (!num_.has(i, tensor_info::computes) || ask_.supports(i, b)) asg_.set(i, static_cast<std::int32_t>(b), placement_cause::fallback);
            if (asg_.backend[i] < 0) {
                const tensor& t = num_[i];
                return {errc::not_supported, "scheduler: no backend supports node '" + t.name + "' (" +
                                                 std::string(to_string(t.op)) + ", " + std::string(to_string(t.type)) +
                                                 ")"};
            }
        }
        if (asg_.unassigned == 0) return {};
        // what is still unplaced (views of views whose root was placed after them, sources
        // of such views): their consumer's backend, backwards
        for (std::size_t k = num_.n_nodes(); k-- > 0;)
            for (std::int32_t s : num_.srcs_of(k))
                if (s >= 0 && asg_.backend[static_cast<std::size_t>(s)] < 0) asg_.set(static_cast<std::size_t>(s), asg_.backend[k], placement_cause::source);
        for (std::size_t i = 0; i < num_.tensors().size(); ++i)
            if (asg_.backend[i] < 0) {
                const std::int32_t v = num_.view_src(i);
                asg_.set(i, v >= 0 && asg_.backend[static_cast<std::size_t>(v)] >= 0 ? asg_.backend[static_cast<std::size_t>(v)]
                                                                        : static_cast<std::int32_t>(nb_ - 1),
                    placement_cause::source);
            }
        return {};
    }

    backend_queries<Set>& ask_;
    const graph_numbering& num_;
    assignment& asg_;
    std::size_t nb_;
    bool op_offload_;
};

/// The last backend not `full` that computes node i (-1: none): where the memory caps
/// move it under the greedy policy.
template <backend_set Set>
std::int32_t last_free_backend(backend_queries<Set>& ask, std::size_t i, const std::vector<std::uint8_t>& full) {
    for (std::size_t k = ask.size(); k-- > 0;)
        if (!full[k] && ask.supports(i, k)) return static_cast<std::int32_t>(k);
    return -1;
}

} // namespace backplane::detail
