#pragma once
// The numbering stage of the scheduler: a graph's tensors numbered densely and read once
// (sched/plan.hpp, graph_numbering).
//
// Tensors are numbered nodes [0, n_nodes), leafs next, then anything reached only as a
// source or view source. The graph recorded its topology when it was built, so this
// needs no hashing unless a node was rewired since (checked per source) or a tensor
// outside the graph is read; the map (tensor -> number) is built only then, or when a
// query or a user assignment needs it.
//
// While it reads each tensor it also learns what placement needs of its memory: the
// buffer type (numbered per graph), whether it holds weights, whether the memory is this
// scheduler's own compute buffer (placed again) or a user buffer since freed (an error
// naming the tensor). With a greedy placement at hand it runs pass 1 on each leaf while
// the leaf is in cache, and on the nodes once they are numbered (pass 1 reads the
// numbering, not the nodes).

#include <backplane/core/error.hpp>
#include <backplane/core/graph.hpp>
#include <backplane/core/op_traits.hpp>
#include <backplane/core/tensor.hpp>
#include <backplane/memory/buffer.hpp>
#include <backplane/memory/graph_alloc.hpp>
#include <backplane/memory/host_buffer.hpp>
#include <backplane/sched/backend_queries.hpp>
#include <backplane/sched/greedy_placement.hpp>
#include <backplane/sched/plan.hpp>

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace backplane::detail {

template <backend_set Set>
class numberer {
public:
    /// `galloc`: the scheduler's allocator (its buffers are placed again, not respected).
    numberer(const graph_allocator& galloc, backend_queries<Set>& ask) : galloc_(galloc), ask_(ask), nb_(ask.size()) {}

    // Numbers g's tensors and reads what the passes need of them. With `place` (no user
    // assignments to apply first) it also runs the first pass: leafs first, each while it
    // is in cache, then nodes, as place_from_tensors does. A node the first pass fails on
    // is reported before a later node read out of order, as if each node were placed
    // right after it is numbered.
    status number(const graph& g, graph_numbering& num, assignment& asg, greedy_placement<Set>* place) {
        start(g, num, asg);
        const std::size_t listed = num.n_nodes() + num.n_leafs();
        for (std::size_t i = num.n_nodes(); i < listed; ++i) {
            num.info[i] = info_of(num[i]);
            if (place && !place->place_from_tensor(i)) return no_backend_for_memory(num[i]);
        }
        for (std::size_t i = listed; i < num.size(); ++i) num.info[i] = info_of(num[i]);
        std::size_t judged = 0;
        const status s = read_nodes(place != nullptr, judged);
        for (std::size_t i = 0; place && i < judged; ++i)
            if (!place->place_from_tensor(i)) return no_backend_for_memory(num[i]);
        if (!s) return s;
        if (lost_ != nullptr) return freed_buffer_error("scheduler", *lost_);
        return {};
    }

    // ok while every user buffer the last numbered graph reads exists: one lock.
    status check_user_buffers() const {
        const std::size_t dead = live_buffer_set()->first_dead(user_serials_);
        if (dead == user_serials_.size()) return {};
        return freed_buffer_error("scheduler", *user_serial_tensors_[dead]);
    }

    status no_backend_for_memory(const tensor& t) const {
        const buffer_handle* buf = buffer_of(t);
        const std::string where = buf ? "a buffer of type '" + std::string(buf->type().name()) + "'" : "host memory";
        std::string msg = "scheduler: tensor '" + t.name + "' (" + std::string(to_string(t.op)) + ") lives in " + where;
        bool any_reads = false;
        buffer_type_ref bt(cpu_buffer_type::instance());
        (void)memory_type(t, bt);
        for (std::size_t b = 0; b < nb_; ++b) any_reads = any_reads || ask_.set().supports_buffer_type(b, bt);
        msg += any_reads ? ", and no backend that can use that memory supports its op"
                         : ", which none of the scheduler's backends can use";
        return {errc::not_supported, msg};
    }

private:
    // Forgets the last graph, indexes g and sizes the per-tensor arrays (number() writes
    // every entry).
    void start(const graph& g, graph_numbering& num, assignment& asg) {
        num_ = &num;
        asg_ = &asg;
        num.assign(g);
        ask_.start(num);
        memo_ = {};
        lost_ = nullptr;
        user_serials_.clear();
        user_serial_tensors_.clear();
        asg.reset(num.size());
        num.info.resize(num.size());
    }

    // Reads each node, checks its sources and judges its rule; `judged`: the nodes done
    // (all, or those before the one that reads a later node). `placing`: the first pass
    // runs next (a source it has placed is not late).
    status read_nodes(bool placing, std::size_t& judged) {
        const graph_numbering& num = *num_;
        const std::size_t n_nodes = num.n_nodes();
        const std::span<const std::int32_t> bid = asg_->backend;
        for (std::size_t i = 0; i < n_nodes; ++i) {
            const auto& srcs = num.srcs(i);
            std::uint8_t bits = 0;
            unsigned set = 0;
#pragma GCC unroll 4
            for (std::size_t j = 0; j < max_srcs; ++j) {
                const auto k = static_cast<std::size_t>(srcs[j]);
                if (srcs[j] < 0) continue;
                if (k >= i && k < n_nodes) {
                    judged = i;
                    return out_of_order(i, k);
                }
                if (k >= i && (!placing || bid[k] < 0)) bits |= tensor_info::late_src;
                set |= 1u << j;
            }
            tensor_info& info = num_->info[i];
            info = info_of(num[i]);
            info.nsrc = static_cast<std::uint8_t>(std::bit_width(set));
            // the node's rule, judged once for every backend while the node is in cache
            if ((info.bits & tensor_info::computes) != 0 && why_undefined_given(num[i], set).empty())
                bits |= tensor_info::defined;
            info.bits |= bits;
        }
        judged = n_nodes;
        return {};
    }

    // What info_of learnt of the last buffer it met: tensors in a row mostly share one.
    // Buffers are told apart by serial: a freed buffer's address may belong to a new one.
    struct buffer_memo {
        const buffer_handle* buffer = nullptr;
        std::uint64_t serial = 0;
        std::uint32_t mem = 0;  // 1 + the index of its type in num_->types
        bool weights = false;   // a weights buffer
        bool held = false;      // one of the graph allocator's (memory placed again)
        bool alive = false;     // it exists (docs/lifetime.md); nothing else is read of a dead one
    };

    // Reads t once: what has_own_memory, memory_type and buffer_of would tell. Memory an
    // allocator placed t in and has freed since counts as none (t is placed again); a
    // user's tensor whose buffer was freed is remembered in lost_ (number() reports it).
    [[gnu::always_inline]] tensor_info info_of(const tensor& t) {
        std::uint8_t bits = 0;
        if (t.has_flag(tensor_flag::input)) bits |= tensor_info::input;
        if (is_view_op(t.op))
            bits |= tensor_info::view_op;
        else if (t.op != op_kind::none)
            bits |= tensor_info::computes;
        const tensor& root = t.view_src != nullptr ? *t.view_src : t;
        const buffer_handle* b = root.buffer;
        if (b != nullptr && (b != memo_.buffer || root.buffer_serial != memo_.serial)) remember_buffer(root);
        if (b != nullptr && !memo_.alive) {
            if (root.placer == placed_by::user && lost_ == nullptr) lost_ = &t;
            return {t.op, bits, 0, 0};
        }
        if (b != nullptr && memo_.weights) bits |= tensor_info::weights;
        std::uint32_t mem = 0;
        if (t.data != nullptr || root.data != nullptr) { // has memory; its own unless the allocator's
            if (b == nullptr)
                mem = 1 + ask_.type_index(buffer_type_ref(cpu_buffer_type::instance()));
            else if (root.data == nullptr || !memo_.held)
                mem = memo_.mem;
        }
        if (mem != 0) bits |= tensor_info::memory;
        return {t.op, bits, 0, mem};
    }

    // The memo for root's buffer; a user buffer that exists joins user_serials_, which
    // compute checks again when it reuses the allocation.
    void remember_buffer(const tensor& root) {
        memo_ = {root.buffer, root.buffer_serial};
        memo_.held = galloc_.owns_serial(root.buffer, root.buffer_serial);
        memo_.alive = memo_.held || buffer_alive(root);
        if (!memo_.alive) return;
        memo_.mem = 1 + ask_.type_index(root.buffer->type());
        memo_.weights = root.buffer->usage() == buffer_usage::weights;
        if (memo_.held) return;
        // few distinct buffers per graph: a linear look, bounded for odd graphs
        if (user_serials_.size() < 64 &&
            std::find(user_serials_.begin(), user_serials_.end(), root.buffer_serial) != user_serials_.end())
            return;
        user_serials_.push_back(root.buffer_serial);
        user_serial_tensors_.push_back(&root);
    }

    status out_of_order(std::size_t i, std::size_t k) const {
        const auto name = [](const tensor& t) {
            return (t.name.empty() ? std::string("(unnamed)") : "'" + t.name + "'") + " (" +
                   std::string(to_string(t.op)) + ")";
        };
        return {errc::invalid_argument,
                "scheduler: node " + std::to_string(i) + " " + name((*num_)[i]) + " reads node " + std::to_string(k) + " " +
                    name((*num_)[k]) + ", which the graph computes " + (k == i ? "as itself" : "after it") +
                    ": a source was edited after the graph was built (a cycle, or an order build_forward did "
                    "not make); build the graph again"};
    }

    // Memory of t's own that placement must respect: not none, not this scheduler's
    // compute buffers (a tensor placed by an earlier alloc_graph is placed again), and not
    // a buffer since freed.
    bool has_own_memory(const tensor& t) const noexcept {
        const tensor& root = t.view_src != nullptr ? *t.view_src : t;
        return has_memory(t) && !galloc_.holds(root) && buffer_alive(root);
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

    const graph_allocator& galloc_;
    backend_queries<Set>& ask_;
    std::size_t nb_;
    graph_numbering* num_ = nullptr; // the numbering being made
    assignment* asg_ = nullptr;
    buffer_memo memo_;
    const tensor* lost_ = nullptr;                   // a user's tensor whose buffer was freed
    std::vector<std::uint64_t> user_serials_;        // the user buffers the numbered graph reads
    std::vector<const tensor*> user_serial_tensors_; // a tensor in each (for messages)
};

} // namespace backplane::detail
