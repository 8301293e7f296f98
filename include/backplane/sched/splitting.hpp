#pragma once
// The split stage of the scheduler (docs/scheduler.md, pass 5): from an assignment, the
// split plan (sched/plan.hpp). Runs of consecutive nodes on one backend form splits (view
// ops never start one). A source the split's backend cannot read in place becomes a split
// input, copied into n_copies slots of that backend's memory once per graph and backend;
// the node reads the copy of the current slot (a rewrite). A node reading weights that
// live on a backend its own cannot read starts a new split once the split has copied
// more than its backend's weight copy batch, so that the copies' memory is reused. With
// pipeline copies every graph input gets its slots too.
//
// The plan is complete when make() returns: nothing later changes it.

#include <backplane/core/tensor.hpp>
#include <backplane/sched/plan.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace backplane::detail {

/// What the split stage reads besides the numbering and the assignment.
struct split_params {
    std::span<const std::string_view> backends; ///< names, by index (the copies are named after them)
    int n_copies = 1;                           ///< pipeline slots
    std::span<const std::size_t> copy_batch;    ///< per backend: scheduler_params::weight_copy_batch resolved
};

/// Makes one split plan; `Readable` is `bool(std::int32_t tensor, std::size_t backend)`:
/// the backend reads the tensor in place.
template <class Readable>
class splitter {
public:
    splitter(split_plan& out, const graph_numbering& num, const assignment& asg, const split_params& p,
             Readable& readable)
        : plan_(out), num_(num), info_(num.info), bid_(asg.backend), p_(p), nb_(p.backends.size()), readable_(readable) {}

    void make() {
        clear();
        if (nb_ == 1 && p_.n_copies == 1) { // one split, nothing to copy, no slots
            plan_.splits.push_back(split_rec{0, 0, static_cast<std::uint32_t>(num_.n_nodes()), 0, 0});
            return;
        }
        plan_.copy_of.assign(num_.tensors().size() * nb_, -1);
        std::size_t i = 0;
        while (i < num_.n_nodes() && has(i, tensor_info::view_op)) ++i;
        cur_ = i < num_.n_nodes() ? bid_[i] : bid_.empty() ? static_cast<std::int32_t>(nb_ - 1) : bid_[0];
        plan_.splits.push_back(split_rec{cur_, 0, 0, 0, 0});
        for (; i < num_.n_nodes(); ++i) {
            if (has(i, tensor_info::view_op)) continue;
            if (bid_[i] != cur_ || weights_end_split(i)) start_split(i);
            add_sources(i);
        }
        plan_.splits.back().last = static_cast<std::uint32_t>(num_.n_nodes());
        mark_kept();
    }

private:
    [[nodiscard]] bool has(std::size_t i, std::uint8_t bit) const noexcept { return (info_[i].bits & bit) != 0; }

    // The nodes that a later split reads (view ops' reads included).
    void mark_kept() {
        plan_.kept.assign(plan_.splits.size() > 1 ? num_.n_nodes() : 0, 0);
        if (plan_.kept.empty()) return;
        for (const split_rec& sp : plan_.splits)
            for (std::size_t i = sp.first; i < sp.last; ++i)
                for (std::int32_t s : num_.srcs_of(i))
                    if (s >= 0 && static_cast<std::uint32_t>(s) < sp.first) plan_.kept[static_cast<std::size_t>(s)] = 1;
    }

    void clear() {
        plan_.kept.clear();
        plan_.splits.clear();
        plan_.inputs.clear();
        plan_.input_ptrs.clear();
        plan_.copies.clear();
        plan_.rewrites.clear();
        plan_.graph_inputs.clear();
        plan_.pool_used = 0;
        plan_.cross_inplace = false;
        weights_copied_ = 0;
    }

    // Node i, on the current split's backend, reads weights it must copy beyond the
    // split's weight copy batch.
    [[gnu::always_inline]] bool weights_end_split(std::size_t i) const {
        const split_rec& sp = plan_.splits.back();
        if (sp.in1 == sp.in0) return false;
        const auto cur = static_cast<std::size_t>(cur_);
        const std::size_t batch = p_.copy_batch[cur];
        for (std::int32_t s : num_.srcs_of(i)) {
            if (s < 0) continue;
            const auto su = static_cast<std::size_t>(s);
            if (!has(su, tensor_info::weights) || bid_[su] == cur_ || readable_(s, cur)) continue;
            if (batch == 0) return true;
            if (plan_.copy_of[su * nb_ + cur] < 0 && weights_copied_ + num_[su].nbytes() > batch) return true;
        }
        return false;
    }

    void start_split(std::size_t i) {
        plan_.splits.back().last = static_cast<std::uint32_t>(i);
        const auto in = static_cast<std::uint32_t>(plan_.inputs.size());
        cur_ = bid_[i];
        plan_.splits.push_back(split_rec{cur_, static_cast<std::uint32_t>(i), 0, in, in});
        weights_copied_ = 0;
    }

    // Node i's sources: graph inputs get their slots; those the split's backend cannot
    // read in place become split inputs, and node i reads their copies.
    [[gnu::always_inline]] void add_sources(std::size_t i) {
        const std::int32_t cur = cur_;
        const auto cb = static_cast<std::size_t>(cur);
        const bool pipeline = p_.n_copies > 1;
        const std::span<const std::int32_t> srcs = num_.srcs_of(i);
        split_rec& sp = plan_.splits.back();
        for (std::size_t j = 0; j < srcs.size(); ++j) {
            const std::int32_t s = srcs[j];
            if (s < 0) continue;
            const auto su = static_cast<std::size_t>(s);
            if (pipeline && has(su, tensor_info::input)) add_graph_input(s);
            if (bid_[su] == cur) continue;
            if (readable_(s, cb)) {
                if (!has(su, tensor_info::weights)) plan_.cross_inplace = true;
                continue;
            }
            bool made = false;
            const std::uint32_t base = copies_of(s, cb, made);
            if (made) {
                plan_.inputs.push_back(s);
                plan_.input_ptrs.push_back(num_.tensors()[su]);
                sp.in1 = static_cast<std::uint32_t>(plan_.inputs.size());
                if (has(su, tensor_info::weights)) weights_copied_ += num_[su].nbytes();
            }
            plan_.rewrites.push_back(rewrite{static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(j), base});
        }
    }

    // The pipeline slots of graph input s on its own backend. A rotated input (a leaf
    // without memory of its own) has its flags in every slot, so that each slot is
    // placed like the input.
    void add_graph_input(std::int32_t s) {
        const auto su = static_cast<std::size_t>(s);
        bool made = false;
        const std::uint32_t base = copies_of(s, static_cast<std::size_t>(bid_[su]), made);
        if (!made) return;
        plan_.graph_inputs.push_back(s);
        const bool leaf = su >= num_.n_nodes() && su < num_.n_nodes() + num_.n_leafs();
        if (leaf && !has(su, tensor_info::memory))
            for (int c = 0; c < p_.n_copies; ++c) plan_.copies[base + static_cast<std::uint32_t>(c)]->flags = num_[su].flags;
    }

    // The n_copies slots of tensor s on backend b, made on first use. Without pipeline
    // copies the one copy reads s (for the allocator, which keeps s until it is copied).
    std::uint32_t copies_of(std::int32_t s, std::size_t b, bool& made) {
        std::int32_t& slot = plan_.copy_of[static_cast<std::size_t>(s) * nb_ + b];
        made = slot < 0;
        if (!made) return static_cast<std::uint32_t>(slot);
        tensor& src = num_[static_cast<std::size_t>(s)];
        slot = static_cast<std::int32_t>(plan_.copies.size());
        for (int c = 0; c < p_.n_copies; ++c) {
            tensor& t = plan_.new_pool_tensor();
            t.type = src.type;
            t.ne = src.ne;
            t.nb = src.nb;
            t.name.reserve(src.name.size() + 16);
            t.name.append(p_.backends[b]).append("#").append(src.name).append("#").append(std::to_string(c));
            if (p_.n_copies > 1) {
                t.set_input();
                t.set_output();
            } else {
                t.src[0] = &src;
            }
            plan_.copies.push_back(&t);
        }
        return static_cast<std::uint32_t>(slot);
    }

    split_plan& plan_;
    const graph_numbering& num_;
    // num.info and asg.backend, which stay as they are while the plan is made: read
    // directly, not through the numbering and the assignment
    std::span<const tensor_info> info_;
    std::span<const std::int32_t> bid_;
    const split_params& p_;
    std::size_t nb_;
    Readable& readable_;
    std::int32_t cur_ = 0;             // the backend of the split being made
    std::size_t weights_copied_ = 0;   // bytes of weights that split copies
};

/// Replaces `out` with the split plan of an assignment (see the header comment).
template <class Readable>
void make_split_plan(split_plan& out, const graph_numbering& num, const assignment& asg, const split_params& p,
                     Readable&& readable) {
    splitter<std::remove_reference_t<Readable>>(out, num, asg, p, readable).make();
}

} // namespace backplane::detail
