#pragma once
// Placing tensors in a buffer that already exists.
//
// tensor_allocator is the simplest allocator: a bump pointer over one buffer, for tensors
// that live as long as the buffer (weights, KV caches). init_view gives a view tensor its
// address inside its source, the one rule every allocator shares.
//
//     auto buf = buffer_type_ref(cpu_buffer_type::instance()).allocate(1 << 20).value();
//     tensor_allocator ta(*buf);
//     if (auto s = ta.allocate(*w); !s) return s; // w->data now points into buf

#include <backplane/core/detail/describe.hpp>
#include <backplane/core/error.hpp>
#include <backplane/core/tensor.hpp>
#include <backplane/memory/buffer.hpp>
#include <backplane/memory/detail/align.hpp>

#include <cstddef>
#include <string>

namespace backplane {


/// Gives `view` its address: `view_src->data + view_offs`, in view_src's buffer, then lets
/// that buffer prepare it. Fails (and changes nothing) when `view` is not a view, when its
/// source has no data yet, or when the view reaches past its source's bytes.
[[nodiscard]] inline status init_view(tensor& view) {
    const tensor* src = view.view_src;
    if (src == nullptr)
        return {errc::invalid_argument, "init_view: tensor " + detail::describe(&view) + " is not a view"};
    if (src->data == nullptr)
        return {errc::invalid_argument, "init_view: the source " + detail::describe(src) + " of view " +
                                            detail::describe(&view) + " has no data yet"};
    const std::size_t src_bytes = src->nbytes();
    const std::size_t view_bytes = view.nbytes();
    if (view.view_offs > src_bytes || view_bytes > src_bytes - view.view_offs)
        return {errc::out_of_range, "init_view: view " + detail::describe(&view) + " at offset " +
                                        std::to_string(view.view_offs) + " spans " + std::to_string(view_bytes) +
                                        " bytes, outside its source's " + std::to_string(src_bytes)};
    if (status s = detail::check_buffer_alive("init_view", *src); !s) return s;
    place_like(view, *src, static_cast<std::byte*>(src->data) + view.view_offs);
    if (view.buffer != nullptr) {
        if (status s = view.buffer->init_tensor(view); !s) {
            unplace_tensor(view);
            return s;
        }
    }
    return {};
}

/// Places tensors one after another in one buffer, each at an address aligned to the
/// buffer type's alignment and taking the buffer type's alloc_size for it (which may be
/// more than the tensor's bytes, e.g. padding a device needs). Nothing is ever freed:
/// the buffer is the unit of lifetime. Views are placed inside their source (init_view).
class tensor_allocator {
public:
    explicit tensor_allocator(buffer_handle& buf)
        : buf_(&buf), alignment_(detail::sane_alignment(buf.type().alignment())),
          offset_(detail::padding_for(buf.base(), alignment_)) {
        if (offset_ > buf.size()) offset_ = buf.size(); // a tiny, misaligned buffer holds nothing
    }

    /// Places t (at the next aligned address) and calls the buffer's init_tensor. Out of
    /// space is an alloc_failed status naming the tensor and the sizes; a tensor that
    /// already has data is an invalid_argument status (data in a buffer since freed does
    /// not count: t is placed again). On failure the allocator is unchanged and t is left
    /// without data.
    [[nodiscard]] status allocate(tensor& t) {
        if (t.view_src != nullptr) return init_view(t);
        if (t.data != nullptr && buffer_alive(t))
            return {errc::invalid_argument, "tensor_allocator: tensor " + detail::describe(&t) + " already has data"};
        const std::size_t need = buf_->type().alloc_size(t);
        const auto padded = detail::align_up(need, alignment_);
        const std::size_t left = buf_->size() - offset_;
        if (!padded || *padded > left)
            return {errc::alloc_failed, "tensor_allocator: no room for tensor " + detail::describe(&t) + " (" +
                                            std::to_string(need) + " bytes) in buffer '" +
                                            std::string(buf_->type().name()) + "' of " + std::to_string(buf_->size()) +
                                            " bytes: " + std::to_string(left) + " bytes left"};
        place_tensor(t, *buf_, static_cast<std::byte*>(buf_->base()) + offset_);
        if (status s = buf_->init_tensor(t); !s) {
            unplace_tensor(t);
            return s;
        }
        offset_ += *padded;
        return {};
    }

    /// Bytes of the buffer consumed so far, alignment padding included.
    [[nodiscard]] std::size_t used() const noexcept { return offset_; }
    /// Bytes still free at the end of the buffer.
    [[nodiscard]] std::size_t available() const noexcept { return buf_->size() - offset_; }
    [[nodiscard]] buffer_handle& buffer() const noexcept { return *buf_; }

private:
    buffer_handle* buf_;
    std::size_t alignment_;
    std::size_t offset_;
};

} // namespace backplane
