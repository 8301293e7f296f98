#pragma once
// Fusion: runs of consecutive nodes that a backend may compute as one kernel, found in a
// graph_view before it is computed (ggml's backends look for the same patterns in their
// graph_compute). A group is a pattern of ops whose intermediate results nothing else
// reads: not a later node of the view, not the user (tensor_flag::output), not another
// split of the scheduler (graph_view::kept). Fusing then changes no value anyone can
// see, only the work: the intermediates are not written, and the group costs one
// dispatch or one step of threads instead of several.
//
//   rms_norm_mul         mul(rms_norm(x), w)            w one row, broadcast over x's rows
//   mul_mat_add          add(mul_mat(W, x), b)          b one row, broadcast (a bias)
//   glu_pair             glu(mul_mat(Wg, x), mul_mat(Wu, x))   the split form; Wg and Wu
//                                                       of one type and shape
//   rope_set_rows        set_rows(cache, reshape(rope(k)), idx)   each token's heads one
//                                                       row of the cache (the K write)
//   soft_max_scale_mask  soft_max(add(scale(x, s), mask))   also without the scale or
//                                                       without the mask: soft_max_ext
//                                                       of x with that scale and mask
//
// Nodes of a group are consecutive in the view, view ops between them included (a
// rope's reshape). find_fusions says which groups the graph has; each backend computes
// those it has a kernel for (its accept predicate) and the rest node by node, and takes
// a fusion_set that turns kinds off (a test compares the fused graph with the unfused
// one that way). Values: a fused kernel may round differently from the nodes one by one
// (an intermediate kept in a register instead of stored), within the ops' tolerances.

#include <backplane/core/fusion_set.hpp>
#include <backplane/core/glu_functions.hpp>
#include <backplane/core/graph.hpp>
#include <backplane/core/tensor.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace backplane {

/// A group: nodes [first, last] of the view (view ops among them) computed as one; the
/// result is node `last`'s. parts: the group's nodes that compute something, in order
/// (the last one is node last; unused entries null).
struct fused_group {
    std::uint32_t first = 0;
    std::uint32_t last = 0;
    fusion kind = fusion::rms_norm_mul;
    std::array<tensor*, 4> parts{};
};

namespace fusion_detail {

template <class = void>
inline bool f32_row_vector_of(const tensor* w, const tensor& x) noexcept {
    return w != nullptr && w->type == elem_type::f32 && w->ne[0] == x.ne[0] && w->nb[0] == sizeof(float) &&
           x.ne[1] % w->ne[1] == 0 && x.ne[2] % w->ne[2] == 0 && x.ne[3] % w->ne[3] == 0;
}

/// The other operand of a binary node that reads `t` (null when it does not read t once).
template <class = void>
inline tensor* other_operand(const tensor& bin, const tensor* t) noexcept {
    if (bin.src[0] == t && bin.src[1] != t) return bin.src[1];
    if (bin.src[1] == t && bin.src[0] != t) return bin.src[0];
    return nullptr;
}

/// The next node from i on that is not a view op (n: none).
template <class = void>
inline std::size_t next_compute(graph_view g, std::size_t i) noexcept {
    while (i < g.size() && g[i] != nullptr && is_view_op(g[i]->op)) ++i;
    return i < g.size() && g[i] != nullptr ? i : g.size();
}

template <class = void>
struct matcher {
    graph_view g;

    [[nodiscard]] tensor* at(std::size_t i) const noexcept { return i < g.size() ? g[i] : nullptr; }

    // Each match fills grp (first, last, parts) for the pattern starting at node i.
    bool rms_norm_mul(std::size_t i, fused_group& grp) const noexcept {
        tensor* n = g[i];
        const std::size_t j = next_compute(g, i + 1);
        tensor* m = at(j);
        if (n->op != op_kind::rms_norm || m == nullptr || m->op != op_kind::mul || j != i + 1) return false;
        if (n->type != elem_type::f32 || m->type != elem_type::f32) return false;
        if (!f32_row_vector_of(other_operand(*m, n), *n) || m->ne != n->ne) return false;
        grp = {static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(j), fusion::rms_norm_mul, {n, m}};
        return true;
    }

    bool mul_mat_add(std::size_t i, fused_group& grp) const noexcept {
        tensor* mm = g[i];
        const std::size_t j = next_compute(g, i + 1);
        tensor* a = at(j);
        if (mm->op != op_kind::mul_mat || a == nullptr || a->op != op_kind::add || j != i + 1) return false;
        if (mm->type != elem_type::f32 || a->type != elem_type::f32 || a->ne != mm->ne) return false;
        if (!f32_row_vector_of(other_operand(*a, mm), *mm)) return false;
        grp = {static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(j), fusion::mul_mat_add, {mm, a}};
        return true;
    }

    bool glu_pair(std::size_t i, fused_group& grp) const noexcept {
        tensor* gate = g[i];
        tensor* up = at(i + 1);
        tensor* glu = at(i + 2);
        if (gate->op != op_kind::mul_mat || up == nullptr || up->op != op_kind::mul_mat || glu == nullptr ||
            glu->op != op_kind::glu)
            return false;
        const tensor* wg = gate->src[0];
        const tensor* wu = up->src[0];
        if (gate->src[1] != up->src[1] || wg->type != wu->type || wg->ne != wu->ne || wg->nb != wu->nb) return false;
        if (glu->src[0] != gate || glu->src[1] != up || glu->param<std::int32_t>(1) != 0) return false; // not swapped
        if (gate->type != elem_type::f32 || glu->type != elem_type::f32 || glu->ne != gate->ne) return false;
        grp = {static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(i + 2), fusion::glu_pair, {gate, up, glu}};
        return true;
    }

    bool rope_set_rows(std::size_t i, fused_group& grp) const noexcept {
        tensor* r = g[i];
        if (r->op != op_kind::rope || r->type != elem_type::f32 || !r->is_contiguous()) return false;
        // the reshape views from the rope to the set_rows
        const tensor* rows = r;
        std::size_t j = i + 1;
        for (; j < g.size() && g[j] != nullptr && is_view_op(g[j]->op); ++j) {
            if (g[j]->src[0] != rows || g[j]->view_offs != 0 || !g[j]->is_contiguous()) return false;
            rows = g[j];
        }
        tensor* s = at(j);
        if (s == nullptr || s->op != op_kind::set_rows || s->src[0] != rows || s->src[0] == r) return false;
        // a row of the written tensor is one token's heads: [head, n_head] of the rope
        if (rows->ne[0] != r->ne[0] * r->ne[1] || rows->ne[1] != r->ne[2] || r->ne[3] != 1 || rows->ne[2] != 1)
            return false;
        grp = {static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(j), fusion::rope_set_rows, {r, s}};
        return true;
    }

    bool soft_max_scale_mask(std::size_t i, fused_group& grp) const noexcept {
        std::size_t k = i;
        std::array<tensor*, 4> parts{};
        std::size_t n = 0;
        tensor* prev = nullptr;
        tensor* t = g[k];
        if (t->op == op_kind::scale) {
            if (t->param<float>(1) != 0.0f || t->type != elem_type::f32) return false; // scale_ext's bias
            parts[n++] = prev = t;
            t = at(++k);
        }
        if (t != nullptr && t->op == op_kind::add) {
            if (prev != nullptr && (t->src[0] != prev)) return false;
            if (t->type != elem_type::f32 || t->src[0]->type != elem_type::f32) return false;
            const tensor* mask = t->src[1];
            if (mask == nullptr || (mask->type != elem_type::f32 && mask->type != elem_type::f16) ||
                mask->ne[0] != t->ne[0] || mask->ne[1] != t->ne[1] || t->ne[2] % mask->ne[2] != 0 ||
                t->ne[3] % mask->ne[3] != 0)
                return false;
            parts[n++] = prev = t;
            t = at(++k);
        }
        if (prev == nullptr || t == nullptr || t->op != op_kind::soft_max || t->src[0] != prev) return false;
        if (t->src[1] != nullptr || t->src[2] != nullptr || t->param<float>(0) != 1.0f || t->param<float>(1) != 0.0f)
            return false;
        parts[n] = t;
        grp = {static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(k), fusion::soft_max_scale_mask, parts};
        return true;
    }

    bool match(std::size_t i, fusion_set on, fused_group& grp) const noexcept {
        switch (g[i]->op) {
        case op_kind::rms_norm: return on.contains(fusion::rms_norm_mul) && rms_norm_mul(i, grp);
        case op_kind::mul_mat:
            return (on.contains(fusion::glu_pair) && glu_pair(i, grp)) ||
                   (on.contains(fusion::mul_mat_add) && mul_mat_add(i, grp));
        case op_kind::rope: return on.contains(fusion::rope_set_rows) && rope_set_rows(i, grp);
        case op_kind::scale:
        case op_kind::add: return on.contains(fusion::soft_max_scale_mask) && soft_max_scale_mask(i, grp);
        default: return false;
        }
    }
};

/// a and b share bytes (each from its first element to its last).
template <class = void>
inline bool overlap(const tensor& a, const tensor& b) noexcept {
    if (a.data == nullptr || b.data == nullptr) return false;
    const auto* a0 = static_cast<const std::byte*>(a.data);
    const auto* b0 = static_cast<const std::byte*>(b.data);
    return a0 < b0 + b.nbytes() && b0 < a0 + a.nbytes();
}
template <class = void>
inline bool same_place(const tensor& a, const tensor& b) noexcept {
    return a.data == b.data && a.type == b.type && a.ne == b.ne && a.nb == b.nb;
}
/// t is one of the group's nodes, or a view of one.
template <class = void>
inline bool inside(const fused_group& g, const tensor* t) noexcept {
    for (; t != nullptr; t = is_view_op(t->op) ? t->src[0] : nullptr)
        for (const tensor* p : g.parts)
            if (p == t) return true;
    return false;
}

/// The group's memory allows computing it as one: no node of it writes memory that a
/// read from outside it also uses, unless it is that very tensor (the same element in
/// the same place: read, then written), and never a mul_mat's weights (other threads or
/// invocations read them while results are written). Unfused, the graph allocator may
/// give a node the memory of a tensor that died at an earlier node of the group; fused,
/// that tensor is still being read.
template <class = void>
inline bool memory_safe(const fused_group& g) noexcept {
    for (const tensor* w : g.parts) {
        if (w == nullptr) break;
        for (const tensor* q : g.parts) {
            if (q == nullptr) break;
            for (std::size_t j = 0; j < q->src.size(); ++j) {
                const tensor* r = q->src[j];
                if (r == nullptr || inside(g, r) || !overlap(*w, *r)) continue;
                const bool weights = q->op == op_kind::mul_mat && j == 0;
                if (weights || !same_place(*w, *r)) return false;
            }
        }
    }
    return true;
}

} // namespace fusion_detail

/// The groups of g that `accept` takes (a backend's predicate: bool(const fused_group&)),
/// in node order and disjoint. A group's intermediates (every node of it but the last,
/// views included) must be read by nothing outside it: no node of g after it, no
/// output flag, not kept by the view; and its memory must allow it (memory_safe: the
/// tensors' places are read where they have them, so a backend finds its groups once
/// the graph is allocated).
template <class Accept>
std::vector<fused_group> find_fusions(graph_view g, fusion_set on, Accept&& accept) {
    std::vector<fused_group> out;
    if (on.empty() || g.all_kept()) return out;
    const fusion_detail::matcher<> m{g};
    for (std::size_t i = 0; i < g.size(); ++i) {
        if (g[i] == nullptr) return {};
        fused_group grp;
        if (!m.match(i, on, grp)) continue;
        bool sealed = true;
        for (std::uint32_t k = grp.first; k < grp.last && sealed; ++k)
            sealed = !g[k]->has_flag(tensor_flag::output) && !g.kept(k);
        if (sealed && fusion_detail::memory_safe<>(grp) && accept(static_cast<const fused_group&>(grp))) {
            out.push_back(grp);
            i = grp.last;
        }
    }
    if (out.empty()) return out;
    // readers of the intermediates outside their groups: such a group is dropped
    std::vector<std::pair<const tensor*, std::uint32_t>> inner; // (intermediate, its group)
    for (std::uint32_t q = 0; q < out.size(); ++q)
        for (std::uint32_t k = out[q].first; k < out[q].last; ++k) inner.emplace_back(g[k], q);
    std::sort(inner.begin(), inner.end());
    std::vector<std::uint8_t> drop(out.size(), 0);
    std::size_t q = 0; // the group of node k, or the next one
    for (std::size_t k = 0; k < g.size(); ++k) {
        while (q < out.size() && out[q].last < k) ++q;
        const bool inside = q < out.size() && out[q].first <= k && k <= out[q].last;
        for (const tensor* s : g[k]->src) {
            if (s == nullptr) continue;
            const auto it = std::lower_bound(inner.begin(), inner.end(), std::pair<const tensor*, std::uint32_t>(s, 0));
            if (it == inner.end() || it->first != s) continue;
            if (!inside || it->second != q) drop[it->second] = 1;
        }
    }
    std::size_t w = 0;
    for (std::size_t k = 0; k < out.size(); ++k)
        if (drop[k] == 0) out[w++] = out[k];
    out.resize(w);
    return out;
}

/// Every group of g, as no backend restricts them.
template <class = void>
inline std::vector<fused_group> find_fusions(graph_view g, fusion_set on = {}) {
    return find_fusions(g, on, [](const fused_group&) { return true; });
}

} // namespace backplane
