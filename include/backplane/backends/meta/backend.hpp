#pragma once
// meta_backend: computes a graph of meta tensors on all devices of a meta device.
//
// Plan (once per graph; a graph computed again with the same nodes, shapes and sources
// reuses it; the plans of the 8 graphs computed last are kept):
//   1. states: every leaf's from its meta buffer (the split callback's), every node's
//      from the propagation rules (rules.hpp) or its view geometry (view_map.hpp). A
//      partial tensor that a consumer cannot take, or that is a graph output, is marked
//      for reduction after the node that computes it, and planning starts over. A node
//      no rule fits is an error naming the op, the tensors and their states.
//   2. per device, a graph of local tensors: each node with its local shape, sources
//      the devices' pieces (mirrored sources cut by a view where a rule asks), cut into
//      segments after each reduced node; every local node must be supported by its
//      device's backend, or planning fails naming it.
//   3. per device, a graph allocator sized by that device's own graph: compute memory
//      follows each device's share, not the whole graph.
//
// Compute: for each segment, every device computes its piece in parallel (one thread
// per device drives its backend), then the collective sums the reduced node's partial
// tensors across devices. Graph outputs are published to their meta buffer, from which
// reads gather them.

#include <backplane/backends/meta/collective.hpp>
#include <backplane/backends/meta/device.hpp>
#include <backplane/backends/meta/memory.hpp>
#include <backplane/backends/meta/rules.hpp>
#include <backplane/backends/meta/split.hpp>
#include <backplane/backends/meta/view_map.hpp>
#include <backplane/core/context.hpp>
#include <backplane/core/detail/describe.hpp>
#include <backplane/core/graph.hpp>
#include <backplane/core/graph_index.hpp>
#include <backplane/memory/graph_alloc.hpp>
#include <backplane/erased/any.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace backplane {

namespace meta {

/// What a plan decided, for users who check a graph before computing it (meta_backend::plan).
struct plan_summary {
    /// Every node's state, in graph order.
    std::vector<std::pair<const tensor*, split_state>> states;
    /// The nodes whose partial sums are reduced right after they are computed.
    std::vector<const tensor*> reduced;
    /// Bytes of compute memory each device's graph needs (its own graph allocator's plan).
    std::vector<std::size_t> compute_bytes;
    /// Segments each device computes (reductions + 1).
    std::size_t segments = 0;

    [[nodiscard]] const split_state* state_of(const tensor* t) const noexcept {
        for (const auto& [n, s] : states)
            if (n == t) return &s;
        return nullptr;
    }
};

/// Counters of a meta backend since it was made.
struct meta_stats {
    std::uint64_t computes = 0;
    std::uint64_t plans = 0;       ///< plans built (a graph seen for the first time)
    std::uint64_t reductions = 0;  ///< all-reduces run
    std::uint64_t bytes_moved = 0; ///< bytes the collective copied between devices
    /// bytes this process received from the others (meta_params::processes): all-reduced
    /// tensors, counted once each, and gathered outputs
    std::uint64_t process_bytes = 0;
};

namespace detail {

struct device_graph {
    context ctx{context_params{.no_alloc = true}};
    std::vector<tensor*> nodes;
    std::vector<tensor*> leafs;
    std::vector<std::size_t> cuts; ///< segment i is nodes [cuts[i - 1], cuts[i]) (cuts[-1] = 0)
    /// By node: read outside its segment (a later segment, the collective, the output's
    /// publication), so that its backend computes it whatever it fuses (graph_view::kept)
    std::vector<std::uint8_t> kept;
    tensor* scratch = nullptr;     ///< the collective's receive buffer
    buffer_ptr scratch_buffer;
};

struct plan {
    std::vector<device_graph> dev;
    std::vector<std::vector<tensor*>> reductions; ///< after segment i: each device's tensor
    std::vector<const tensor*> leaves;            ///< dev[d].leafs[i] is leaves[i]'s piece
    std::vector<std::pair<const tensor*, split_state>> outputs;
    std::vector<std::vector<tensor*>> output_locals;
    std::vector<tensor*> key_nodes;
    std::uint64_t key_hash = 0;
    plan_summary summary;
};

inline std::uint64_t mix(std::uint64_t h, std::uint64_t v) noexcept {
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h;
}

/// A hash of what a plan depends on in a graph's nodes.
inline std::uint64_t graph_hash(graph_view g) noexcept {
    std::uint64_t h = g.size();
    for (const tensor* t : g) {
        h = mix(h, reinterpret_cast<std::uintptr_t>(t));
        h = mix(h, static_cast<std::uint64_t>(t->op) | (static_cast<std::uint64_t>(t->type) << 8) |
                       (static_cast<std::uint64_t>(t->flags) << 16));
        for (std::size_t i = 0; i < max_dims; ++i) {
            h = mix(h, static_cast<std::uint64_t>(t->ne[i]));
            h = mix(h, t->nb[i]);
        }
        for (const tensor* s : t->src) h = mix(h, reinterpret_cast<std::uintptr_t>(s));
        h = mix(h, reinterpret_cast<std::uintptr_t>(t->view_src));
        h = mix(h, t->view_offs);
        for (auto p : t->op_params) h = mix(h, static_cast<std::uint32_t>(p));
    }
    return h;
}

} // namespace detail
} // namespace meta

class meta_backend {
public:
    /// Backends on every part of `dev` (see meta::meta_params for threads and the
    /// collective). Fails with the first part's failure.
    [[nodiscard]] static result<meta_backend> make(const meta_device& dev) {
        auto s = std::make_unique<state>(dev);
        const int n = dev.n_devices();
        int cpu_parts = 0;
        for (int d = 0; d < n; ++d) cpu_parts += dev.part(d).kind() == device_kind::cpu ? 1 : 0;
        const int hw = cpu::hardware_threads();
        for (int d = 0; d < n; ++d) {
            backend_options o;
            o.n_threads = dev.params().threads_per_device > 0 ? dev.params().threads_per_device
                          : dev.part(d).kind() == device_kind::cpu ? std::max(1, hw / std::max(1, cpu_parts))
                                                                    : 0;
            auto b = dev.part(d).make_backend(o);
            if (!b)
                return status(b.error().code(), "meta_backend: device " + std::to_string(d) + " (" +
                                                    std::string(dev.part(d).name()) + "): " + b.error().message());
            s->parts.push_back(std::move(*b));
            s->allocs.emplace_back(s->parts.back().buffer_type());
        }
        if (dev.params().make_collective) {
            std::vector<any_device> devs;
            for (int d = 0; d < n; ++d) devs.push_back(dev.part(d));
            s->coll = dev.params().make_collective(devs);
        }
        if (!s->coll) s->coll = std::make_unique<meta::generic_collective>(dev.params().ring_min_bytes);
        s->pool = std::make_unique<cpu::thread_pool>(n);
        return meta_backend(std::move(s));
    }

    meta_backend(meta_backend&&) noexcept = default;
    meta_backend& operator=(meta_backend&&) noexcept = default;
    ~meta_backend() {
        if (s_) (void)synchronize();
    }

    [[nodiscard]] std::string_view name() const noexcept { return s_->dev.name(); }
    [[nodiscard]] const meta_device& device() const noexcept { return s_->dev; }
    [[nodiscard]] const meta_buffer_type& buffer_type() const noexcept { return s_->dev.buffer_type(); }
    [[nodiscard]] bool supports_op(const tensor& t) const {
        for (const auto& p : s_->parts)
            if (!p.supports_op(t)) return false;
        return true;
    }
    [[nodiscard]] bool supports_buffer_type(const buffer_type_ref& bt) const noexcept {
        return s_->dev.supports_buffer_type(bt);
    }

    /// Plans g (or reuses the plan of the same graph) and computes it on every device.
    /// Errors: plan errors (not_supported: the op, tensors and states; invalid_argument:
    /// a tensor outside the meta device's buffers), device failures, allocation.
    status compute(graph_view g) {
        try {
            auto p = plan_for(g);
            if (!p) return p.error();
            ++s_->stats.computes;
            return run(**p);
        } catch (const std::bad_alloc&) {
            return {errc::alloc_failed, "meta_backend: out of host memory"};
        } catch (const std::exception& e) {
            return {errc::failed, std::string("meta_backend: ") + e.what()};
        }
    }

    status synchronize() {
        return meta::detail::run_each(*s_->pool, [&](int d) { return s_->parts[static_cast<std::size_t>(d)].synchronize(); });
    }

    /// Plans g without computing it: every node's state, the reductions, each device's
    /// compute memory. The plan is kept for the next compute of g.
    [[nodiscard]] result<meta::plan_summary> plan(graph_view g) {
        try {
            auto p = plan_for(g);
            if (!p) return p.error();
            meta::plan_summary sum = (*p)->summary;
            for (int d = 0; d < n_devices(); ++d) {
                auto& dg = (*p)->dev[static_cast<std::size_t>(d)];
                auto need = s_->allocs[static_cast<std::size_t>(d)].measure(dg.nodes, dg.leafs);
                if (!need) return need.error();
                sum.compute_bytes.push_back(need->empty() ? 0 : need->front());
            }
            return sum;
        } catch (const std::bad_alloc&) {
            return status(errc::alloc_failed, "meta_backend: out of host memory");
        } catch (const std::exception& e) {
            return status(errc::failed, std::string("meta_backend: ") + e.what());
        }
    }

    [[nodiscard]] int n_devices() const noexcept { return s_->dev.n_devices(); }
    /// Device d's own backend.
    [[nodiscard]] any_backend& part(int d) { return s_->parts.at(static_cast<std::size_t>(d)); }
    /// Bytes of device d's compute buffers (its graph allocator's).
    [[nodiscard]] std::size_t compute_buffer_bytes(int d) const {
        const auto& a = s_->allocs.at(static_cast<std::size_t>(d));
        std::size_t n = 0;
        for (std::size_t c = 0; c < a.n_chunks(0); ++c)
            if (a.buffer(0, c) != nullptr) n += a.buffer(0, c)->size();
        return n;
    }
    [[nodiscard]] meta::meta_stats stats() const noexcept {
        meta::meta_stats st = s_->stats;
        st.bytes_moved = s_->coll->stats().bytes_moved;
        return st;
    }
    [[nodiscard]] const meta::collective& collective() const noexcept { return *s_->coll; }

private:
    struct state;
    class group_impl final : public meta::group {
    public:
        explicit group_impl(state& s) noexcept : s_(s) {}
        [[nodiscard]] int size() const noexcept override { return static_cast<int>(s_.parts.size()); }
        [[nodiscard]] any_backend& backend(int d) noexcept override { return s_.parts[static_cast<std::size_t>(d)]; }
        status run_each(const std::function<status(int)>& f) override { return meta::detail::run_each(*s_.pool, f); }
        [[nodiscard]] tensor& scratch(int d) noexcept override {
            return *s_.current->dev[static_cast<std::size_t>(d)].scratch;
        }

    private:
        state& s_;
    };
    struct state {
        explicit state(meta_device d) : dev(std::move(d)) {}
        meta_device dev;
        std::vector<any_backend> parts;
        std::vector<graph_allocator> allocs;
        std::unique_ptr<meta::collective> coll;
        std::unique_ptr<cpu::thread_pool> pool; ///< one thread per device
        std::vector<std::unique_ptr<meta::detail::plan>> plans; ///< most recently used first
        meta::detail::plan* current = nullptr;                   ///< the plan being computed
        meta::meta_stats stats;
        /// Host copy of a tensor reduced over the processes: pinned memory of part 0's
        /// device when it has a host buffer type (its transfers run at full speed), else
        /// pageable memory.
        buffer_ptr pinned_staging;
        std::vector<float> process_staging;
        ~state() { pool.reset(); } // threads stop before the backends they drive go
    };

    explicit meta_backend(std::unique_ptr<state> s) noexcept : s_(std::move(s)) {}

    /// The global number of this process's device d.
    [[nodiscard]] int global(int d) const noexcept { return s_->dev.first_device() + d; }

    [[nodiscard]] meta_buffer* meta_buffer_of(const tensor& t) const noexcept {
        if (t.buffer == nullptr || !(t.buffer->type() == buffer_type_ref(s_->dev.buffer_type()))) return nullptr;
        return t.buffer->get_if<meta_buffer>();
    }

    status plan_error(const tensor& node, const std::string& why) const {
        return {errc::not_supported, "meta plan: " + std::string(to_string(node.op)) + " " +
                                         backplane::detail::describe(&node) + ": " + why};
    }

    result<meta::detail::plan*> plan_for(graph_view g) {
        const std::uint64_t h = meta::detail::graph_hash(g);
        auto& plans = s_->plans;
        for (std::size_t i = 0; i < plans.size(); ++i) {
            auto& p = *plans[i];
            if (p.key_hash == h && std::equal(p.key_nodes.begin(), p.key_nodes.end(), g.begin(), g.end())) {
                std::rotate(plans.begin(), plans.begin() + static_cast<std::ptrdiff_t>(i),
                            plans.begin() + static_cast<std::ptrdiff_t>(i) + 1); // most recent first
                s_->current = plans.front().get();
                return s_->current;
            }
        }
        auto p = std::make_unique<meta::detail::plan>();
        if (status s = build(g, *p); !s) return s;
        p->key_hash = h;
        p->key_nodes.assign(g.begin(), g.end());
        ++s_->stats.plans;
        if (plans.size() == max_plans) plans.pop_back();
        plans.insert(plans.begin(), std::move(p));
        s_->current = plans.front().get();
        return s_->current;
    }

    // What planning one graph keeps per tensor, by its number in the graph's index.
    struct planning {
        graph_index idx;
        std::vector<const meta::record*> leaf_records; // per leaf: its storage on the devices
        std::vector<meta::split_state> states;         // per tensor
        std::vector<std::uint8_t> known;               // per tensor: states[i] is set
        std::vector<meta::match> matches;              // per node that computes
        std::vector<std::vector<meta::local_view>> views; // per view node: each device's geometry
        std::vector<std::uint8_t> reduce;              // per tensor: its partial sums are reduced after it
        std::vector<std::vector<tensor*>> local;       // per tensor: each device's piece
        std::size_t max_reduce = 0;                    // elements of the largest reduced node
    };

    status build(graph_view g, meta::detail::plan& p) {
        planning pl;
        pl.idx = graph_index(g);
        if (status s = collect_leaves(pl, p); !s) return s;
        if (status s = assign_states(pl); !s) return s;
        p.dev.resize(static_cast<std::size_t>(n_devices()));
        place_leaves(pl, p);
        for (std::size_t i = 0; i < pl.idx.n_nodes(); ++i)
            if (status s = make_pieces(pl, p, i); !s) return s;
        for (auto& dg : p.dev) dg.cuts.push_back(dg.nodes.size());
        p.summary.segments = p.reductions.size() + 1;
        for (std::size_t d = 0; d < p.dev.size(); ++d) mark_kept(p, d);
        return make_receive_buffers(p, pl.max_reduce);
    }

    // Device d's nodes read outside their segment (device_graph::kept).
    static void mark_kept(meta::detail::plan& p, std::size_t d) {
        auto& dg = p.dev[d];
        std::vector<std::pair<const tensor*, std::size_t>> at; // node, its position
        at.reserve(dg.nodes.size());
        for (std::size_t i = 0; i < dg.nodes.size(); ++i) at.emplace_back(dg.nodes[i], i);
        std::sort(at.begin(), at.end());
        dg.kept.assign(dg.nodes.size(), 0);
        const auto position = [&](const tensor* t) -> std::size_t {
            const auto it = std::lower_bound(at.begin(), at.end(), std::pair<const tensor*, std::size_t>(t, 0));
            return it != at.end() && it->first == t ? it->second : dg.nodes.size();
        };
        const auto segment = [&](std::size_t i) {
            return static_cast<std::size_t>(std::upper_bound(dg.cuts.begin(), dg.cuts.end(), i) - dg.cuts.begin());
        };
        for (std::size_t j = 0; j < dg.nodes.size(); ++j)
            for (const tensor* s : dg.nodes[j]->src)
                if (const std::size_t i = s != nullptr ? position(s) : dg.nodes.size(); i < j && segment(i) != segment(j))
                    dg.kept[i] = 1;
        const auto keep = [&](const tensor* t) {
            if (const std::size_t i = position(t); i < dg.nodes.size()) dg.kept[i] = 1;
        };
        for (const auto& r : p.reductions) keep(r[d]);
        for (const auto& o : p.output_locals) keep(o[d]);
    }

    // The leaves: every tensor the graph reads and does not compute, each with its
    // storage on the devices (its meta buffer's record).
    status collect_leaves(planning& pl, meta::detail::plan& p) const {
        for (std::size_t i = pl.idx.n_nodes(); i < pl.idx.size(); ++i) {
            const tensor* t = &pl.idx[i];
            if (t->view_src != nullptr)
                return {errc::invalid_argument, "meta plan: the view " + backplane::detail::describe(t) +
                                                    " is read but not computed by the graph"};
            meta_buffer* mb = meta_buffer_of(*t);
            if (mb == nullptr)
                return {errc::invalid_argument,
                        "meta plan: " + backplane::detail::describe(t) + " lives in " +
                            (t->buffer ? "buffer type '" + std::string(t->buffer->type().name()) + "'" : "no buffer") +
                            ", not in a buffer of " + std::string(s_->dev.description())};
            auto rec = mb->find(*t);
            if (!rec) return rec.error();
            if (*rec == nullptr)
                return {errc::invalid_argument, "meta plan: " + backplane::detail::describe(t) +
                                                    " has no storage on the devices (not a leaf placed in a meta "
                                                    "buffer, nor a published output)"};
            p.leaves.push_back(t);
            pl.leaf_records.push_back(*rec);
        }
        return {};
    }

    // Step 1: every tensor's state, starting over while reductions are added.
    status assign_states(planning& pl) const {
        const std::size_t n = pl.idx.size();
        pl.reduce.assign(n, 0);
        for (bool again = true; again;) {
            pl.states.assign(n, meta::split_state{});
            pl.known.assign(n, 0);
            pl.matches.assign(pl.idx.n_nodes(), meta::match{});
            pl.views.assign(pl.idx.n_nodes(), {});
            for (std::size_t i = pl.idx.n_nodes(); i < n; ++i) {
                pl.states[i] = pl.leaf_records[i - pl.idx.n_nodes()]->state;
                pl.known[i] = 1;
            }
            again = false;
            for (std::size_t i = 0; i < pl.idx.n_nodes() && !again; ++i)
                if (status s = assign_state(pl, i, again); !s) return s;
        }
        return {};
    }

    // Node i's state (a view's from its root, else from the rule that fits its sources);
    // `again` when a source's partial sums must be reduced first.
    status assign_state(planning& pl, std::size_t i, bool& again) const {
        const tensor& t = pl.idx[i];
        if (is_view_op(t.op)) {
            const std::int32_t root = pl.idx.view_src(i);
            if (root == graph_index::none || !pl.known[static_cast<std::size_t>(root)])
                return plan_error(t, "a view whose root is not part of the graph");
            auto vm = meta::map_view(*t.view_src, pl.states[static_cast<std::size_t>(root)], t, s_->dev.n_total_devices());
            if (!vm) return plan_error(t, vm.error().message());
            pl.states[i] = vm->state;
            pl.views[i] = std::move(vm->local);
        } else {
            std::array<const meta::split_state*, meta::rule_srcs> ss{};
            for (std::size_t j = 0; j < meta::rule_srcs; ++j) {
                const std::int32_t k = pl.idx.src(i, j);
                if (k == graph_index::none) continue;
                if (!pl.known[static_cast<std::size_t>(k)]) return plan_error(t, "it reads a node computed after it");
                ss[j] = &pl.states[static_cast<std::size_t>(k)];
            }
            auto m = meta::match_rule(t, ss);
            if (!m) return reduce_sources(pl, i, ss, again, m.error().message());
            pl.states[i] = m->out;
            pl.matches[i] = std::move(*m);
        }
        pl.known[i] = 1;
        return mark_reduction(pl, i);
    }

    // No rule fits node i: its partial sources' roots are reduced (planning starts over),
    // or, when there are none left to reduce, the node is an error.
    status reduce_sources(planning& pl, std::size_t i, const std::array<const meta::split_state*, meta::rule_srcs>& ss,
                          bool& again, const std::string& why) const {
        for (std::size_t j = 0; j < meta::rule_srcs; ++j) {
            if (ss[j] == nullptr || !ss[j]->is_partial()) continue;
            const std::int32_t root = pl.idx.root(static_cast<std::size_t>(pl.idx.src(i, j)));
            if (pl.idx.is_node(root) && !pl.reduce[static_cast<std::size_t>(root)]) {
                pl.reduce[static_cast<std::size_t>(root)] = 1;
                again = true;
            }
        }
        if (again) return {};
        return {errc::not_supported, "meta plan: " + backplane::detail::describe(&pl.idx[i]) + ": " + why};
    }

    // A partial graph output is reduced; a reduced node must be a contiguous f32 tensor.
    status mark_reduction(planning& pl, std::size_t i) const {
        const tensor& t = pl.idx[i];
        meta::split_state& st = pl.states[i];
        const bool output = t.has_flag(tensor_flag::output) || i + 1 == pl.idx.n_nodes();
        if (st.is_partial() && output) pl.reduce[i] = 1;
        if (!pl.reduce[i]) return {};
        if (t.view_src != nullptr || t.type != elem_type::f32 || !t.is_contiguous())
            return plan_error(t, "its partial sums must be reduced, and only contiguous f32 tensors that are not "
                                 "views can be");
        st = meta::split_state::mirrored();
        return {};
    }

    // Step 2 for the leaves: each device's piece, placed in the device's storage.
    void place_leaves(planning& pl, meta::detail::plan& p) const {
        const int n = n_devices();
        pl.local.assign(pl.idx.size(), {});
        for (std::size_t k = 0; k < p.leaves.size(); ++k) {
            auto& ls = pl.local[pl.idx.n_nodes() + k];
            for (int d = 0; d < n; ++d) {
                const tensor& piece = pl.leaf_records[k]->local[static_cast<std::size_t>(d)];
                auto& dg = p.dev[static_cast<std::size_t>(d)];
                tensor* l = dg.ctx.new_tensor(piece.type, std::span(piece.ne));
                l->nb = piece.nb;
                place_like(*l, piece, piece.data);
                l->name = piece.name;
                ls.push_back(l);
                dg.leafs.push_back(l);
            }
        }
    }

    // Step 2 for node i: each device's piece of it, its reduction and its publication.
    status make_pieces(planning& pl, meta::detail::plan& p, std::size_t i) {
        const tensor& t = pl.idx[i];
        const meta::split_state& st = pl.states[i];
        auto& ls = pl.local[i];
        for (int d = 0; d < n_devices(); ++d) {
            auto& dg = p.dev[static_cast<std::size_t>(d)];
            auto piece = is_view_op(t.op) ? view_piece(pl, dg, i, d) : computed_piece(pl, dg, i, d);
            if (!piece) return piece.error();
            tensor* l = *piece;
            l->op = t.op;
            l->op_params = t.op_params;
            l->flags = t.flags;
            l->name = t.name + "@" + std::to_string(global(d));
            dg.nodes.push_back(l);
            ls.push_back(l);
            if (pl.reduce[i]) dg.cuts.push_back(dg.nodes.size());
        }
        if (pl.reduce[i]) {
            p.reductions.push_back(ls);
            pl.max_reduce = std::max<std::size_t>(pl.max_reduce, static_cast<std::size_t>(t.nelements()));
            p.summary.reduced.push_back(&t);
        }
        if (t.view_src == nullptr && (t.has_flag(tensor_flag::output) || i + 1 == pl.idx.n_nodes()) &&
            meta_buffer_of(t) != nullptr) {
            p.outputs.emplace_back(&t, st);
            p.output_locals.push_back(ls);
        }
        p.summary.states.emplace_back(&t, st);
        return {};
    }

    // Device d's piece of view node i: a view of its root's piece.
    result<tensor*> view_piece(planning& pl, meta::detail::device_graph& dg, std::size_t i, int d) const {
        const tensor& t = pl.idx[i];
        const auto du = static_cast<std::size_t>(d);
        const meta::local_view& v = pl.views[i][static_cast<std::size_t>(global(d))];
        tensor* l = dg.ctx.new_view(pl.local[static_cast<std::size_t>(pl.idx.view_src(i))][du], t.type, v.ne, v.nb,
                                    v.offs);
        l->src[0] = pl.local[static_cast<std::size_t>(pl.idx.src(i, 0))][du];
        return l;
    }

    // Device d's piece of computing node i: its sources' pieces (cut by a view where its
    // rule slices one), its local shape; the device must support it.
    result<tensor*> computed_piece(planning& pl, meta::detail::device_graph& dg, std::size_t i, int d) const {
        const tensor& t = pl.idx[i];
        const auto du = static_cast<std::size_t>(d);
        const meta::match& m = pl.matches[i];
        std::array<tensor*, meta::rule_srcs> srcs{};
        for (std::size_t j = 0; j < meta::rule_srcs; ++j) {
            const std::int32_t k = pl.idx.src(i, j);
            if (k == graph_index::none) continue;
            srcs[j] = slice_of(dg, pl.local[static_cast<std::size_t>(k)][du], m.use[j], static_cast<std::size_t>(global(d)));
        }
        tensor* l = nullptr;
        if (t.op == op_kind::cpy || t.op == op_kind::set_rows) { // written into its destination's piece
            tensor* into = srcs[t.op == op_kind::cpy ? 1 : 2];
            l = dg.ctx.new_view(into, t.type, into->ne, into->nb, 0);
        } else {
            const auto ne = pl.states[i].local_shape(t.ne, global(d));
            l = dg.ctx.new_tensor(t.type, std::span<const std::int64_t>(ne));
        }
        for (std::size_t j = 0; j < meta::rule_srcs; ++j) l->src[j] = srcs[j];
        // the piece is asked about as the node it will be
        l->op = t.op;
        l->op_params = t.op_params;
        if (!s_->parts[du].supports_op(*l))
            return plan_error(t, "device " + std::to_string(global(d)) + " (" + std::string(s_->parts[du].name()) +
                                     ") does not support its piece " + backplane::detail::describe(l) + " in state " +
                                     pl.states[i].to_string() + sources_of(pl, i));
        return l;
    }

    // Source piece s as a rule uses it: itself, or the slice device du reads.
    static tensor* slice_of(meta::detail::device_graph& dg, tensor* s, const meta::source_use& u, std::size_t du) {
        if (!u.slice) return s;
        auto ne = s->ne;
        const auto ax = static_cast<std::size_t>(u.axis);
        ne[ax] = u.length[du];
        tensor* v = dg.ctx.new_view(s, s->type, ne, s->nb, static_cast<std::size_t>(u.start[du]) * s->nb[ax]);
        v->op = op_kind::view;
        v->src[0] = s;
        v->name = s->name + "[slice]";
        dg.nodes.push_back(v);
        return v;
    }

    // Each device's receive buffer for the collective (max_reduce elements, 0: none).
    status make_receive_buffers(meta::detail::plan& p, std::size_t max_reduce) {
        if (max_reduce == 0) return {};
        for (int d = 0; d < n_devices(); ++d) {
            auto& dg = p.dev[static_cast<std::size_t>(d)];
            const buffer_type_ref bt = s_->parts[static_cast<std::size_t>(d)].buffer_type();
            const std::size_t align = backplane::detail::sane_alignment(bt.alignment());
            auto buf = bt.allocate(max_reduce * 4 + align);
            if (!buf)
                return {buf.error().code(), "meta plan: the receive buffer of device " + std::to_string(d) + ": " +
                                                buf.error().message()};
            tensor* sc = dg.ctx.new_tensor_1d(elem_type::f32, static_cast<std::int64_t>(max_reduce));
            place_tensor(*sc, **buf,
                         static_cast<std::byte*>((*buf)->base()) + backplane::detail::padding_for((*buf)->base(), align));
            sc->name = "meta_recv@" + std::to_string(d);
            if (status s = (*buf)->init_tensor(*sc); !s) return s;
            dg.scratch = sc;
            dg.scratch_buffer = std::move(*buf);
        }
        return {};
    }

    std::string sources_of(const planning& pl, std::size_t i) const {
        std::string s;
        for (std::size_t j = 0; j < meta::rule_srcs; ++j) {
            const std::int32_t k = pl.idx.src(i, j);
            if (k != graph_index::none)
                s += "; src" + std::to_string(j) + " " + backplane::detail::describe(&pl.idx[static_cast<std::size_t>(k)]) +
                     " " + pl.states[static_cast<std::size_t>(k)].to_string();
        }
        return s;
    }

    status run(meta::detail::plan& p) {
        const int n = n_devices();
        // leaves: their storage may have been placed again since the plan was made
        for (std::size_t i = 0; i < p.leaves.size(); ++i) {
            meta_buffer* mb = meta_buffer_of(*p.leaves[i]);
            if (mb == nullptr)
                return {errc::invalid_argument,
                        "meta compute: " + backplane::detail::describe(p.leaves[i]) + " left its meta buffer"};
            auto rec = mb->find(*p.leaves[i]);
            if (!rec) return rec.error();
            if (*rec == nullptr)
                return {errc::invalid_argument,
                        "meta compute: " + backplane::detail::describe(p.leaves[i]) + " has no storage any more"};
            for (int d = 0; d < n; ++d) {
                tensor* l = p.dev[static_cast<std::size_t>(d)].leafs[i];
                const tensor& piece = (*rec)->local[static_cast<std::size_t>(d)];
                place_like(*l, piece, piece.data);
            }
        }
        for (int d = 0; d < n; ++d) {
            auto& dg = p.dev[static_cast<std::size_t>(d)];
            for (tensor* t : dg.nodes)
                if (t->view_src != nullptr) unplace_tensor(*t); // the allocator places views on their sources again
            if (status s = s_->allocs[static_cast<std::size_t>(d)].alloc_graph(dg.nodes, dg.leafs); !s)
                return {s.code(), "meta compute: device " + std::to_string(d) + ": " + s.message()};
        }
        group_impl grp(*s_);
        const std::size_t segments = p.reductions.size() + 1;
        for (std::size_t seg = 0; seg < segments; ++seg) {
            const bool reduce = seg < p.reductions.size();
            status s = meta::detail::run_each(*s_->pool, [&](int d) -> status {
                auto& dg = p.dev[static_cast<std::size_t>(d)];
                const std::size_t first = seg == 0 ? 0 : dg.cuts[seg - 1];
                any_backend& b = s_->parts[static_cast<std::size_t>(d)];
                if (first < dg.cuts[seg])
                    if (status st = b.compute(graph_view(dg.nodes, dg.kept.data()).subview(first, dg.cuts[seg])); !st)
                        return st;
                return reduce ? b.synchronize() : status{};
            });
            if (!s) return s;
            if (reduce) {
                ++s_->stats.reductions;
                if (status st = s_->coll->all_reduce(grp, p.reductions[seg]); !st) return st;
                if (status st = reduce_over_processes(p.reductions[seg]); !st) return st;
            }
        }
        return publish_outputs(p);
    }

    // After the parts of this process summed a reduced node's partial sums: the sum over
    // the processes, through host memory (in place where part 0's memory is the host's),
    // written back to every part.
    status reduce_over_processes(const std::vector<tensor*>& parts) {
        meta::process_group* pg = s_->dev.params().processes.get();
        if (pg == nullptr || s_->coll->spans_processes()) return {};
        if (status s = synchronize(); !s) return s;
        tensor& t0 = *parts.front();
        const std::size_t n = static_cast<std::size_t>(t0.nelements());
        const bool in_place = t0.buffer->is_host();
        float* staging = in_place ? static_cast<float*>(t0.data) : staging_for(n);
        if (!in_place)
            if (status s = t0.buffer->get_tensor(t0, staging, 0, n * 4); !s) return s;
        const std::span<float> values(staging, n);
        if (status s = pg->all_reduce_sum(values); !s)
            return {s.code(), "meta compute: the all-reduce over the processes: " + s.message(), s.native()};
        s_->stats.process_bytes += n * 4;
        for (std::size_t d = in_place ? 1 : 0; d < parts.size(); ++d)
            if (status s = parts[d]->buffer->set_tensor(*parts[d], values.data(), 0, n * 4); !s) return s;
        return {};
    }

    // Host memory for n floats reduced over the processes (see state::pinned_staging).
    float* staging_for(std::size_t n) {
        const std::size_t bytes = n * sizeof(float);
        buffer_ptr& pinned = s_->pinned_staging;
        if (pinned && pinned->size() >= bytes) return static_cast<float*>(pinned->base());
        if (auto bt = s_->dev.part(0).host_buffer_type(); bt && bt->is_host()) {
            if (auto b = bt->allocate(bytes)) {
                pinned = std::move(*b);
                return static_cast<float*>(pinned->base());
            }
        }
        s_->process_staging.resize(n); // no pinned memory to be had: pageable
        return s_->process_staging.data();
    }

    // Graph outputs become readable in their meta buffers; a split one over several
    // processes is first gathered from all of them (every process reads the whole value).
    status publish_outputs(meta::detail::plan& p) {
        meta::process_group* pg = s_->dev.params().processes.get();
        bool synced = false;
        for (std::size_t i = 0; i < p.outputs.size(); ++i) {
            meta_buffer* mb = meta_buffer_of(*p.outputs[i].first);
            if (mb == nullptr) continue;
            std::vector<std::vector<std::byte>> remote;
            if (pg != nullptr && p.outputs[i].second.is_split()) {
                if (!synced)
                    if (status s = synchronize(); !s) return s;
                synced = true;
                auto r = gather_pieces(*pg, *p.outputs[i].first, p.outputs[i].second, p.output_locals[i]);
                if (!r) return r.error();
                remote = std::move(*r);
            }
            mb->publish(*p.outputs[i].first, p.outputs[i].second, p.output_locals[i], std::move(remote));
        }
        return {};
    }

    // Every global device's piece of split output t, by global device (this process's own
    // left empty): one all-gather of equal slots, each as large as the largest piece.
    result<std::vector<std::vector<std::byte>>> gather_pieces(meta::process_group& pg, const tensor& t,
                                                              const meta::split_state& st,
                                                              const std::vector<tensor*>& local) {
        const int total = s_->dev.n_total_devices(), per = n_devices();
        std::vector<std::size_t> bytes(static_cast<std::size_t>(total));
        std::size_t slot = 0;
        for (int g = 0; g < total; ++g) {
            const auto ne = st.local_shape(t.ne, g);
            bytes[static_cast<std::size_t>(g)] = row_size(t.type, ne[0]) * static_cast<std::size_t>(ne[1] * ne[2] * ne[3]);
            slot = std::max(slot, bytes[static_cast<std::size_t>(g)]);
        }
        std::vector<std::byte> mine(slot * static_cast<std::size_t>(per)), all(slot * static_cast<std::size_t>(total));
        for (int d = 0; d < per; ++d) {
            tensor& l = *local[static_cast<std::size_t>(d)];
            if (status s = l.buffer->get_tensor(l, mine.data() + slot * static_cast<std::size_t>(d), 0, l.nbytes()); !s)
                return s;
        }
        if (status s = pg.all_gather(mine, all); !s)
            return status(s.code(), "meta compute: gathering " + backplane::detail::describe(&t) + " from the processes: " +
                                        s.message(), s.native());
        s_->stats.process_bytes += all.size() - mine.size();
        std::vector<std::vector<std::byte>> remote(static_cast<std::size_t>(total));
        for (int g = 0; g < total; ++g)
            if (s_->dev.state()->local_index(g) < 0) {
                const auto* from = all.data() + slot * static_cast<std::size_t>(g);
                remote[static_cast<std::size_t>(g)].assign(from, from + bytes[static_cast<std::size_t>(g)]);
            }
        return remote;
    }

    static constexpr std::size_t max_plans = 8; ///< graphs whose plans are kept (prefill and decode, ...)
    std::unique_ptr<state> s_;
};

inline result<meta_backend> meta_device::make_backend() const { return meta_backend::make(*this); }

static_assert(device<meta_device>);
static_assert(backend<meta_backend>);

} // namespace backplane
