#pragma once
// The plans of the graphs a CPU backend computed last, so that compute(graph_view) plans
// a graph again only when it changed: a decode step computed again and again, or the
// few splits of a scheduled graph that fall to the CPU, reuse their plans (the checks,
// the fused groups, the threads and work sizes of every node) instead of making them
// anew each time.
//
// A plan's key holds every fact planning reads: per node its pointer, op, type, flags,
// extents, strides, parameters, placement (data, buffer serial), sources and kept mark;
// per source its pointer, type, extents, strides and placement; and the backend's mode
// and fusions. A graph whose nodes were edited in place (another op, type or shape, new
// memory, another source) no longer matches. Whether the buffers still exist is asked
// at every compute anyway (plan.hpp): a freed buffer keeps the facts.
//
// Comparing a key walks the graph's tensors as planning does; what it saves is the rest
// of planning (fusion search, kernel choice, thread split, work sizes): on the example's
// decode step, about 12 us instead of 21 us per compute.

#include <backplane/backends/cpu/plan.hpp>
#include <backplane/core/fusion_set.hpp>
#include <backplane/core/graph.hpp>
#include <backplane/core/tensor.hpp>

#include <array>
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace backplane::cpu::detail {

/// A source's facts (the placement and layout that planning reads).
struct source_facts {
    const tensor* t = nullptr;
    elem_type type = elem_type::f32;
    std::array<std::int64_t, max_dims> ne{};
    std::array<std::size_t, max_dims> nb{};
    const void* data = nullptr;
    std::uint64_t serial = 0;
};

/// A node's facts.
struct node_facts {
    source_facts self;
    op_kind op = op_kind::none;
    std::uint32_t flags = 0;
    bool kept = false;
    std::array<std::int32_t, max_op_params> op_params{};
    std::array<tensor*, max_srcs> src{};
};

/// The settings a plan was made with (a plan serves any thread count: computing it
/// re-schedules it for another).
struct plan_settings {
    bool reference = false;
    fusion_set fusions{};

    friend bool operator==(const plan_settings&, const plan_settings&) = default;
};

/// The facts of the graph a plan was made from (see above). A class template so that
/// its members are compiled only where a CPU backend computes.
template <class = void>
class basic_plan_key {
public:
    /// True when g under `s` is the graph this key was taken from.
    [[nodiscard]] bool matches(graph_view g, const plan_settings& s) const noexcept {
        if (!valid_ || s != settings_ || g.size() != nodes_.size()) return false;
        std::size_t next_src = 0;
        for (std::size_t i = 0; i < g.size(); ++i) {
            const tensor* node = g[i];
            if (node == nullptr || !same(*node, g.kept(i), nodes_[i])) return false;
            for (const tensor* src : node->src)
                if (src != nullptr && (next_src >= sources_.size() || !same(*src, sources_[next_src++])))
                    return false;
        }
        return next_src == sources_.size();
    }

    /// Takes g's facts under `s`. Throws std::bad_alloc (the key is then empty).
    void take(graph_view g, const plan_settings& s) {
        clear();
        nodes_.reserve(g.size());
        for (std::size_t i = 0; i < g.size(); ++i) {
            const tensor* node = g[i];
            if (node == nullptr) return; // such a graph is refused; it keeps no key
            nodes_.push_back(facts_of(*node, g.kept(i)));
            for (const tensor* src : node->src)
                if (src != nullptr) sources_.push_back(facts_of(*src));
        }
        settings_ = s;
        valid_ = true;
    }

    /// Forgets the graph: the next compute plans.
    void clear() noexcept {
        valid_ = false;
        nodes_.clear();
        sources_.clear();
    }

private:
    [[nodiscard]] static source_facts facts_of(const tensor& t) noexcept {
        return {&t, t.type, t.ne, t.nb, t.data, t.buffer_serial};
    }
    [[nodiscard]] static node_facts facts_of(const tensor& t, bool kept) noexcept {
        return {facts_of(t), t.op, t.flags, kept, t.op_params, t.src};
    }
    // t's facts against f's, field by field without a copy (the placement first: what
    // changes most often)
    [[nodiscard]] static bool same(const tensor& t, const source_facts& f) noexcept {
        return t.data == f.data && &t == f.t && t.buffer_serial == f.serial && t.type == f.type && t.ne == f.ne &&
               t.nb == f.nb;
    }
    [[nodiscard]] static bool same(const tensor& t, bool kept, const node_facts& f) noexcept {
        return same(t, f.self) && t.op == f.op && t.flags == f.flags && kept == f.kept && t.src == f.src &&
               t.op_params == f.op_params;
    }

    bool valid_ = false;
    plan_settings settings_;
    std::vector<node_facts> nodes_;
    std::vector<source_facts> sources_;
};

/// The last `capacity` plans that compute(graph_view) made, each with its key; the
/// least recently used one makes room for a new one.
template <class = void>
class basic_plan_cache {
public:
    static constexpr std::size_t capacity = 4;

    /// The plan made for g under s, or null.
    [[nodiscard]] cpu_plan* find(graph_view g, const plan_settings& s) noexcept {
        for (entry& e : entries_)
            if (e.key.matches(g, s)) {
                e.used = ++clock_;
                return &e.plan;
            }
        return nullptr;
    }

    /// A plan for g under s, made by make(cpu_plan&) (a status; it may throw
    /// std::bad_alloc) into the least recently used place, and kept with g's key when
    /// it succeeds.
    template <class Make>
    result<cpu_plan*> add(graph_view g, const plan_settings& s, Make make) {
        entry& e = *std::min_element(entries_.begin(), entries_.end(),
                                     [](const entry& a, const entry& b) { return a.used < b.used; });
        e.key.clear();
        e.used = ++clock_;
        ++made_;
        if (auto st = make(e.plan); !st) return st;
        e.key.take(g, s);
        return &e.plan;
    }

    /// Plans made by add since construction.
    [[nodiscard]] std::uint64_t made() const noexcept { return made_; }

    /// Forgets every graph (their plans' work buffers stay for reuse).
    void clear() noexcept {
        for (entry& e : entries_) e.key.clear();
    }

private:
    struct entry {
        basic_plan_key<> key;
        cpu_plan plan;
        std::uint64_t used = 0;
    };
    std::array<entry, capacity> entries_;
    std::uint64_t clock_ = 0;
    std::uint64_t made_ = 0;
};

} // namespace backplane::cpu::detail
