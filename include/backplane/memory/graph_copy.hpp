#pragma once
// A deep copy of a graph onto another buffer type (another backend's memory): every
// tensor the graph reaches, leafs and nodes, re-created in a context of its own; every
// tensor that is not a view placed in ONE new buffer; views re-created on their copied
// sources; data copied (tensor_copy) from every original that has some. The result owns
// all of it and frees it at once.
//
//     auto copy = graph_copy(vk, g);                  // result<copied_graph>
//     if (!copy) return copy.error();                 // alloc_failed names the buffer size
//     vk.compute(copy->graph());                      // the same computation on Vulkan
//     tensor* out = copy->find(g.back());             // the copy of an original tensor
//
// Guards (graph_copy_options::guard_bytes): each placed tensor gets guard bytes before
// and after it, holding fill_byte; check_guards() reads them back and names the tensor
// next to any guard a kernel wrote over (an out-of-bounds write). Tensors the original
// had no data for hold fill_byte too (0xff: NaN in every float type), so an element a
// kernel never writes shows up.

#include <backplane/core/concepts.hpp>
#include <backplane/core/context.hpp>
#include <backplane/core/detail/describe.hpp>
#include <backplane/core/error.hpp>
#include <backplane/core/graph.hpp>
#include <backplane/core/tensor.hpp>
#include <backplane/memory/buffer.hpp>
#include <backplane/memory/detail/align.hpp>
#include <backplane/memory/tensor_alloc.hpp>
#include <backplane/memory/tensor_copy.hpp>
#include <backplane/memory/tensor_io.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <new>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace backplane {

namespace detail {
struct graph_copier;
}

struct graph_copy_options {
    bool copy_data = true;         ///< copy the data of every original tensor that has data
    std::size_t guard_bytes = 0;   ///< guard bytes before and after each placed tensor (rounded up)
    std::uint8_t fill_byte = 0xff; ///< guards and tensors with no data to copy hold this byte
};

/// The copy of a graph: its own context, one buffer, the copied graph, and the map from
/// original tensors to their copies. Movable; frees everything at once.
class copied_graph {
  public:
    copied_graph(copied_graph&&) noexcept = default;
    copied_graph& operator=(copied_graph&&) noexcept = default;

    /// The copied graph (same node order as the original).
    [[nodiscard]] backplane::graph& graph() noexcept { return graph_; }
    [[nodiscard]] const backplane::graph& graph() const noexcept { return graph_; }
    /// The copy of an original tensor, or null when the graph did not reach it.
    [[nodiscard]] tensor* find(const tensor* original) const noexcept {
        const auto it = map_.find(original);
        return it == map_.end() ? nullptr : it->second;
    }
    /// The copy of an original tensor; an error when the graph did not reach it.
    [[nodiscard]] tensor& at(const tensor& original) const {
        tensor* t = find(&original);
        if (t == nullptr)
            throw error("copied_graph::at: tensor " + detail::describe(&original) +
                        " is not in the copied graph");
        return *t;
    }
    /// The buffer holding every copied tensor (null when nothing needed memory).
    [[nodiscard]] buffer_handle* buffer() const noexcept { return buffer_.get(); }
    /// Bytes of that buffer.
    [[nodiscard]] std::size_t bytes() const noexcept { return buffer_ ? buffer_->size() : 0; }
    [[nodiscard]] std::size_t guard_count() const noexcept { return guards_.size(); }

    /// Reads every guard back: ok when all still hold the fill byte, else an out_of_range
    /// status naming the tensors next to the guards that were written and how many bytes
    /// changed.
    [[nodiscard]] status check_guards() const {
        std::string bad;
        std::vector<std::uint8_t> bytes;
        for (const guard& g : guards_) {
            bytes.assign(g.t->nbytes(), 0);
            if (auto s = tensor_get(*g.t, bytes.data(), 0, bytes.size()); !s)
                return s;
            std::size_t changed = 0;
            for (std::uint8_t b : bytes)
                changed += b != fill_ ? 1 : 0;
            if (changed == 0)
                continue;
            if (!bad.empty())
                bad += "; ";
            bad += std::to_string(changed) + " guard bytes " + g.where;
        }
        if (bad.empty())
            return {};
        return {errc::out_of_range, "out-of-bounds write: " + bad};
    }

  private:
    friend struct detail::graph_copier;

    struct guard {
        tensor* t;         // an i32 tensor over the guard bytes (never in the graph)
        std::string where; // "before 'x'", "after 'x'"
    };
    copied_graph() : ctx_(context_params{.no_alloc = true}) {}

    context ctx_;
    buffer_ptr buffer_;
    backplane::graph graph_;
    std::unordered_map<const tensor*, tensor*> map_;
    std::vector<guard> guards_;
    std::uint8_t fill_ = 0xff;
};

namespace detail {

/// The copy of t (and, first, of its view source and sources) in ctx.
inline tensor* dup_for_copy(context& ctx, std::unordered_map<const tensor*, tensor*>& map,
                            tensor* t) {
    if (t == nullptr)
        return nullptr;
    if (auto it = map.find(t); it != map.end())
        return it->second;
    // sources first (iteratively: chains of any length)
    std::vector<std::pair<tensor*, int>> stack{{t, 0}};
    while (!stack.empty()) {
        auto& [cur, next] = stack.back();
        if (next <= max_srcs) {
            tensor* s = next == 0 ? cur->view_src : cur->src[static_cast<std::size_t>(next - 1)];
            ++next;
            if (s != nullptr && !map.contains(s))
                stack.push_back({s, 0});
            continue;
        }
        tensor* o = cur;
        stack.pop_back();
        if (map.contains(o))
            continue;
        tensor* c = nullptr;
        if (o->view_src != nullptr) {
            c = ctx.new_view(map.at(o->view_src), o->type, o->ne, o->nb, o->view_offs);
        } else {
            c = ctx.new_tensor(o->type, std::span<const std::int64_t>(o->ne));
            c->nb = o->nb;
        }
        c->op = o->op;
        c->flags = o->flags;
        c->op_params = o->op_params;
        c->name = o->name;
        for (std::size_t j = 0; j < max_srcs; ++j)
            c->src[j] = o->src[j] != nullptr ? map.at(o->src[j]) : nullptr;
        map.emplace(o, c);
    }
    return map.at(t);
}

} // namespace detail

namespace detail {
struct graph_copier {
    static result<copied_graph> run(buffer_type_ref bt, const graph& g,
                                    const graph_copy_options& o) {
        try {
            copied_graph out;
            out.fill_ = o.fill_byte;
            // re-create every tensor reached, leafs and nodes, in graph order
            for (tensor* t : g.leafs())
                dup_for_copy(out.ctx_, out.map_, t);
            for (tensor* t : g.nodes())
                dup_for_copy(out.ctx_, out.map_, t);
            // (original, copy) of every tensor that needs memory, in creation order of the
            // copies (sources before consumers), so the layout does not depend on hashing
            std::unordered_map<const tensor*, const tensor*> original_of;
            for (auto& [orig, copy] : out.map_)
                original_of.emplace(copy, orig);
            std::vector<std::pair<const tensor*, tensor*>> placed;
            for (tensor& c : out.ctx_)
                if (c.view_src == nullptr)
                    placed.push_back({original_of.at(&c), &c});

            // one buffer: [guard] t0 [guard] t1 ... [guard]
            const std::size_t align = detail::sane_alignment(bt.alignment());
            const std::size_t guard =
                o.guard_bytes == 0
                    ? 0
                    : *detail::align_up(std::max<std::size_t>(o.guard_bytes, 4), align);
            std::vector<std::size_t> offsets;
            offsets.reserve(placed.size());
            std::size_t total = guard;
            for (auto& [orig, copy] : placed) {
                const auto padded =
                    detail::align_up(std::max<std::size_t>(bt.alloc_size(*copy), 1), align);
                if (!padded || *padded > bt.max_size() - std::min(bt.max_size(), total + guard))
                    return status(errc::alloc_failed,
                                  "graph_copy: the copy of " + std::to_string(placed.size()) +
                                      " tensors does not fit one buffer of '" +
                                      std::string(bt.name()) + "' (at most " +
                                      std::to_string(bt.max_size()) + " bytes)");
                offsets.push_back(total);
                total += *padded + guard;
            }
            if (total > 0) {
                auto buf = bt.allocate(total);
                if (!buf) {
                    const status& e = *buf.error_if();
                    return status(e.code(),
                                  "graph_copy: allocating " + std::to_string(total) +
                                      " bytes of '" + std::string(bt.name()) + "' for " +
                                      std::to_string(placed.size()) +
                                      " tensors failed: " + e.message(),
                                  e.native());
                }
                out.buffer_ = std::move(*buf);
                if (auto s = out.buffer_->clear(o.fill_byte); !s)
                    return s;
            }
            auto* base = static_cast<std::byte*>(out.buffer_ ? out.buffer_->base() : nullptr);
            auto make_guard = [&](std::size_t at, std::string where) -> status {
                tensor* gt =
                    out.ctx_.new_tensor(elem_type::i32, {static_cast<std::int64_t>(guard / 4)});
                gt->name = "guard " + where;
                place_tensor(*gt, *out.buffer_, base + at);
                if (auto s = out.buffer_->init_tensor(*gt); !s)
                    return s;
                out.guards_.push_back({gt, std::move(where)});
                return {};
            };
            for (std::size_t i = 0; i < placed.size(); ++i) {
                tensor* c = placed[i].second;
                place_tensor(*c, *out.buffer_, base + offsets[i]);
                if (auto s = out.buffer_->init_tensor(*c); !s)
                    return s;
                if (guard != 0) {
                    if (auto s = make_guard(offsets[i] - guard, "before " + detail::describe(c));
                        !s)
                        return s;
                    const auto padded =
                        *detail::align_up(std::max<std::size_t>(bt.alloc_size(*c), 1), align);
                    if (auto s = make_guard(offsets[i] + padded, "after " + detail::describe(c));
                        !s)
                        return s;
                }
            }
            // views on their copied sources (creation order puts sources first)
            for (tensor& c : out.ctx_)
                if (c.view_src != nullptr && c.data == nullptr)
                    if (auto s = init_view(c); !s)
                        return s;
            // the data
            if (o.copy_data)
                for (auto& [orig, copy] : placed)
                    if (orig->data != nullptr)
                        if (auto s = tensor_copy(*orig, *copy); !s)
                            return s;
            // the graph, node for node
            for (tensor* t : g.leafs())
                out.graph_.build_forward(out.map_.at(t));
            for (tensor* t : g.nodes())
                out.graph_.build_forward(out.map_.at(t));
            return result<copied_graph>(std::move(out));
        } catch (const std::bad_alloc&) {
            return status(errc::alloc_failed, "graph_copy: out of host memory");
        } catch (const error& e) {
            return status(e.code(), std::string("graph_copy: ") + e.what());
        }
    }
};
} // namespace detail

/// Copies g into new memory of buffer type bt. Errors: alloc_failed when the buffer
/// cannot be allocated (the size is named) or exceeds bt.max_size(); the status of a
/// failed data copy. Nothing leaks on any error.
[[nodiscard]] inline result<copied_graph> graph_copy(buffer_type_ref bt, const graph& g,
                                                     const graph_copy_options& o = {}) {
    return detail::graph_copier::run(bt, g, o);
}

/// graph_copy into the memory of backend b (its buffer type).
template <class B>
requires requires(B& b) {
    buffer_type_ref(b.buffer_type());
}
[[nodiscard]] result<copied_graph> graph_copy(B& b, const graph& g,
                                              const graph_copy_options& o = {}) {
    return graph_copy(buffer_type_ref(b.buffer_type()), g, o);
}

} // namespace backplane
