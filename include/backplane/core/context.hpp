#pragma once
// context: the arena that owns tensors and, unless made with no_alloc, their host data.
//
// Tensors live in a std::deque so their addresses never change while the context grows;
// there is no fixed capacity. Host data comes from aligned chunks that are allocated as
// needed and freed with the context. A no_alloc context holds metadata only: its tensors
// get memory later from a backend buffer (alloc_tensors, the graph allocator).

#include <backplane/core/error.hpp>
#include <backplane/core/tensor.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <initializer_list>
#include <limits>
#include <memory>
#include <new>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace backplane {

struct context_params {
    bool no_alloc = false;              ///< metadata only: data is allocated later in a buffer
    std::size_t alignment = 64;         ///< alignment of host data (a power of two)
    std::size_t chunk_size = 1u << 20;  ///< host data is carved from chunks of at least this size
};

class context {
public:
    context() : context(context_params{}) {}
    explicit context(context_params p) : params_(p) {
        if (p.alignment == 0 || (p.alignment & (p.alignment - 1)) != 0)
            throw error("context: alignment " + std::to_string(p.alignment) + " is not a power of two");
    }
    context(const context&) = delete;
    context& operator=(const context&) = delete;
    context(context&&) noexcept = default; // std::deque keeps element addresses on move
    context& operator=(context&&) noexcept = default;
    ~context() = default;

    [[nodiscard]] bool no_alloc() const noexcept { return params_.no_alloc; }
    [[nodiscard]] const context_params& params() const noexcept { return params_; }

    /// A new contiguous tensor with no op (a leaf). Validates the type and shape.
    tensor* new_tensor(elem_type type, std::span<const std::int64_t> shape) {
        check_type("new_tensor", type);
        if (shape.empty() || shape.size() > max_dims)
            throw error("new_tensor: a tensor has 1 to 4 dimensions, got " + std::to_string(shape.size()));
        std::array<std::int64_t, max_dims> ne{1, 1, 1, 1};
        for (std::size_t i = 0; i < shape.size(); ++i) {
            if (shape[i] < 0)
                throw error("new_tensor: negative extent " + std::to_string(shape[i]) + " in dimension " +
                            std::to_string(i));
            ne[i] = shape[i];
        }
        if (ne[0] % block_size(type) != 0)
            throw error("new_tensor: a row of " + std::string(to_string(type)) + " must be a multiple of " +
                        std::to_string(block_size(type)) + " values, got ne0 = " + std::to_string(ne[0]));
        // contiguous strides are products of extents: check the element and byte counts
        // before computing them (nbytes() would wrap around to a few bytes)
        constexpr auto max_bytes = static_cast<std::size_t>(std::numeric_limits<std::ptrdiff_t>::max());
        std::size_t bytes = type_size(type);
        bool fits = checked_nelements(ne).has_value();
        for (std::size_t i = 0; i < max_dims && fits; ++i) {
            const auto n = static_cast<std::size_t>(i == 0 ? ne[0] / block_size(type) : ne[i]);
            fits = n == 0 || bytes <= max_bytes / n;
            bytes *= n;
        }
        if (!fits)
            throw error("new_tensor: " + std::string(to_string(type)) + " [" + std::to_string(ne[0]) + ", " +
                        std::to_string(ne[1]) + ", " + std::to_string(ne[2]) + ", " + std::to_string(ne[3]) +
                        "] is too large: its size overflows");
        tensor& t = tensors_.emplace_back();
        t.type = type;
        t.ne = ne;
        t.nb = contiguous_strides(type, ne);
        if (!params_.no_alloc) t.set_placement(nullptr, 0, allocate_host(t.nbytes()));
        return &t;
    }
    tensor* new_tensor(elem_type type, std::initializer_list<std::int64_t> shape) {
        return new_tensor(type, std::span<const std::int64_t>(shape.begin(), shape.size()));
    }
    tensor* new_tensor_1d(elem_type t, std::int64_t ne0) { return new_tensor(t, {ne0}); }
    tensor* new_tensor_2d(elem_type t, std::int64_t ne0, std::int64_t ne1) { return new_tensor(t, {ne0, ne1}); }
    tensor* new_tensor_3d(elem_type t, std::int64_t ne0, std::int64_t ne1, std::int64_t ne2) {
        return new_tensor(t, {ne0, ne1, ne2});
    }
    tensor* new_tensor_4d(elem_type t, std::int64_t ne0, std::int64_t ne1, std::int64_t ne2, std::int64_t ne3) {
        return new_tensor(t, {ne0, ne1, ne2, ne3});
    }
    /// A new leaf with the type and shape of `like` (contiguous).
    tensor* new_tensor_like(const tensor& like) { return new_tensor(like.type, std::span(like.ne)); }

    /// A tensor that aliases `src`'s memory with the given shape, strides and byte offset.
    /// Used by the view ops; data is derived from the source when it has host data.
    tensor* new_view(tensor* src, elem_type type, const std::array<std::int64_t, max_dims>& ne,
                     const std::array<std::size_t, max_dims>& nb, std::size_t offset) {
        check_type("new_view", type);
        tensor* root = src->view_src ? src->view_src : src;
        const std::size_t offs = src->view_offs + offset;
        tensor& t = tensors_.emplace_back();
        t.type = type;
        t.ne = ne;
        t.nb = nb;
        t.view_src = root;
        t.view_offs = offs;
        // in the source's buffer, with its serial: the view is alive exactly while it is
        t.set_placement(root->buffer, root->buffer_serial,
                        root->data ? static_cast<std::byte*>(root->data) + offs : nullptr, root->placer);
        return &t;
    }

    /// Adopts a tensor for an op result: same as new_tensor but marks nothing. Kept for
    /// builders that compute the output shape first.
    tensor* new_result(elem_type type, const std::array<std::int64_t, max_dims>& ne) {
        return new_tensor(type, std::span<const std::int64_t>(ne));
    }

    /// Number of tensors ever created in this context.
    [[nodiscard]] std::size_t size() const noexcept { return tensors_.size(); }
    /// Bytes of host data allocated so far (0 for a no_alloc context).
    [[nodiscard]] std::size_t host_bytes() const noexcept { return host_bytes_; }

    auto begin() noexcept { return tensors_.begin(); }
    auto end() noexcept { return tensors_.end(); }
    auto begin() const noexcept { return tensors_.begin(); }
    auto end() const noexcept { return tensors_.end(); }

    /// The first tensor with this name, or null.
    [[nodiscard]] tensor* find(std::string_view name) noexcept {
        for (auto& t : tensors_)
            if (t.name == name) return &t;
        return nullptr;
    }

private:
    // An elem_type cast from a number elem_type does not name would index the type
    // tables out of range.
    static void check_type(const char* what, elem_type type) {
        if (!is_valid(type))
            throw error(std::string(what) + ": element type " + std::to_string(static_cast<unsigned>(type)) +
                        " is not an elem_type (0.." + std::to_string(elem_type_count - 1) + ")");
    }

    struct aligned_free {
        std::size_t alignment;
        void operator()(std::byte* p) const noexcept { ::operator delete[](p, std::align_val_t{alignment}); }
    };
    using chunk_ptr = std::unique_ptr<std::byte[], aligned_free>;

    void* allocate_host(std::size_t bytes) {
        const std::size_t a = params_.alignment;
        const std::size_t need = (std::max<std::size_t>(bytes, 1) + a - 1) & ~(a - 1);
        if (chunks_.empty() || chunk_used_ + need > chunk_cap_) {
            const std::size_t cap = std::max(need, params_.chunk_size);
            std::byte* p = nullptr;
            try {
                p = static_cast<std::byte*>(::operator new[](cap, std::align_val_t{a}));
            } catch (const std::bad_alloc&) {
                throw error("context: out of host memory allocating " + std::to_string(cap) + " bytes",
                            errc::alloc_failed);
            }
            chunks_.emplace_back(p, aligned_free{a});
            chunk_cap_ = cap;
            chunk_used_ = 0;
        }
        void* p = chunks_.back().get() + chunk_used_;
        chunk_used_ += need;
        host_bytes_ += need;
        return p;
    }

    context_params params_;
    std::deque<tensor> tensors_;
    std::vector<chunk_ptr> chunks_;
    std::size_t chunk_cap_ = 0;
    std::size_t chunk_used_ = 0;
    std::size_t host_bytes_ = 0;
};

} // namespace backplane
