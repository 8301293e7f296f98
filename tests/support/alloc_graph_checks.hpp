#pragma once
// Independent checks of a graph's memory assignment, for tests of the graph allocator and
// of anything built on it (the scheduler). They know nothing of how the allocator works:
//
//  * check_graph_allocation: every tensor has an address inside its buffer, and no two
//    tensors that are alive at the same time share bytes. Liveness is computed here from
//    first principles: a tensor lives from the step that writes it (leafs and inputs:
//    before the first step) to the last step that reads it or one of its views; inputs and
//    outputs (or tensors with an input or output view) live to the end. The only sharing
//    allowed between live tensors is a node written in place over its src[0] (or src[0]'s
//    source when src[0] is a view), and a view inside its source.
//  * simulate_compute: runs the graph on the real host memory with "kernels" that check
//    each source still holds the pattern its producer wrote and then write their own
//    pattern. A wrong reuse of memory shows up as a clobbered source.
//
// Both return a description of every problem found (empty when all is well), so a test
// can print it: `CHECK(problems == "")`.

#include <backplane/core/graph.hpp>
#include <backplane/core/tensor.hpp>
#include <backplane/memory/buffer.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace backplane::test {

/// What the checks need to know beyond the graph.
struct alloc_check_context {
    /// True for tensors that had data before the allocator ran (never placed by it).
    std::function<bool(const tensor&)> external;
    /// Bytes the allocator reserved for a (non-view) tensor: its buffer type's alloc_size.
    std::function<std::size_t(const tensor&)> alloc_size;
    /// True when `b` is one of the allocator's buffers.
    std::function<bool(const buffer_handle*)> owned_buffer;
    /// Alignment the allocator's tensors must have (relative to address 0), 1 for none.
    std::function<std::size_t(const tensor&)> alignment = [](const tensor&) { return std::size_t{1}; };
};

namespace detail_checks {

inline const tensor* root_of(const tensor* t) {
    return t->view_src ? t->view_src : t;
}

inline std::uintptr_t addr(const void* p) {
    return reinterpret_cast<std::uintptr_t>(p);
}

/// Bytes from the first element to one past the last, for any strides.
inline std::size_t extent(const tensor& t) {
    for (auto n : t.ne)
        if (n <= 0) return 0;
    const auto bs = static_cast<std::size_t>(block_size(t.type));
    std::size_t bytes = bs == 1 ? type_size(t.type) + static_cast<std::size_t>(t.ne[0] - 1) * t.nb[0]
                                : static_cast<std::size_t>(t.ne[0]) / bs * t.nb[0];
    for (std::size_t i = 1; i < max_dims; ++i) bytes += static_cast<std::size_t>(t.ne[i] - 1) * t.nb[i];
    return bytes;
}

inline std::string label(const tensor* t) {
    std::string s = t->name.empty() ? std::string("<unnamed>") : t->name;
    s += " (";
    s += to_string(t->op);
    s += ')';
    return s;
}

/// Every tensor the graph touches: nodes, leafs, their sources and view sources.
inline std::vector<const tensor*> all_tensors(const graph& g) {
    std::vector<const tensor*> out;
    std::unordered_set<const tensor*> seen;
    auto add = [&](const tensor* t) {
        if (t != nullptr && seen.insert(t).second) out.push_back(t);
    };
    for (const tensor* t : g.nodes()) add(t);
    for (const tensor* t : g.leafs()) add(t);
    for (std::size_t i = 0; i < out.size(); ++i) { // grows while iterating
        for (const tensor* s : out[i]->src) add(s);
        add(out[i]->view_src);
    }
    return out;
}

/// Liveness per root tensor: [first, last] in node positions; -1 is "before the first
/// node" and `forever` the end of the graph.
struct interval {
    int first = 0;
    int last = 0;
};
inline constexpr int forever = std::numeric_limits<int>::max();

inline std::unordered_map<const tensor*, interval> liveness(const graph& g, const alloc_check_context& cx) {
    std::unordered_map<const tensor*, interval> live;
    std::unordered_map<const tensor*, int> position;
    const auto nodes = g.nodes();
    for (std::size_t i = 0; i < nodes.size(); ++i) position[nodes[i]] = static_cast<int>(i);

    for (const tensor* t : all_tensors(g)) {
        if (t->view_src != nullptr || cx.external(*t)) continue;
        const auto p = position.find(t);
        // leafs (and tensors outside the node list) hold data from before the first node;
        // inputs too, since the user writes them before compute
        const int first = (p == position.end() || t->has_flag(tensor_flag::input)) ? -1 : p->second;
        live[t] = {first, first};
    }
    for (std::size_t i = 0; i < nodes.size(); ++i)
        for (const tensor* s : nodes[i]->src) {
            if (s == nullptr) continue;
            auto it = live.find(root_of(s));
            if (it != live.end()) it->second.last = std::max(it->second.last, static_cast<int>(i));
        }
    for (const tensor* t : all_tensors(g)) {
        if (!t->has_flag(tensor_flag::input) && !t->has_flag(tensor_flag::output)) continue;
        auto it = live.find(root_of(t));
        if (it != live.end()) it->second.last = forever;
    }
    return live;
}

/// True when node n was legitimately computed in place over `other`.
inline bool inplace_pair(const tensor* n, const tensor* other) {
    if (n->view_src != nullptr || n->src[0] == nullptr) return false;
    return root_of(n->src[0]) == other && n->data == n->src[0]->data;
}

} // namespace detail_checks

/// Addresses, containment, alignment and no overlap of live tensors (see the file comment).
inline std::string check_graph_allocation(const graph& g, const alloc_check_context& cx) {
    using namespace detail_checks;
    std::string problems;
    auto problem = [&](const std::string& s) {
        problems += s;
        problems += '\n';
    };

    const auto tensors = all_tensors(g);
    for (const tensor* t : tensors) {
        if (t->data == nullptr) {
            problem(label(t) + ": no data");
            continue;
        }
        if (cx.external(*t)) continue;
        if (!cx.owned_buffer(t->buffer)) {
            problem(label(t) + ": not in one of the allocator's buffers");
            continue;
        }
        if (t->view_src != nullptr) {
            const tensor* r = t->view_src;
            if (t->buffer != r->buffer) problem(label(t) + ": view in another buffer than its source");
            if (addr(t->data) != addr(r->data) + t->view_offs) problem(label(t) + ": view not at source + view_offs");
            if (addr(t->data) + extent(*t) > addr(r->data) + std::max(extent(*r), cx.alloc_size(*r)))
                problem(label(t) + ": view reaches past its source");
            continue;
        }
        if (!t->buffer->contains(t->data, cx.alloc_size(*t)))
            problem(label(t) + ": " + std::to_string(cx.alloc_size(*t)) + " bytes not inside its buffer");
        if (addr(t->data) % cx.alignment(*t) != 0) problem(label(t) + ": misaligned");
    }

    const auto live = liveness(g, cx);
    std::vector<const tensor*> roots;
    for (const auto& [t, iv] : live)
        if (t->data != nullptr && cx.owned_buffer(t->buffer)) roots.push_back(t);
    std::sort(roots.begin(), roots.end(), [](const tensor* a, const tensor* b) { return a->name < b->name; });
    for (std::size_t i = 0; i < roots.size(); ++i) {
        const tensor* a = roots[i];
        const interval ia = live.at(a);
        const std::size_t na = cx.alloc_size(*a);
        for (std::size_t j = i + 1; j < roots.size(); ++j) {
            const tensor* b = roots[j];
            if (a->buffer != b->buffer) continue;
            const interval ib = live.at(b);
            if (ia.last < ib.first || ib.last < ia.first) continue; // never alive together
            const std::size_t nb = cx.alloc_size(*b);
            const bool share = addr(a->data) < addr(b->data) + nb && addr(b->data) < addr(a->data) + na;
            if (!share || inplace_pair(a, b) || inplace_pair(b, a)) continue;
            problem(label(a) + " [" + std::to_string(ia.first) + ", " + std::to_string(ia.last) + "] and " + label(b) +
                    " [" + std::to_string(ib.first) + ", " + std::to_string(ib.last) +
                    "] are alive together and share bytes");
        }
    }
    return problems;
}

/// Runs the graph on host memory with pattern-checking kernels (see the file comment).
/// Every tensor the allocator placed must be in host memory.
inline std::string simulate_compute(const graph& g, const alloc_check_context& cx) {
    using namespace detail_checks;
    std::string problems;
    std::unordered_map<const tensor*, std::uint32_t> stamp;
    std::uint32_t next = 0x5EED0001u;
    auto pattern_byte = [](std::uint32_t s, std::size_t j) { return static_cast<std::uint8_t>(s >> (8 * (j % 4))); };
    auto write = [&](const tensor* r) {
        const std::uint32_t s = stamp[r] = next++;
        auto* p = static_cast<std::uint8_t*>(r->data);
        for (std::size_t j = 0, n = extent(*r); j < n; ++j) p[j] = pattern_byte(s, j);
    };
    auto verify = [&](const tensor* r, const std::string& when) {
        const auto it = stamp.find(r);
        if (it == stamp.end()) {
            problems += label(r) + " read " + when + " before anything wrote it\n";
            return;
        }
        const auto* p = static_cast<const std::uint8_t*>(r->data);
        for (std::size_t j = 0, n = extent(*r); j < n; ++j)
            if (p[j] != pattern_byte(it->second, j)) {
                problems += label(r) + " was overwritten before " + when + " (byte " + std::to_string(j) + ")\n";
                return;
            }
    };

    const auto nodes = g.nodes();
    std::unordered_set<const tensor*> node_set(nodes.begin(), nodes.end());
    for (const tensor* t : all_tensors(g)) // the user writes leafs and inputs before compute
        if (t->view_src == nullptr && !cx.external(*t) && (!node_set.contains(t) || t->has_flag(tensor_flag::input)))
            write(t);
    for (std::size_t i = 0; i < nodes.size(); ++i) {
        const tensor* n = nodes[i];
        const std::string when = "node " + std::to_string(i) + " " + label(n) + " read it";
        for (const tensor* s : n->src)
            if (s != nullptr && !cx.external(*root_of(s))) verify(root_of(s), when);
        if (n->view_src == nullptr && !n->has_flag(tensor_flag::input)) write(n);
    }
    for (const tensor* t : all_tensors(g))
        if ((t->has_flag(tensor_flag::input) || t->has_flag(tensor_flag::output)) && !cx.external(*root_of(t)))
            verify(root_of(t), "the user read it after compute");
    return problems;
}

} // namespace backplane::test
