#pragma once
// Allocating every tensor of a context in buffers of one buffer type (loading weights).
//
//     context ctx({.no_alloc = true});
//     tensor* w = ctx.new_tensor_2d(elem_type::f32, 4096, 4096);
//     ...
//     auto bufs = alloc_tensors(ctx, device.buffer_type(), buffer_usage::weights);
//     if (!bufs) return bufs.error();
//     // every tensor of ctx now lives in *bufs, which must outlive them
//
// The tensors are packed in context order. A buffer type with a max_size smaller than the
// total gets several buffers, each at most max_size, cut between tensors (a tensor is
// never split, so one larger than max_size is an error). Either every tensor is placed or
// none is: on failure the buffers made so far are released and the tensors placed in
// them get their null data and buffer back, so the context can be retried as it was.

#include <backplane/core/context.hpp>
#include <backplane/core/detail/describe.hpp>
#include <backplane/core/error.hpp>
#include <backplane/memory/buffer.hpp>
#include <backplane/memory/detail/align.hpp>
#include <backplane/memory/tensor_alloc.hpp>

#include <cstddef>
#include <cstdint>
#include <new>
#include <string>
#include <utility>
#include <vector>

namespace backplane {

/// Owning list of buffers holding a set of tensors; keep it alive as long as they are used.
class buffer_list {
public:
    using const_iterator = std::vector<buffer_ptr>::const_iterator;

    buffer_list() = default;
    explicit buffer_list(std::vector<buffer_ptr> buffers) noexcept : buffers_(std::move(buffers)) {}

    [[nodiscard]] std::size_t size() const noexcept { return buffers_.size(); }
    [[nodiscard]] bool empty() const noexcept { return buffers_.empty(); }
    /// Bytes of all buffers together.
    [[nodiscard]] std::size_t total_bytes() const noexcept {
        std::size_t n = 0;
        for (const auto& b : buffers_) n += b->size();
        return n;
    }
    [[nodiscard]] buffer_handle& operator[](std::size_t i) const noexcept { return *buffers_[i]; }
    /// True when `h` is one of these buffers (e.g. `list.contains(t->buffer)`).
    [[nodiscard]] bool contains(const buffer_handle* h) const noexcept {
        for (const auto& b : buffers_)
            if (b.get() == h) return true;
        return false;
    }

    /// Iterates the owning pointers: `for (const auto& b : list) b->size();`
    [[nodiscard]] const_iterator begin() const noexcept { return buffers_.begin(); }
    [[nodiscard]] const_iterator end() const noexcept { return buffers_.end(); }

    void set_usage(buffer_usage u) noexcept {
        for (auto& b : buffers_) b->set_usage(u);
    }
    /// Sets every byte of every buffer to `value`; stops at the first failure.
    status clear(std::uint8_t value) {
        for (auto& b : buffers_)
            if (status s = b->clear(value); !s) return s;
        return {};
    }

    void push_back(buffer_ptr b) { buffers_.push_back(std::move(b)); }
    /// Releases all buffers (tensors placed in them must not be used afterwards).
    void reset() noexcept { buffers_.clear(); }

private:
    std::vector<buffer_ptr> buffers_;
};

namespace detail {

/// Undoes a partial alloc_tensors: tensors forget their addresses before the buffers
/// they point into go away.
class placement_rollback {
public:
    explicit placement_rollback(std::vector<tensor*>& placed) noexcept : placed_(placed) {}
    placement_rollback(const placement_rollback&) = delete;
    placement_rollback& operator=(const placement_rollback&) = delete;
    ~placement_rollback() {
        if (committed_) return;
        for (tensor* t : placed_) unplace_tensor(*t);
    }
    void commit() noexcept { committed_ = true; }

private:
    std::vector<tensor*>& placed_;
    bool committed_ = false;
};

} // namespace detail

/// Allocates every tensor of `ctx` that has no data yet (or whose buffer was freed: it is
/// placed again) in new buffers of type `bt`, and initialises views on their sources. Returns the buffers (none when there was nothing
/// to allocate), each with usage `usage`.
///
/// Errors (nothing allocated, tensors unchanged): a tensor larger than bt.max_size()
/// (alloc_failed, naming it), a buffer the buffer type cannot allocate (its status), a
/// view whose source has no data and is not in ctx (invalid_argument).
[[nodiscard]] inline result<buffer_list> alloc_tensors(context& ctx, buffer_type_ref bt,
                                                       buffer_usage usage = buffer_usage::any) {
    std::vector<tensor*> placed; // declared before the rollback guard, destroyed after it
    try {
        const std::size_t alignment = detail::sane_alignment(bt.alignment());
        const std::size_t max_size = bt.max_size();

        // Cut the tensors into runs whose padded sizes add up to at most max_size. Padding
        // every size keeps each run's sum equal to what the bump allocator will consume,
        // given that the buffer type returns aligned buffers.
        struct run {
            std::size_t first; // index into `todo`
            std::size_t bytes;
        };
        std::vector<tensor*> todo;
        std::vector<run> runs;
        for (tensor& t : ctx) {
            if ((t.data != nullptr && buffer_alive(t)) || t.view_src != nullptr) continue;
            const std::size_t need = bt.alloc_size(t);
            const auto padded = detail::align_up(need, alignment);
            if (!padded || *padded > max_size)
                return status(errc::alloc_failed, "alloc_tensors: tensor " + detail::describe(&t) + " needs " +
                                                      std::to_string(need) + " bytes, more than the " +
                                                      std::to_string(max_size) + " bytes buffer type '" +
                                                      std::string(bt.name()) + "' can allocate at once");
            if (runs.empty() || runs.back().bytes + *padded > max_size) runs.push_back({todo.size(), 0});
            runs.back().bytes += *padded;
            todo.push_back(&t);
        }

        detail::placement_rollback guard(placed);
        placed.reserve(ctx.size());
        buffer_list list;
        for (std::size_t r = 0; r < runs.size(); ++r) {
            auto buf = bt.allocate(runs[r].bytes);
            if (!buf) {
                const status& e = *buf.error_if();
                return status(e.code(),
                              "alloc_tensors: buffer " + std::to_string(r + 1) + " of " + std::to_string(runs.size()) +
                                  " (" + std::to_string(runs[r].bytes) + " bytes) in '" + std::string(bt.name()) +
                                  "' failed: " + e.message(),
                              e.native());
            }
            tensor_allocator alloc(**buf);
            const std::size_t last = r + 1 < runs.size() ? runs[r + 1].first : todo.size();
            for (std::size_t i = runs[r].first; i < last; ++i) {
                if (status s = alloc.allocate(*todo[i]); !s) return s;
                placed.push_back(todo[i]);
            }
            list.push_back(std::move(*buf));
        }

        // Views last: their sources, wherever they are in the context, have data now.
        for (tensor& t : ctx) {
            if (t.view_src == nullptr || (t.data != nullptr && buffer_alive(t))) continue;
            if (status s = init_view(t); !s) return s;
            placed.push_back(&t);
        }

        list.set_usage(usage);
        guard.commit();
        return result<buffer_list>(std::move(list));
    } catch (const std::bad_alloc&) {
        return status(errc::alloc_failed, "alloc_tensors: out of host memory");
    }
}

} // namespace backplane
