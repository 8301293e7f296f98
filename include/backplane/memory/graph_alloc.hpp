#pragma once
// The graph allocator: gives every tensor of a compute graph an address so that memory is
// reused as soon as nothing reads it any more.
//
//     graph_allocator galloc(cpu_buffer_type::instance());
//     if (auto s = galloc.reserve(worst_case_graph); !s) return s; // size the buffers once
//     for (;;) {
//         graph g = build_step(ctx);                       // a fresh no_alloc context
//         if (auto s = galloc.alloc_graph(g); !s) return s; // addresses, no growth
//         ...compute g...
//     }
//
// Buffer ids. Each node and leaf lives in the buffer of one buffer type, named by an id:
// an index into the list given to the constructor (all 0 by default). The scheduler
// passes one id per node and leaf. Ids whose buffer types are the same object share one
// planner and one set of buffers, as ggml does: two backends on one device then reuse each
// other's freed memory.
//
// Plan, then replay. reserve() simulates the allocation of a graph (the algorithm below),
// records where each tensor goes, and allocates the real buffers to the peak it reached
// (growing only; a buffer is never shrunk). alloc_graph() first checks whether the graph
// has the same structure as the recorded plan (same tensors in the same roles, same
// flags, same buffer ids, layouts that allow the same in-place reuse) and no tensor is
// larger than planned; then it only binds the recorded addresses, which is what makes it
// cheap enough to run every step. Any other graph is planned anew, and the buffers grow if
// the new plan needs more (counted by n_reallocs()). ggml only compares node counts and
// sizes before replaying; comparing the structure as well means that a different graph
// with the same counts can never be given addresses planned for another graph.
//
// Tensors that already have data (weights, a user's host tensor) are left alone and never
// reused. Tensors that point into this allocator's own buffers (placed by an earlier call)
// are placed again. When the allocator grows, tensors placed by earlier calls point to
// released memory: allocate their graph again before using them. Lifetime
// (docs/lifetime.md): a tensor a graph allocator placed in a buffer since freed (this
// one's before it grew, or one destroyed since) is placed again like a tensor without
// data; a user's tensor whose buffer was freed (weights) is an invalid_argument status
// naming it. Buffers are told apart by serial, never by address: a new buffer may reuse a
// freed one's.
//
// Failures (a tensor larger than the buffer type's max_size, a buffer the buffer type
// cannot allocate, host memory) are statuses. The allocator stays usable: nothing leaks,
// and the next call plans and allocates again.
//
// Not thread-safe: one allocator per thread (the scheduler owns one).

#include <backplane/core/detail/describe.hpp>
#include <backplane/core/error.hpp>
#include <backplane/core/graph.hpp>
#include <backplane/core/tensor.hpp>
#include <backplane/memory/buffer.hpp>
#include <backplane/memory/detail/align.hpp>
#include <backplane/memory/detail/dynamic_allocator.hpp>
#include <backplane/core/graph_index.hpp>
#include <backplane/memory/tensor_alloc.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <new>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace backplane {

/// Ops whose kernels may write their result over src[0] when both have the same layout:
/// element-wise ops, and row-wise ops that read a whole row before writing it.
constexpr bool can_inplace(op_kind op) noexcept { return traits(op).inplace; }

/// A tensor placed where a listed block is (alloc_topology::bind_like).
struct alloc_binding {
    tensor* t = nullptr;
    std::int32_t position = -1; ///< in the list of nodes followed by the list of leafs
};

/// What a caller may already know of the topology of the lists it passes to
/// graph_allocator (a scheduler numbers the graph anyway): positions in the list of nodes
/// followed by the list of leafs. `srcs[k][j]` is where node k's source j is listed and
/// `view_srcs[s]` where entry s's view source is (-1: none, or not known). Each position
/// is checked against the tensor it names; a wrong or unknown one is looked up instead.
/// With a topology the caller also promises that no tensor is listed twice (that check
/// needs the lookup this saves).
///
/// With `sources_given`, `srcs` and `view_srcs` are the truth rather than hints: a listed
/// position is taken as node k's source j whatever tensor node k's src[j] names (only -1
/// is looked up), and so for view sources. A scheduler states this way that a node reads
/// its copy of a source, without pointing the user's node at the copy.
///
/// `bind_like` lists tensors that are not in the lists but get the address of a listed
/// block (its position): each binding places the tensor there, replays included, and
/// takes no part in the plan. A scheduler rotates a graph input through pipeline slots
/// this way: the slots are listed alike in every rotation, so the plan replays, and the
/// input itself is bound to the current one.
struct alloc_topology {
    std::span<const std::array<std::int32_t, max_srcs>> srcs;
    std::span<const std::int32_t> view_srcs;
    bool sources_given = false;
    std::span<const alloc_binding> bind_like{};
};

/// Called by graph_allocator::alloc_graph() before it plans a graph anew (tensors may then
/// move, and buffers grow): a caller with work in flight on the current addresses waits
/// for it there. A failed status stops the allocation.
struct alloc_replan_hook {
    status (*fn)(void* context) = nullptr;
    void* context = nullptr;
};

/// Assigns addresses to the tensors of compute graphs, reusing memory by liveness.
///
/// The algorithm (DESIGN.md section 4, reproducing ggml's gallocr), run by reserve() and
/// by alloc_graph() when it must plan:
///  1. Liveness: count, for every tensor, the nodes that read it (children) and the views
///     of it. A tensor is freed when both counts reach zero; a view pins its source
///     instead of itself, since views never own memory.
///  2. Input-flagged tensors are placed first and are never freed, and output-flagged ones
///     are never freed: the user writes inputs before compute and reads outputs after, so
///     nothing else may overlap them. Then every leaf is placed (as ggml does at HEAD),
///     before any node: a leaf is data the user provides after allocation, so it must not
///     share memory with nodes computed before its readers; it is freed after its last
///     reader like any tensor.
///  3. For each node in order: place its not-yet-placed sources (only tensors that are
///     neither nodes nor leafs of the graph get here), then the node, then drop one child
///     of each source and free those that nothing reads any more.
///  4. In place: a node whose op allows it (can_inplace) takes over src[0]'s memory
///     instead of a new block when src[0] is this allocator's, not input or output, in the
///     same buffer type, has the same layout (same_layout), is read by no one after this
///     node (one remaining child) and has no live views. (Unlike ggml, a node never moves
///     into another buffer type's memory this way, and an input node is never placed in
///     place: it gets fresh memory.) A view src[0] qualifies when it starts
///     at its source's offset 0 and that source has this view as its only live view and no
///     remaining children; the node then takes the whole source block, returning any tail
///     it does not need. Only src[0]: kernels write their result in src[0]'s element order.
///  5. Blocks are sizes rounded up to the alignment, placed best-fit in address-sorted
///     free lists per chunk, merged on free (detail::dynamic_allocator). A buffer type's
///     max_size caps each chunk: a block that fits in no chunk opens a new one, and a
///     tensor larger than max_size is an error. There are no fixed limits on blocks or
///     chunks.
///
/// A class template only so that its members are analysed where a graph is allocated
/// and nowhere else: `graph_allocator` is basic_graph_allocator<>, and a translation unit
/// that includes <backplane/backplane.hpp> without allocating a graph pays little for it
/// (docs/benchmarks.md, compile time).
template <class Tag = void>
class basic_graph_allocator {
public:
    /// One buffer type (buffer id 0).
    explicit basic_graph_allocator(buffer_type_ref bt) : basic_graph_allocator(std::vector<buffer_type_ref>{bt}) {}

    /// Buffer id i uses buffer_types[i]. Ids naming the same buffer type object share their
    /// buffers. Throws backplane::error (invalid_argument) for an empty list.
    explicit basic_graph_allocator(std::vector<buffer_type_ref> buffer_types) {
        if (buffer_types.empty()) throw error("graph_allocator: needs at least one buffer type");
        pool_of_id_.reserve(buffer_types.size());
        for (std::size_t id = 0; id < buffer_types.size(); ++id) {
            const buffer_type_ref bt = buffer_types[id];
            std::uint32_t p = 0;
            while (p < pools_.size() && !(pools_[p].type == bt)) ++p;
            if (p == pools_.size()) {
                pool np(bt);
                np.alignment = detail::sane_alignment(bt.alignment());
                np.max_size = bt.max_size();
                np.first_id = static_cast<int>(id);
                pools_.push_back(std::move(np));
            }
            pool_of_id_.push_back(p);
        }
    }

    basic_graph_allocator(basic_graph_allocator&&) noexcept = default;
    basic_graph_allocator& operator=(basic_graph_allocator&&) noexcept = default;
    basic_graph_allocator(const basic_graph_allocator&) = delete;
    basic_graph_allocator& operator=(const basic_graph_allocator&) = delete;
    ~basic_graph_allocator() = default;

    /// Plans `g` and allocates (or grows) the buffers to the peak of every buffer id,
    /// without giving g's tensors addresses. `node_buffer_ids` (one per node) and
    /// `leaf_buffer_ids` (one per leaf) choose buffer ids; empty means all 0.
    [[nodiscard]] status reserve(const graph& g, std::span<const int> node_buffer_ids = {},
                                 std::span<const int> leaf_buffer_ids = {}) {
        return reserve_analysed([&] { return analyze(g, node_buffer_ids, leaf_buffer_ids); });
    }
    /// reserve() for a graph given as its node and leaf lists (topological node order).
    [[nodiscard]] status reserve(std::span<tensor* const> nodes, std::span<tensor* const> leafs,
                                 std::span<const int> node_buffer_ids = {}, std::span<const int> leaf_buffer_ids = {},
                                 const alloc_topology* topology = nullptr) {
        return reserve_analysed([&] { return analyze(nodes, leafs, node_buffer_ids, leaf_buffer_ids, topology); });
    }

    /// Gives every node and leaf of `g` without data (and every source they read) an
    /// address: replays the recorded plan when g matches it, otherwise plans g and grows
    /// the buffers if needed (see n_reallocs()). Views are initialised on their sources.
    /// Buffer ids as for reserve(). The graph is indexed from the ids it recorded when it
    /// was built (core/graph_index.hpp), without a lookup.
    [[nodiscard]] status alloc_graph(const graph& g, std::span<const int> node_buffer_ids = {},
                                     std::span<const int> leaf_buffer_ids = {}) {
        return alloc_analysed([&] { return analyze(g, node_buffer_ids, leaf_buffer_ids); }, {}, {});
    }
    /// alloc_graph() for a graph given as its node and leaf lists (topological node order).
    /// A topology (see alloc_topology) saves the tensor lookups that dominate the cost of
    /// a replay.
    [[nodiscard]] status alloc_graph(std::span<tensor* const> nodes, std::span<tensor* const> leafs,
                                     std::span<const int> node_buffer_ids = {},
                                     std::span<const int> leaf_buffer_ids = {},
                                     const alloc_topology* topology = nullptr, alloc_replan_hook before_replan = {}) {
        return alloc_analysed([&] { return analyze(nodes, leafs, node_buffer_ids, leaf_buffer_ids, topology); },
                              topology != nullptr ? topology->bind_like : std::span<const alloc_binding>{},
                              before_replan);
    }

    /// Plans a graph as alloc_graph() would and returns the bytes each buffer id would
    /// need (under the lowest id sharing its buffer type and 0 under the others, as
    /// buffer_size() reports), without allocating a buffer or touching a tensor. A graph
    /// the recorded plan fits is answered from that plan, which stays valid (the next
    /// alloc_graph() replays it); otherwise the graph is planned and the next
    /// alloc_graph() plans again.
    [[nodiscard]] result<std::vector<std::size_t>> measure(std::span<tensor* const> nodes,
                                                           std::span<tensor* const> leafs,
                                                           std::span<const int> node_buffer_ids = {},
                                                           std::span<const int> leaf_buffer_ids = {},
                                                           const alloc_topology* topology = nullptr) {
        std::vector<std::size_t> need;
        status s = guarded([&]() -> status {
            if (status st = analyze(nodes, leafs, node_buffer_ids, leaf_buffer_ids, topology); !st) return st;
            if (!plan_matches()) { // the planners then still hold the recorded plan's peaks
                if (status st = plan(); !st) return st;
                plan_valid_ = false; // planned, not bound to buffers
            }
            need.assign(pool_of_id_.size(), 0);
            for (const pool& p : pools_)
                for (std::size_t c = 0; c < p.planner.n_chunks(); ++c)
                    need[static_cast<std::size_t>(p.first_id)] += p.planner.peak(c);
            return {};
        });
        if (!s) return s;
        return need;
    }

    /// Number of buffer ids (the length of the constructor's list).
    [[nodiscard]] std::size_t n_buffers() const noexcept { return pool_of_id_.size(); }
    /// The buffer type of buffer id `id`; throws backplane::error (out_of_range) for an id
    /// outside 0..n_buffers()-1.
    [[nodiscard]] buffer_type_ref buffer_type(int id) const {
        if (!valid_id(id))
            throw error("graph_allocator::buffer_type: no buffer id " + std::to_string(id), errc::out_of_range);
        return pools_[pool_of(id)].type;
    }
    /// Bytes allocated for buffer id `id`, all chunks together. Ids sharing a buffer type
    /// report it under the lowest of them and 0 under the others, so that the sum over ids
    /// is the memory actually held. 0 for an id out of range.
    [[nodiscard]] std::size_t buffer_size(int id) const noexcept {
        if (!valid_id(id)) return 0;
        const pool& p = pools_[pool_of(id)];
        if (p.first_id != id) return 0;
        std::size_t n = 0;
        for (const auto& c : p.chunks)
            if (c) n += c->size();
        return n;
    }
    /// Chunks (real buffers) held for buffer id `id`: more than one only when a plan
    /// needed more than the buffer type's max_size.
    [[nodiscard]] std::size_t n_chunks(int id) const noexcept {
        return valid_id(id) ? pools_[pool_of(id)].chunks.size() : 0;
    }
    /// Chunk `chunk` of buffer id `id` (usage compute), or null when there is none.
    [[nodiscard]] buffer_handle* buffer(int id, std::size_t chunk = 0) const noexcept {
        if (!valid_id(id)) return nullptr;
        const pool& p = pools_[pool_of(id)];
        return chunk < p.chunks.size() ? p.chunks[chunk].get() : nullptr;
    }
    /// How many alloc_graph() calls had to allocate or grow a buffer. After a reserve()
    /// of the largest graph, it stays constant.
    [[nodiscard]] std::size_t n_reallocs() const noexcept { return n_reallocs_; }
    /// How many alloc_graph() calls planned anew instead of replaying the recorded plan.
    [[nodiscard]] std::size_t n_plans() const noexcept { return n_plans_; }
    /// True when t's data lies in this allocator's buffers (placed by an earlier call, and
    /// placed again by the next one).
    [[nodiscard]] bool holds(const tensor& t) const noexcept {
        return t.data != nullptr && owns_serial(t.buffer, t.buffer_serial);
    }
    /// True when b is one of this allocator's buffers (b must exist: a freed buffer's
    /// address may be reused; holds() and owns_serial() tell them apart).
    [[nodiscard]] bool owns(const buffer_handle* b) const noexcept {
        if (b == nullptr) return false;
        for (const pool& p : pools_)
            for (const auto& c : p.chunks)
                if (c.get() == b) return true;
        return false;
    }
    /// True when b, whose serial was `serial` when a tensor was placed in it, is one of this
    /// allocator's buffers now. Reads nothing through b (it may be gone).
    [[nodiscard]] bool owns_serial(const buffer_handle* b, std::uint64_t serial) const noexcept {
        if (b == nullptr) return false;
        for (const pool& p : pools_)
            for (const auto& c : p.chunks)
                if (c.get() == b) return c->serial() == serial;
        return false;
    }

private:
    // -- per-graph facts --------------------------------------------------------------------

    // A tensor's role in the graph, as far as planning depends on it. Two graphs whose
    // slot_key lists are equal get the same plan (up to sizes), so replay is safe.
    enum key_bit : std::uint32_t {
        bit_input = 1u << 0,
        bit_output = 1u << 1,
        bit_external = 1u << 2, // has data this allocator does not own: never placed
        bit_view = 1u << 3,
        bit_offs0 = 1u << 4,   // a view at offset 0 of its source
        bit_inplace = 1u << 5, // a node whose op and layout allow taking over src[0]
    };
    struct slot_key {
        graph_index::src_numbers src = graph_index::no_srcs; // slots of a node's sources
        std::int32_t view_src = -1;
        std::uint32_t pool = 0;
        std::uint32_t bits = 0;
        friend bool operator==(const slot_key&, const slot_key&) = default;
    };
    static_assert(std::has_unique_object_representations_v<slot_key>, "plan_matches compares keys bytewise");
    static constexpr std::size_t too_large = std::numeric_limits<std::size_t>::max();
    static constexpr std::uint32_t unknown_pool = std::numeric_limits<std::uint32_t>::max(); // while analysed

    // -- the plan -----------------------------------------------------------------------------

    enum class place_kind : std::uint8_t { none, block, view };
    struct placement {
        place_kind kind = place_kind::none;
        std::uint32_t pool = 0;
        std::uint32_t chunk = 0;
        std::size_t offset = 0;
        std::size_t size = 0; // bytes planned: a later tensor in this slot may not need more
    };

    // -- simulation state per slot -------------------------------------------------------------

    struct sim_state {
        std::int32_t n_children = 0;
        std::int32_t n_views = 0;
        bool placed = false;
        bool pinned = false;     // input or output (or the source of one): never freed or taken
        bool owns_block = false; // holds `addr` and must free it
        std::uint32_t pool = 0;
        detail::dynamic_allocator::address addr{};
        std::size_t size = 0;
    };

    struct pool {
        explicit pool(buffer_type_ref t) noexcept : type(t) {}
        buffer_type_ref type;
        std::size_t alignment = 1;
        std::size_t max_size = 0;
        int first_id = 0;
        detail::dynamic_allocator planner;
        std::vector<buffer_ptr> chunks; // real buffers, one per planned chunk (null after a failure)
    };

    [[nodiscard]] bool valid_id(int id) const noexcept {
        return id >= 0 && static_cast<std::size_t>(id) < pool_of_id_.size();
    }
    [[nodiscard]] std::uint32_t pool_of(int id) const noexcept { return pool_of_id_[static_cast<std::size_t>(id)]; }

    template <class F>
    status guarded(F&& f) {
        try {
            return f();
        } catch (const std::bad_alloc&) {
            plan_valid_ = false;
            return {errc::alloc_failed, "graph_allocator: out of host memory"};
        }
    }

    // reserve() of the graph `analyse` indexes.
    template <class Analyse>
    status reserve_analysed(Analyse&& analyse) {
        return guarded([&]() -> status {
            if (status s = analyse(); !s) return s;
            if (status s = plan(); !s) return s;
            bool grew = false;
            return ensure_buffers(grew);
        });
    }

    // alloc_graph() of the graph `analyse` indexes.
    template <class Analyse>
    status alloc_analysed(Analyse&& analyse, std::span<const alloc_binding> bind_like, alloc_replan_hook before_replan) {
        return guarded([&]() -> status {
            if (status s = analyse(); !s) return s;
            if (!plan_matches()) {
                if (before_replan.fn != nullptr)
                    if (status s = before_replan.fn(before_replan.context); !s) return s;
                if (status s = plan(); !s) return s;
                ++n_plans_;
                bool grew = false;
                status s = ensure_buffers(grew);
                if (grew) ++n_reallocs_;
                if (!s) return s;
            }
            return bind(bind_like);
        });
    }

    // What t's memory is to this allocator.
    enum class memory_kind : std::uint8_t {
        none,     // no data, or data an allocator placed in a buffer since freed: place it
        held,     // in this allocator's buffers: place it again
        external, // the user's (a live buffer, or context host data): leave it alone
        lost,     // the user's, in a buffer since freed: an error
    };
    [[nodiscard]] memory_kind memory_of(const tensor& t) noexcept {
        if (t.data == nullptr) return memory_kind::none;
        if (t.buffer == nullptr) return memory_kind::external;
        if (owns_serial(t.buffer, t.buffer_serial)) return memory_kind::held;
        if (t.buffer_serial == 0 || t.buffer_serial != alive_memo_) { // consecutive tensors mostly share a buffer
            if (!buffer_alive(t)) return t.placer == placed_by::allocator ? memory_kind::none : memory_kind::lost;
            alive_memo_ = t.buffer_serial;
        }
        return memory_kind::external;
    }

    // Indexes the graph (nodes, then leafs, then sources and view sources found outside
    // both lists: core/graph_index.hpp) and computes the tensors' keys and sizes. Runs on
    // every call, so it reuses its vectors, and builds no status until something is wrong.
    status analyze(std::span<tensor* const> nodes, std::span<tensor* const> leafs, std::span<const int> node_ids,
                   std::span<const int> leaf_ids, const alloc_topology* topo) {
        if (status s = check_ids(nodes.size(), leafs.size(), node_ids, leaf_ids); !s) return s;
        const known_positions known =
            topo != nullptr ? known_positions{topo->srcs, topo->view_srcs, topo->sources_given} : known_positions{};
        const std::size_t bad = index_.assign(nodes, leafs, known);
        if (bad < nodes.size()) return listing_error(nodes[bad], "node", bad);
        if (bad < nodes.size() + leafs.size()) return listing_error(leafs[bad - nodes.size()], "leaf", bad - nodes.size());
        return analyze_index(node_ids, leaf_ids);
    }
    status analyze(const graph& g, std::span<const int> node_ids, std::span<const int> leaf_ids) {
        if (status s = check_ids(g.n_nodes(), g.n_leafs(), node_ids, leaf_ids); !s) return s;
        index_.assign(g);
        return analyze_index(node_ids, leaf_ids);
    }

    status check_ids(std::size_t n_nodes, std::size_t n_leafs, std::span<const int> node_ids,
                     std::span<const int> leaf_ids) const {
        if (!node_ids.empty() && node_ids.size() != n_nodes)
            return {errc::invalid_argument, "graph_allocator: " + std::to_string(node_ids.size()) +
                                                " node buffer ids for " + std::to_string(n_nodes) + " nodes"};
        if (!leaf_ids.empty() && leaf_ids.size() != n_leafs)
            return {errc::invalid_argument, "graph_allocator: " + std::to_string(leaf_ids.size()) +
                                                " leaf buffer ids for " + std::to_string(n_leafs) + " leafs"};
        if (n_nodes + n_leafs >= static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max() / 2))
            return {errc::invalid_argument, "graph_allocator: graph too large"};
        return {};
    }

    // The keys and sizes of the indexed tensors.
    status analyze_index(std::span<const int> node_ids, std::span<const int> leaf_ids) {
        n_nodes_ = index_.n_nodes();
        n_leafs_ = index_.n_leafs();
        alive_memo_ = 0; // buffers may have been freed since the last call
        const std::size_t total = index_.size();
        keys_.resize(total);
        sizes_.resize(total);
        if (status s = key_pools(node_ids, leaf_ids); !s) return s;
        // local views: the calls in the loop would make the compiler reload the members
        const std::span<slot_key> keys = keys_;
        const std::span<std::size_t> sizes = sizes_;
        for (std::size_t s = 0; s < total; ++s) {
            slot_key& k = keys[s];
            k.src = s < n_nodes_ ? index_.srcs(s) : graph_index::no_srcs;
            k.view_src = index_.view_src(s);
            const tensor& t = index_[s];
            const memory_kind mem = memory_of(t);
            if (mem == memory_kind::lost) return detail::freed_buffer_error("graph_allocator", t);
            k.bits = key_bits(s, t, mem);
            sizes[s] = (k.bits & (bit_view | bit_external)) == 0 ? block_size(t, pools_[k.pool]) : 0;
        }
        return {};
    }

    // Each tensor's pool: its buffer id's. A tensor read but listed nowhere is placed in
    // the buffer of the first tensor that reads it (as ggml places sources in their
    // consumer's buffer).
    status key_pools(std::span<const int> node_ids, std::span<const int> leaf_ids) {
        const std::size_t n = n_nodes_ + n_leafs_;
        for (std::size_t s = 0; s < n; ++s) {
            const bool node = s < n_nodes_;
            const std::span<const int> ids = node ? node_ids : leaf_ids;
            const std::size_t i = node ? s : s - n_nodes_;
            const int id = ids.empty() ? 0 : ids[i];
            if (!valid_id(id))
                return {errc::invalid_argument, std::string("graph_allocator: ") + (node ? "node " : "leaf ") +
                                                    std::to_string(i) + " " + detail::describe(&index_[s]) +
                                                    " has buffer id " + std::to_string(id) + ", outside 0.." +
                                                    std::to_string(n_buffers() - 1)};
            keys_[s].pool = pool_of(id);
        }
        if (index_.size() == n) return {};
        for (std::size_t s = n; s < index_.size(); ++s) keys_[s].pool = unknown_pool;
        const auto read = [&](std::size_t reader, std::int32_t r) {
            if (r >= 0 && keys_[static_cast<std::size_t>(r)].pool == unknown_pool)
                keys_[static_cast<std::size_t>(r)].pool = keys_[reader].pool;
        };
        for (std::size_t s = 0; s < index_.size(); ++s) {
            for (std::size_t j = 0; s < n_nodes_ && j < max_srcs; ++j) read(s, index_.src(s, j));
            read(s, index_.view_src(s));
        }
        return {};
    }

    std::uint32_t key_bits(std::size_t s, const tensor& t, memory_kind mem) const {
        std::uint32_t bits = 0;
        if (t.has_flag(tensor_flag::input)) bits |= bit_input;
        if (t.has_flag(tensor_flag::output)) bits |= bit_output;
        if (mem == memory_kind::external) bits |= bit_external;
        if (t.view_src != nullptr) {
            bits |= bit_view;
            if (t.view_offs == 0) bits |= bit_offs0;
        }
        const std::int32_t src0 = s < n_nodes_ ? index_.src(s, 0) : -1;
        if (src0 >= 0 && can_inplace(t.op) && same_layout(t, index_[static_cast<std::size_t>(src0)])) bits |= bit_inplace;
        return bits;
    }

    // At least one alignment unit, so every block has a distinct address range.
    static std::size_t block_size(const tensor& t, const pool& p) {
        const auto aligned = detail::align_up(std::max<std::size_t>(p.type.alloc_size(t), 1), p.alignment);
        return aligned ? *aligned : too_large;
    }

    static status listing_error(const tensor* t, const char* what, std::size_t i) {
        const std::string msg = std::string("graph_allocator: ") + what + " " + std::to_string(i);
        if (t == nullptr) return {errc::invalid_argument, msg + " is null"};
        return {errc::invalid_argument, msg + " " + detail::describe(t) + " appears twice in the graph"};
    }

    [[nodiscard]] bool plan_matches() const noexcept {
        const std::size_t n = keys_.size();
        if (!plan_valid_ || n_nodes_ != plan_nodes_ || n_leafs_ != plan_leafs_ || n != plan_keys_.size()) return false;
        // slot_key has no padding (checked below), so equal bytes are equal keys
        if (n != 0 && std::memcmp(keys_.data(), plan_keys_.data(), n * sizeof(slot_key)) != 0) return false;
        for (std::size_t s = 0; s < n; ++s)
            if (sizes_[s] > plan_[s].size) return false; // 0 for views and external slots
        return true;
    }

    // Simulates the allocation of the analysed graph (the class comment's algorithm) and
    // records the plan. Touches no tensor and no real buffer.
    status plan() {
        plan_valid_ = false;
        for (pool& p : pools_) p.planner.reset(p.max_size);
        const std::size_t n = keys_.size();
        sim_.assign(n, sim_state{});

        for (std::size_t s = 0; s < n; ++s) {
            const slot_key& k = keys_[s];
            for (std::int32_t src : k.src)
                if (src >= 0) ++sim_[static_cast<std::size_t>(src)].n_children;
            if (k.view_src >= 0) ++sim_[static_cast<std::size_t>(k.view_src)].n_views;
            sim_[s].pool = k.pool;
            if (k.bits & (bit_input | bit_output)) {
                sim_[s].pinned = true;
                if (k.view_src >= 0) sim_[static_cast<std::size_t>(k.view_src)].pinned = true;
            }
        }

        // Inputs first: they stay for the whole graph, so they go to the bottom where they
        // fragment nothing. Then every leaf: the user may write any leaf after allocation,
        // so a leaf must not share memory with a node that runs before its last reader.
        bool ok = true;
        for (std::size_t i = 0; ok && i < n_nodes_; ++i) {
            if (keys_[i].bits & bit_input) ok = place(i);
            for (std::int32_t src : keys_[i].src)
                if (ok && src >= 0 && (keys_[static_cast<std::size_t>(src)].bits & bit_input))
                    ok = place(static_cast<std::size_t>(src));
        }
        for (std::size_t s = n_nodes_; ok && s < n_nodes_ + n_leafs_; ++s)
            if (keys_[s].bits & bit_input) ok = place(s);
        for (std::size_t s = n_nodes_; ok && s < n_nodes_ + n_leafs_; ++s) ok = place(s);

        for (std::size_t i = 0; ok && i < n_nodes_; ++i) {
            for (std::int32_t src : keys_[i].src) // sources are nearly always placed already
                if (ok && src >= 0 && !sim_[static_cast<std::size_t>(src)].placed)
                    ok = place(static_cast<std::size_t>(src));
            if (ok) ok = place(i);
            for (std::int32_t src : keys_[i].src)
                if (src >= 0) drop_child(static_cast<std::size_t>(src));
        }
        if (!ok) return too_large_error(failed_slot_);

        plan_.resize(n);
        for (std::size_t s = 0; s < n; ++s) {
            const sim_state& st = sim_[s];
            placement& pl = plan_[s];
            if (keys_[s].bits & bit_external) {
                pl = placement{};
            } else if (keys_[s].bits & bit_view) {
                pl = placement{place_kind::view};
            } else {
                pl = placement{place_kind::block, st.pool, st.addr.chunk, st.addr.offset, sizes_[s]};
            }
        }
        plan_keys_ = keys_; // copy: keys_ keeps describing the graph being bound
        plan_nodes_ = n_nodes_;
        plan_leafs_ = n_leafs_;
        return {};
    }

    // Places slot s (and, for a view, its source). False when a tensor is larger than its
    // buffer type's max_size; failed_slot_ then names it.
    bool place(std::size_t s) {
        sim_state& st = sim_[s];
        const slot_key& k = keys_[s];
        if (st.placed || (k.bits & bit_external)) return true;
        st.placed = true;
        if (k.bits & bit_view) // views own nothing; their source must exist
            return k.view_src < 0 || place(static_cast<std::size_t>(k.view_src));
        const std::size_t need = sizes_[s];
        pool& p = pools_[k.pool];
        if (need > p.max_size) { // too_large included
            failed_slot_ = s;
            return false;
        }

        if ((k.bits & bit_inplace) && !(k.bits & bit_input) && k.src[0] >= 0) {
            if (const std::size_t donor = inplace_donor(s, static_cast<std::size_t>(k.src[0])); donor != npos) {
                sim_state& d = sim_[donor];
                st.addr = d.addr;
                st.size = d.size;
                st.owns_block = true;
                d.owns_block = false;
                if (st.size > need) { // a larger source block: keep what we need, free the tail
                    p.planner.release({st.addr.chunk, st.addr.offset + need}, st.size - need);
                    st.size = need;
                }
                return true;
            }
        }
        st.addr = p.planner.allocate(need);
        st.size = need;
        st.owns_block = true;
        return true;
    }

    status too_large_error(std::size_t s) const {
        const pool& p = pools_[keys_[s].pool];
        return {errc::alloc_failed, "graph_allocator: tensor " + detail::describe(&index_[s]) + " needs " +
                                        std::to_string(p.type.alloc_size(index_[s])) + " bytes, more than the " +
                                        std::to_string(p.max_size) + " bytes buffer type '" +
                                        std::string(p.type.name()) + "' can allocate at once"};
    }

    // The slot whose block node s may take over through its src[0] `parent`, or npos.
    [[nodiscard]] std::size_t inplace_donor(std::size_t s, std::size_t parent) const noexcept {
        const sim_state& ps = sim_[parent];
        const slot_key& pk = keys_[parent];
        if ((pk.bits & bit_external) || !ps.placed || ps.pinned) return npos;
        if (ps.n_children != 1 || ps.n_views != 0) return npos; // someone reads it after s
        std::size_t donor = parent;
        if (pk.bits & bit_view) {
            if (!(pk.bits & bit_offs0) || pk.view_src < 0) return npos;
            donor = static_cast<std::size_t>(pk.view_src);
            const sim_state& r = sim_[donor];
            if ((keys_[donor].bits & bit_external) || r.pinned || r.n_views != 1 || r.n_children != 0) return npos;
        }
        const sim_state& d = sim_[donor];
        if (!d.owns_block || d.pool != sim_[s].pool || d.size < sizes_[s]) return npos;
        return donor;
    }

    // One reader of slot s is done; free s (or, for a view, its source) when nothing reads
    // it any more.
    void drop_child(std::size_t s) {
        sim_state& st = sim_[s];
        if (--st.n_children > 0 || st.n_views > 0) return;
        const slot_key& k = keys_[s];
        if (k.bits & bit_view) {
            if (k.view_src < 0) return;
            const auto r = static_cast<std::size_t>(k.view_src);
            if (--sim_[r].n_views == 0 && sim_[r].n_children == 0) free_block(r);
        } else {
            free_block(s);
        }
    }

    void free_block(std::size_t s) {
        sim_state& st = sim_[s];
        if (!st.owns_block || st.pinned) return;
        pools_[st.pool].planner.release(st.addr, st.size);
        st.owns_block = false;
    }

    // Makes every planned chunk exist with at least its peak size. A buffer that must grow
    // is released before its replacement is allocated, so that memory-tight devices do
    // not need room for both.
    status ensure_buffers(bool& grew) {
        for (pool& p : pools_) {
            const std::size_t n = p.planner.n_chunks();
            if (p.chunks.size() < n) p.chunks.resize(n);
            for (std::size_t c = 0; c < n; ++c) {
                const std::size_t need = p.planner.peak(c);
                if (p.chunks[c] && p.chunks[c]->size() >= need) continue;
                p.chunks[c].reset();
                grew = true;
                auto r = p.type.allocate(need);
                if (!r) {
                    plan_valid_ = false;
                    const status& e = *r.error_if();
                    return {e.code(),
                            "graph_allocator: allocating chunk " + std::to_string(c) + " (" + std::to_string(need) +
                                " bytes) of buffer type '" + std::string(p.type.name()) + "' failed: " + e.message(),
                            e.native()};
                }
                p.chunks[c] = std::move(*r);
                p.chunks[c]->set_usage(buffer_usage::compute);
            }
        }
        plan_valid_ = true;
        return {};
    }

    // Gives the analysed graph's tensors their planned addresses, and the bound tensors
    // those of their blocks.
    status bind(std::span<const alloc_binding> bind_like) {
        for (pool& p : pools_)
            for (auto& c : p.chunks)
                if (c) c->reset();
        for (std::size_t s = 0; s < index_.size(); ++s)
            if (plan_[s].kind == place_kind::block)
                if (status st = bind_block(index_[s], plan_[s]); !st) return st;
        for (const alloc_binding& b : bind_like) {
            const auto s = static_cast<std::size_t>(b.position);
            if (b.t == nullptr || b.position < 0 || s >= index_.size() || plan_[s].kind != place_kind::block ||
                b.t->nbytes() > index_[s].nbytes())
                return {errc::invalid_argument, "graph_allocator: a binding names no block that can hold " +
                                                    detail::describe(b.t)};
            if (status st = bind_block(*b.t, plan_[s]); !st) return st;
        }
        // views after blocks: a view's source is a block or already had data
        for (std::size_t s = 0; s < index_.size(); ++s)
            if (plan_[s].kind == place_kind::view)
                if (status st = init_view(index_[s]); !st) return st;
        return {};
    }

    status bind_block(tensor& t, const placement& pl) {
        buffer_handle& buf = *pools_[pl.pool].chunks[pl.chunk];
        place_tensor(t, buf, static_cast<std::byte*>(buf.base()) + pl.offset, placed_by::allocator);
        return buf.init_tensor(t);
    }

    static constexpr std::size_t npos = std::numeric_limits<std::size_t>::max();

    std::vector<pool> pools_;
    std::vector<std::uint32_t> pool_of_id_;

    // the graph being allocated (vectors reused across calls)
    graph_index index_;
    std::vector<slot_key> keys_;
    std::vector<std::size_t> sizes_; // aligned bytes each block slot needs (0: view/external)
    std::size_t n_nodes_ = 0;
    std::size_t n_leafs_ = 0;
    std::vector<sim_state> sim_;
    std::size_t failed_slot_ = 0; // the tensor place() could not place
    std::uint64_t alive_memo_ = 0; // a buffer serial memory_of() found alive in this call

    // the recorded plan
    std::vector<slot_key> plan_keys_;
    std::vector<placement> plan_;
    std::size_t plan_nodes_ = 0;
    std::size_t plan_leafs_ = 0;
    bool plan_valid_ = false; // plan_ fits the current buffers

    std::size_t n_reallocs_ = 0;
    std::size_t n_plans_ = 0;
};
using graph_allocator = basic_graph_allocator<>;

} // namespace backplane
