#pragma once
// The runtime face of buffers and buffer types, generated from the concept models.
//
// A tensor points to its buffer through a buffer_handle: base address, size, usage and a
// pointer to a static function table that the compiler generates from the concrete
// buffer type (detail::buffer_vtable_for<B>). A backend author never writes a table.
// buffer_type_ref is the same idea for buffer types: a non-owning (object, table) pair
// whose identity is the object's address, so two references to one buffer type compare
// equal.
//
// The handle also does what every buffer needs and no backend should repeat: range
// checks of tensor reads and writes (an out-of-range access is a status, never memory
// corruption), default no-ops for optional capabilities, and the usage flag.
//
// Lifetime (docs/lifetime.md): every buffer has a serial, never reused, registered while
// the buffer exists. Tensors are placed with place_tensor / place_like, which record the
// serial beside the buffer pointer, so buffer_alive(t) tells whether t's buffer still
// exists without touching it.

#include <backplane/core/concepts.hpp>
#include <backplane/core/detail/describe.hpp>
#include <backplane/core/error.hpp>
#include <backplane/core/tensor.hpp>
#include <backplane/memory/detail/live_buffers.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace backplane {

class buffer_handle;

namespace detail {
/// An access of `size` bytes at byte `offset` of t: out_of_range when it does not fit in
/// t's bytes. The message gives offset and size apart (their sum may not fit in size_t).
inline status check_tensor_range(const char* what, const tensor& t, std::size_t offset, std::size_t size) {
    const std::size_t n = t.nbytes();
    if (offset <= n && size <= n - offset) return {};
    return {errc::out_of_range, std::string(what) + ": offset " + std::to_string(offset) + " + size " +
                                    std::to_string(size) + " exceeds tensor '" + t.name + "' of " + std::to_string(n) +
                                    " bytes"};
}
} // namespace detail

/// Deletes a buffer_handle through its generated table.
struct buffer_deleter {
    void operator()(buffer_handle* h) const noexcept;
};
/// Owning pointer to a type-erased buffer. Tensors placed in it point to the handle, so
/// it must outlive them (or they must be re-placed).
using buffer_ptr = std::unique_ptr<buffer_handle, buffer_deleter>;

namespace detail {

/// What keeps the code of this module (the program, or a backend plugin's shared
/// library) loaded: empty in a program; in a plugin, a weak reference to the library
/// handle that the loader set when it loaded the plugin (runtime/plugin.hpp). Each
/// module has its own copy (plugins are built with hidden visibility), so a buffer or a
/// backend made by plugin code holds its library, and unloading the plugin never pulls
/// code from under a live object.
inline std::weak_ptr<const void>& module_anchor() noexcept {
    static std::weak_ptr<const void> anchor;
    return anchor;
}

struct buffer_type_vtable {
    std::string_view (*name)(const void*);
    std::size_t (*alignment)(const void*);
    std::size_t (*max_size)(const void*);
    std::size_t (*alloc_size)(const void*, const tensor&);
    bool (*is_host)(const void*);
    result<buffer_ptr> (*allocate)(const void*, std::size_t);
    std::string_view (*device_name)(const void*); // null: the buffer type does not say
};

struct buffer_vtable {
    void (*destroy)(buffer_handle*) noexcept;
    status (*set_tensor)(void*, tensor&, const void*, std::size_t, std::size_t);
    status (*get_tensor)(void*, const tensor&, void*, std::size_t, std::size_t);
    status (*memset_tensor)(void*, tensor&, std::uint8_t, std::size_t, std::size_t);
    status (*clear)(void*, std::uint8_t);
    status (*init_tensor)(void*, tensor&);              // null: nothing to do
    bool (*copy_tensor)(void*, const tensor&, tensor&); // null: cannot copy device-side
    void (*reset)(void*);                               // null: nothing to do
};

template <buffer_type BT>
result<buffer_ptr> allocate_erased(const void* self, std::size_t size); // defined below make_buffer

template <buffer_type BT>
consteval auto optional_device_name() -> std::string_view (*)(const void*) {
    if constexpr (device_buffer_type<BT>)
        return [](const void* s) -> std::string_view { return static_cast<const BT*>(s)->device_name(); };
    else
        return nullptr;
}

template <buffer_type BT>
inline constexpr buffer_type_vtable buffer_type_vtable_for = {
    [](const void* s) -> std::string_view { return static_cast<const BT*>(s)->name(); },
    [](const void* s) -> std::size_t { return static_cast<const BT*>(s)->alignment(); },
    [](const void* s) -> std::size_t { return static_cast<const BT*>(s)->max_size(); },
    [](const void* s, const tensor& t) -> std::size_t { return static_cast<const BT*>(s)->alloc_size(t); },
    [](const void* s) -> bool { return static_cast<const BT*>(s)->is_host(); },
    &allocate_erased<BT>,
    optional_device_name<BT>(),
};

} // namespace detail

/// A non-owning reference to a buffer type object of any concrete type. Cheap to copy;
/// compares equal when it refers to the same object.
class buffer_type_ref {
public:
    template <buffer_type BT>
        requires(!std::is_same_v<BT, buffer_type_ref>)
    buffer_type_ref(const BT& bt) noexcept // NOLINT: implicit on purpose, like a span
        : self_(&bt), vt_(&detail::buffer_type_vtable_for<BT>) {}

    [[nodiscard]] std::string_view name() const { return vt_->name(self_); }
    [[nodiscard]] std::size_t alignment() const { return vt_->alignment(self_); }
    [[nodiscard]] std::size_t max_size() const { return vt_->max_size(self_); }
    [[nodiscard]] std::size_t alloc_size(const tensor& t) const { return vt_->alloc_size(self_, t); }
    [[nodiscard]] bool is_host() const { return vt_->is_host(self_); }
    /// A new buffer of at least `size` bytes; out of memory is a status.
    [[nodiscard]] result<buffer_ptr> allocate(std::size_t size) const { return vt_->allocate(self_, size); }
    /// The name of the device its memory belongs to (device_buffer_type); "" when the
    /// buffer type does not say.
    [[nodiscard]] std::string_view device_name() const { return vt_->device_name ? vt_->device_name(self_) : ""; }

    /// The concrete object, when it is a BT.
    template <buffer_type BT>
    [[nodiscard]] const BT* get_if() const noexcept {
        return vt_ == &detail::buffer_type_vtable_for<BT> ? static_cast<const BT*>(self_) : nullptr;
    }
    [[nodiscard]] const void* id() const noexcept { return self_; }
    friend bool operator==(const buffer_type_ref& a, const buffer_type_ref& b) noexcept { return a.self_ == b.self_; }

private:
    const void* self_;
    const detail::buffer_type_vtable* vt_;
};

/// The runtime handle of a buffer: what tensors point to.
class buffer_handle {
public:
    buffer_handle(const buffer_handle&) = delete;
    buffer_handle& operator=(const buffer_handle&) = delete;

    [[nodiscard]] void* base() const noexcept { return base_; }
    [[nodiscard]] std::size_t size() const noexcept { return size_; }
    [[nodiscard]] buffer_usage usage() const noexcept { return usage_; }
    void set_usage(buffer_usage u) noexcept { usage_ = u; }
    [[nodiscard]] buffer_type_ref type() const noexcept { return type_; }
    [[nodiscard]] bool is_host() const { return type_.is_host(); }
    /// This buffer's serial: never 0, never given to another buffer of the process.
    [[nodiscard]] std::uint64_t serial() const noexcept { return serial_; }

    /// True when [p, p + n) lies inside this buffer's address range.
    [[nodiscard]] bool contains(const void* p, std::size_t n) const noexcept {
        const auto b = reinterpret_cast<std::uintptr_t>(base_);
        const auto a = reinterpret_cast<std::uintptr_t>(p);
        return a >= b && n <= size_ && a - b <= size_ - n;
    }

    /// Writes `size` bytes from host memory `src` into tensor t at byte `offset`.
    status set_tensor(tensor& t, const void* src, std::size_t offset, std::size_t size) {
        if (auto s = check_range("set_tensor", t, offset, size); !s) return s;
        if (size == 0) return {};
        return vt_->set_tensor(impl_, t, src, offset, size);
    }
    /// Reads `size` bytes of tensor t at byte `offset` into host memory `dst`.
    status get_tensor(const tensor& t, void* dst, std::size_t offset, std::size_t size) {
        if (auto s = check_range("get_tensor", t, offset, size); !s) return s;
        if (size == 0) return {};
        return vt_->get_tensor(impl_, t, dst, offset, size);
    }
    /// Sets `size` bytes of tensor t at byte `offset` to `value`.
    status memset_tensor(tensor& t, std::uint8_t value, std::size_t offset, std::size_t size) {
        if (auto s = check_range("memset_tensor", t, offset, size); !s) return s;
        if (size == 0) return {};
        return vt_->memset_tensor(impl_, t, value, offset, size);
    }
    /// Sets every byte of the buffer to `value`.
    status clear(std::uint8_t value) { return vt_->clear(impl_, value); }
    /// Lets the buffer prepare a tensor just placed in it (no-op for most buffers).
    status init_tensor(tensor& t) { return vt_->init_tensor ? vt_->init_tensor(impl_, t) : status{}; }
    /// Device-side copy of src into dst (dst in this buffer); false when not possible.
    bool copy_tensor(const tensor& src, tensor& dst) {
        return vt_->copy_tensor != nullptr && vt_->copy_tensor(impl_, src, dst);
    }
    /// Drops per-allocation state before tensors are re-placed.
    void reset() {
        if (vt_->reset) vt_->reset(impl_);
    }

    /// The concrete buffer, when it is a B.
    template <buffer B>
    [[nodiscard]] B* get_if() noexcept;

protected:
    buffer_handle(void* impl, const detail::buffer_vtable* vt, buffer_type_ref type, void* base, std::size_t size,
                  std::uint64_t serial) noexcept
        : impl_(impl), vt_(vt), type_(type), base_(base), size_(size), serial_(serial) {}
    ~buffer_handle() = default;
    /// Base and size are read once the concrete buffer sits at its final address.
    void set_extent(void* base, std::size_t size) noexcept {
        base_ = base;
        size_ = size;
    }

private:
    friend struct buffer_deleter;

    status check_range(const char* what, const tensor& t, std::size_t offset, std::size_t size) const {
        if (t.buffer != this)
            return {errc::invalid_argument, std::string(what) + ": tensor '" + t.name + "' does not live in this buffer"};
        if (t.buffer_serial != serial_) // placed in a freed buffer that had this address
            return {errc::invalid_argument, std::string(what) + ": tensor '" + t.name +
                                                "' was placed in an earlier buffer at this address, since freed"};
        if (t.data == nullptr)
            return {errc::invalid_argument, std::string(what) + ": tensor '" + t.name + "' has no data address"};
        if (status s = detail::check_tensor_range(what, t, offset, size); !s) return s;
        if (!contains(static_cast<const std::byte*>(t.data) + offset, size))
            return {errc::out_of_range, std::string(what) + ": tensor '" + t.name + "' lies outside its buffer"};
        return {};
    }

    void* impl_;
    const detail::buffer_vtable* vt_;
    buffer_type_ref type_;
    void* base_;
    std::size_t size_;
    std::uint64_t serial_; ///< registered in detail::live_buffer_set() while this exists
    buffer_usage usage_ = buffer_usage::any;
    std::shared_ptr<const void> anchor_ = detail::module_anchor().lock(); ///< the module whose code vt_ points to
};

namespace detail {

/// The handle and the concrete buffer in one allocation.
template <buffer B>
struct buffer_holder final : buffer_handle {
    B impl;
    buffer_holder(B&& b, const buffer_vtable* vt, buffer_type_ref type, std::uint64_t serial)
        : buffer_handle(&impl, vt, type, nullptr, 0, serial), impl(std::move(b)) {
        set_extent(impl.base(), impl.size());
    }
};

// Optional capabilities: an entry when the concrete type has the member, null otherwise
// (the handle then applies the default).
template <buffer B>
consteval auto optional_init_tensor() -> status (*)(void*, tensor&) {
    if constexpr (tensor_init_buffer<B>)
        return [](void* b, tensor& t) { return static_cast<B*>(b)->init_tensor(t); };
    else
        return nullptr;
}
template <buffer B>
consteval auto optional_copy_tensor() -> bool (*)(void*, const tensor&, tensor&) {
    if constexpr (copy_buffer<B>)
        return [](void* b, const tensor& s, tensor& d) { return static_cast<B*>(b)->copy_tensor(s, d); };
    else
        return nullptr;
}
template <buffer B>
consteval auto optional_reset() -> void (*)(void*) {
    if constexpr (resettable_buffer<B>)
        return [](void* b) { static_cast<B*>(b)->reset(); };
    else
        return nullptr;
}

template <buffer B>
inline constexpr buffer_vtable buffer_vtable_for = {
    [](buffer_handle* h) noexcept { delete static_cast<buffer_holder<B>*>(h); },
    [](void* b, tensor& t, const void* src, std::size_t o, std::size_t n) {
        return static_cast<B*>(b)->set_tensor(t, src, o, n);
    },
    [](void* b, const tensor& t, void* dst, std::size_t o, std::size_t n) {
        return static_cast<B*>(b)->get_tensor(t, dst, o, n);
    },
    [](void* b, tensor& t, std::uint8_t v, std::size_t o, std::size_t n) {
        return static_cast<B*>(b)->memset_tensor(t, v, o, n);
    },
    [](void* b, std::uint8_t v) { return static_cast<B*>(b)->clear(v); },
    optional_init_tensor<B>(),
    optional_copy_tensor<B>(),
    optional_reset<B>(),
};

} // namespace detail

/// Wraps a concrete buffer into an owning handle of buffer type `type`. Allocation
/// failure of the handle itself is a status.
template <class B>
    requires(!std::is_lvalue_reference_v<B> && buffer<B>) // takes ownership: pass an rvalue
[[nodiscard]] result<buffer_ptr> make_buffer(B&& b, buffer_type_ref type) {
    using holder = detail::buffer_holder<std::remove_cvref_t<B>>;
    detail::live_buffers& live = *detail::live_buffer_set();
    const std::uint64_t serial = live.add();
    holder* h = serial == 0 ? nullptr
                            : new (std::nothrow) holder(std::move(b), &detail::buffer_vtable_for<std::remove_cvref_t<B>>,
                                                        type, serial);
    if (h == nullptr) {
        live.remove(serial);
        return status(errc::alloc_failed, "make_buffer: out of host memory for the buffer handle");
    }
    return buffer_ptr(h);
}

template <buffer B>
B* buffer_handle::get_if() noexcept {
    return vt_ == &detail::buffer_vtable_for<B> ? static_cast<B*>(impl_) : nullptr;
}

inline void buffer_deleter::operator()(buffer_handle* h) const noexcept {
    if (h == nullptr) return;
    // Dead before its memory is released: a tensor placed in it is never trusted again.
    detail::live_buffer_set()->remove(h->serial_);
    // The module's code runs the destructor, so the module stays loaded until it returned.
    const std::shared_ptr<const void> anchor = std::move(h->anchor_);
    h->vt_->destroy(h);
}

// -- placing tensors (docs/lifetime.md) --------------------------------------------------

/// Places t at address `data` of buffer `b`, recording b's serial.
inline void place_tensor(tensor& t, buffer_handle& b, void* data, placed_by by = placed_by::user) noexcept {
    t.set_placement(&b, b.serial(), data, by);
}
/// Places t at address `data` in the buffer `like` was placed in (a view in its source),
/// with like's serial and placer: never touches that buffer, which may be gone.
inline void place_like(tensor& t, const tensor& like, void* data) noexcept {
    t.set_placement(like.buffer, like.buffer_serial, data, like.placer);
}
/// t has no buffer and no data any more.
inline void unplace_tensor(tensor& t) noexcept { t.set_placement(nullptr, 0, nullptr); }

/// True when t has no buffer (context host data, or no data) or the buffer it was placed
/// in still exists. Never touches the buffer. One short lock.
[[nodiscard]] inline bool buffer_alive(const tensor& t) noexcept {
    return t.buffer == nullptr || detail::live_buffer_set()->contains(t.buffer_serial);
}
/// t's buffer while it exists; null when t has none or it was freed.
[[nodiscard]] inline buffer_handle* live_buffer(const tensor& t) noexcept {
    return t.buffer != nullptr && buffer_alive(t) ? t.buffer : nullptr;
}

namespace detail {
/// The status of an access through t's buffer (t.buffer not null) that is gone.
inline status freed_buffer_error(const char* what, const tensor& t) {
    const std::string who = std::string(what) + ": tensor " + describe(&t);
    if (t.buffer_serial == 0)
        return {errc::invalid_argument, who + " names a buffer but was not placed in it (use place_tensor)"};
    return {errc::invalid_argument, who + " was placed in a buffer that has since been freed; keep the buffer alive " +
                                        "while the tensor is used, or place the tensor again"};
}
/// ok while t's buffer exists (or t has none), else freed_buffer_error.
inline status check_buffer_alive(const char* what, const tensor& t) {
    return buffer_alive(t) ? status{} : freed_buffer_error(what, t);
}
} // namespace detail

template <buffer_type BT>
result<buffer_ptr> detail::allocate_erased(const void* self, std::size_t size) {
    const BT& bt = *static_cast<const BT*>(self);
    auto r = bt.allocate(size);
    if (!r) return r.error();
    return make_buffer(std::move(*r), buffer_type_ref(bt));
}

} // namespace backplane
