#pragma once
// The values the scheduler's stages pass to each other (docs/scheduler.md, "Stages"):
//
//   graph_numbering   the graph's tensors numbered densely, with what placement reads of
//                     each (sources, view source, op, flags, memory)
//   assignment        a backend and a cause per numbered tensor: what placement produces
//   split_plan        the splits, the inputs each copies, the copy slots and the nodes
//                     that read copies: what the allocator request, the executor and the
//                     explanation read
//
// Numbers: nodes [0, n_nodes) in graph order, leafs [n_nodes, n_nodes + n_leafs), then
// tensors reached only as a source or a view source.

#include <backplane/core/graph_index.hpp>
#include <backplane/core/tensor.hpp>
#include <backplane/memory/buffer.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <span>
#include <string_view>
#include <vector>

namespace backplane {

/// Why a tensor runs on its backend (docs/scheduler.md, the placement passes).
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

namespace detail {

/// t has memory: its own, or its view source's.
inline bool has_memory(const tensor& t) noexcept {
    return t.data != nullptr || (t.view_src != nullptr && t.view_src->data != nullptr);
}
/// The buffer holding t's memory (its view source's for a view), null for none or
/// context host data.
inline buffer_handle* buffer_of(const tensor& t) noexcept {
    return t.view_src != nullptr ? t.view_src->buffer : t.buffer;
}

/// What placement asks of each tensor, read once per graph: tensors are large and
/// scattered, these records small and dense.
struct tensor_info {
    static constexpr std::uint8_t input = 1;     ///< flagged input
    static constexpr std::uint8_t memory = 2;    ///< has memory of its own placement must respect
    static constexpr std::uint8_t weights = 4;   ///< lives in a weights buffer
    static constexpr std::uint8_t view_op = 8;   ///< a view op (computes nothing)
    static constexpr std::uint8_t computes = 16; ///< an op with a kernel (not none, not a view)
    /// A node reading a tensor that may still have no backend when pass_sources reaches
    /// it: a leaf the first pass left unplaced, a tensor outside the graph's lists, or a
    /// later node.
    static constexpr std::uint8_t late_src = 32;
    /// A node that computes and that its op defines (is_defined, core/op_traits.hpp):
    /// judged once, so the backends are asked only what they narrow.
    static constexpr std::uint8_t defined = 64;

    op_kind op;
    std::uint8_t bits;
    std::uint8_t nsrc; ///< a node's src[nsrc, max_srcs) are null (0 for other tensors)
    std::uint32_t mem; ///< 0: no memory of its own; else 1 + its buffer type's index in `types`
};

/// A graph's tensors, numbered (see the header comment), with what placement reads of
/// each.
struct graph_numbering : graph_index {
    std::vector<tensor_info> info;      ///< per tensor
    std::vector<buffer_type_ref> types; ///< the buffer types met, in order

    [[nodiscard]] bool has(std::size_t i, std::uint8_t bit) const noexcept { return (info[i].bits & bit) != 0; }
    [[nodiscard]] std::span<const std::int32_t> srcs_of(std::size_t i) const noexcept {
        return {srcs(i).data(), info[i].nsrc};
    }
};

/// A backend and a cause per numbered tensor (-1 and none: not placed yet).
struct assignment {
    std::vector<std::int32_t> backend;
    std::vector<placement_cause> cause;
    std::size_t unassigned = 0; ///< tensors without a backend yet

    void reset(std::size_t n) {
        backend.assign(n, -1);
        cause.assign(n, placement_cause::none);
        unassigned = n;
    }
    void push_unplaced() {
        backend.push_back(-1);
        cause.push_back(placement_cause::none);
        ++unassigned;
    }
    [[gnu::always_inline]] void set(std::size_t i, std::int32_t b, placement_cause c) noexcept {
        if (backend[i] < 0) --unassigned;
        backend[i] = b;
        cause[i] = c;
    }
};

/// Views whose memory is a node's (no memory of their own) follow that node, unless the
/// user placed them.
inline void follow_views(const graph_numbering& num, assignment& asg) {
    for (std::size_t i = 0; i < num.n_nodes(); ++i) {
        if (num.has(i, tensor_info::computes) || num.has(i, tensor_info::memory)) continue;
        const std::int32_t r = num.view_src(i);
        if (r < 0 || static_cast<std::size_t>(r) >= num.n_nodes() || asg.cause[i] == placement_cause::user) continue;
        asg.backend[i] = asg.backend[static_cast<std::size_t>(r)];
    }
}

/// One split: nodes [first, last) on `backend`, copying inputs [in0, in1) of the plan.
struct split_rec {
    std::int32_t backend;
    std::uint32_t first, last;
    std::uint32_t in0, in1;
};

/// Node `node` reads its source j from a copy (its shadow's src[j]): the copy slots
/// start at copy_base in split_plan::copies.
struct rewrite {
    std::uint32_t node;
    std::uint32_t j;
    std::uint32_t copy_base;
};

/// The splits of an assignment and the copies they need.
struct split_plan {
    std::vector<split_rec> splits;
    std::vector<std::int32_t> inputs;  ///< numbers of the tensors copied, split by split
    std::vector<tensor*> input_ptrs;   ///< the same tensors
    /// [number * n_backends + b]: the first of the tensor's n_copies slots on backend b
    /// in `copies`, -1: none.
    std::vector<std::int32_t> copy_of;
    std::vector<tensor*> copies;
    std::vector<std::int32_t> graph_inputs; ///< input tensors given pipeline slots
    std::vector<rewrite> rewrites;          ///< by node, in node order
    bool cross_inplace = false;             ///< a split reads another backend's compute memory in place
    /// By node: read by a later split (graph_view::kept: its backend must not fuse it
    /// away); empty with one split.
    std::vector<std::uint8_t> kept;
    /// Storage of the copies (the allocator request keeps its own helper tensors).
    std::deque<tensor> pool;
    std::size_t pool_used = 0;

    tensor& new_pool_tensor() {
        if (pool_used == pool.size()) pool.emplace_back();
        tensor& t = pool[pool_used++];
        t = tensor{};
        return t;
    }
};

/// A graph input that gets pipeline slots: an input-flagged leaf without memory of its
/// own (one the user placed keeps its place) with slots on its backend. The allocator
/// places it in the current slot, so its address moves at every allocation.
[[nodiscard]] inline bool is_rotated_input(const graph_numbering& num, const assignment& asg, const split_plan& plan,
                                           std::size_t n_backends, std::size_t i) noexcept {
    return i >= num.n_nodes() && i < num.n_nodes() + num.n_leafs() && num.has(i, tensor_info::input) &&
           !num.has(i, tensor_info::memory) &&
           plan.copy_of[i * n_backends + static_cast<std::size_t>(asg.backend[i])] >= 0;
}

} // namespace detail
} // namespace backplane
