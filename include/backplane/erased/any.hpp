#pragma once
// The owning type-erased wrappers: any_buffer_type, any_device and any_backend.
//
// Compile-time selection is the fast path (scheduler<vulkan_backend, cpu_backend>); these
// types are for programs that choose hardware at run time: the registry
// (<backplane/runtime.hpp>) hands out any_device, a device makes any_backend, and
// dynamic_scheduler runs the same partitioner over a std::vector<any_backend> that
// scheduler<...> runs over a tuple. The meta backend holds its devices as any_device.
//
// The three live in one header because each names the others: a device hands out buffer
// types and backends, a buffer type knows the device that handed it out, a backend keeps
// its device alive, and the device's generated table makes backends. The non-owning
// backend_ref they convert to is in erased/backend_ref.hpp.
//
// Nothing here is written per backend. Each wrapper holds the concrete object and a
// pointer to a function table that the compiler generates from the concept model
// (detail::device_erasure<D>::table, detail::backend_vtable_for<B>, the buffer type tables of
// memory/buffer.hpp); optional capabilities (refined concepts) become entries that report
// "not available" with a clear status instead of a null function to look up.
//
// Lifetimes. any_device is a shared handle (copies refer to one device); any_backend owns
// its backend (move-only) and keeps its device alive; any_buffer_type keeps its device
// alive. Each also holds the module anchor of the code that made it (memory/buffer.hpp):
// an object made by a backend plugin keeps the plugin's library loaded until it is gone,
// whatever the registry does meanwhile.
//
//   backplane::any_device dev = backplane::any_device::borrow(backplane::cpu_device::instance());
//   backplane::result<backplane::any_backend> b = dev.make_backend({.n_threads = 4});
//   if (!b) return b.error();
//   backplane::status s = b->compute(g);

#include <backplane/core/concepts.hpp>
#include <backplane/core/error.hpp>
#include <backplane/core/graph.hpp>
#include <backplane/core/tensor.hpp>
#include <backplane/erased/backend_options.hpp>
#include <backplane/erased/backend_ref.hpp>
#include <backplane/erased/detail/anchored.hpp>
#include <backplane/erased/detail/exception_status.hpp>
#include <backplane/memory/buffer.hpp>

#include <cstddef>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace backplane {

class any_device;
class any_backend;

// ---------------------------------------------------------------------------------------
// any_buffer_type

namespace detail {
struct device_vtable;
} // namespace detail

/// A buffer type of any concrete type that keeps what it belongs to (its device, the
/// plugin library whose code it runs) alive. Converts to buffer_type_ref, which is what
/// the memory layer takes (alloc_tensors, graph_allocator); compares equal to references
/// to the same object.
class any_buffer_type {
public:
    /// A buffer type that outlives every use (a process-wide one, such as the CPU's).
    template <buffer_type BT>
    explicit any_buffer_type(const BT& bt) : owner_(nullptr), ref_(bt) {}
    /// `ref`, kept valid by `owner` (the object that holds the buffer type), whose code
    /// `anchor` keeps loaded (default: this module's).
    any_buffer_type(buffer_type_ref ref, std::shared_ptr<const void> owner,
                    std::shared_ptr<const void> anchor = detail::module_anchor().lock())
        : owner_(std::move(owner), std::move(anchor)), ref_(ref) {}

    [[nodiscard]] std::string_view name() const { return ref_.name(); }
    [[nodiscard]] std::size_t alignment() const { return ref_.alignment(); }
    [[nodiscard]] std::size_t max_size() const { return ref_.max_size(); }
    [[nodiscard]] std::size_t alloc_size(const tensor& t) const { return ref_.alloc_size(t); }
    [[nodiscard]] bool is_host() const { return ref_.is_host(); }
    /// A new buffer of at least `size` bytes; out of memory is a status.
    [[nodiscard]] result<buffer_ptr> allocate(std::size_t size) const { return ref_.allocate(size); }

    /// The name of the device its memory belongs to (device_buffer_type); "" when the
    /// buffer type does not say.
    [[nodiscard]] std::string_view device_name() const { return ref_.device_name(); }
    /// The device that handed this buffer type out (any_device's buffer_type(),
    /// host_buffer_type(), extra_buffer_types()), unless the buffer type names another
    /// one (CUDA's pinned host memory asked from device 1 names device 0): then, and for
    /// a buffer type no device handed out, nothing; registry::device(device_name()) finds
    /// the device it names.
    [[nodiscard]] inline std::optional<any_device> device() const;

    [[nodiscard]] buffer_type_ref ref() const noexcept { return ref_; }
    operator buffer_type_ref() const noexcept { return ref_; } // NOLINT: implicit on purpose
    friend bool operator==(const any_buffer_type& a, const any_buffer_type& b) noexcept { return a.ref_ == b.ref_; }
    friend bool operator==(const any_buffer_type& a, const buffer_type_ref& b) noexcept { return a.ref_ == b; }

private:
    friend class any_device;
    /// `ref`, handed out by the device whose object is `owner` and whose table is `device`.
    any_buffer_type(buffer_type_ref ref, detail::anchored<std::shared_ptr<const void>> owner,
                    const detail::device_vtable* device)
        : owner_(std::move(owner)), ref_(ref), device_(device) {}

    detail::anchored<std::shared_ptr<const void>> owner_;
    buffer_type_ref ref_;
    const detail::device_vtable* device_ = nullptr; // set: owner_ is that device's object
};

// ---------------------------------------------------------------------------------------
// any_device

namespace detail {

struct device_vtable {
    std::string_view (*name)(const void*);
    std::string_view (*description)(const void*);
    device_kind (*kind)(const void*);
    memory_info (*memory)(const void*);
    device_caps (*caps)(const void*);
    buffer_type_ref (*buffer_type)(const void*);
    std::optional<buffer_type_ref> (*host_buffer_type)(const void*);
    std::vector<buffer_type_ref> (*extra_buffer_types)(const void*);
    result<buffer_ptr> (*buffer_from_host_ptr)(const void*, void*, std::size_t);
    bool (*supports_op)(const void*, const tensor&);
    bool (*supports_buffer_type)(const void*, const buffer_type_ref&);
    bool (*offload_op)(const void*, const tensor&);
    std::vector<feature> (*features)(const void*);
    result<any_backend> (*make_backend)(const any_device&, const backend_options&);
};

/// device_erasure<D>::table: D's generated table (defined below any_backend).
template <device D>
struct device_erasure;

} // namespace detail

/// A device of any concrete type: a shared handle (copies refer to the same device).
/// Every member of the device concept, the optional ones as typed queries, and
/// make_backend, which returns an any_backend.
class any_device {
public:
    /// A device owned by the handle (copied or moved in).
    template <device D>
        requires(!std::is_same_v<D, any_device>)
    [[nodiscard]] static any_device make(D d) {
        return any_device(std::make_shared<const D>(std::move(d)), &detail::device_erasure<D>::table);
    }
    /// A device shared with other owners.
    template <device D>
    [[nodiscard]] static any_device make(std::shared_ptr<const D> d) {
        return any_device(std::move(d), &detail::device_erasure<D>::table);
    }
    /// A device that outlives every handle, not owned (a process-wide one:
    /// `any_device::borrow(cpu_device::instance())`).
    template <device D>
    [[nodiscard]] static any_device borrow(const D& d) {
        return any_device(std::shared_ptr<const void>(std::shared_ptr<const void>{}, &d), &detail::device_erasure<D>::table);
    }

    [[nodiscard]] std::string_view name() const { return vt_->name(self()); }
    [[nodiscard]] std::string_view description() const { return vt_->description(self()); }
    [[nodiscard]] device_kind kind() const { return vt_->kind(self()); }
    [[nodiscard]] memory_info memory() const { return vt_->memory(self()); }
    [[nodiscard]] device_caps caps() const { return vt_->caps(self()); }
    /// Its default buffer type.
    [[nodiscard]] any_buffer_type buffer_type() const { return {vt_->buffer_type(self()), obj_, vt_}; }
    /// Its pinned host buffer type, when it has one (host_buffer_device).
    [[nodiscard]] std::optional<any_buffer_type> host_buffer_type() const {
        auto bt = vt_->host_buffer_type(self());
        if (!bt) return std::nullopt;
        return any_buffer_type(*bt, obj_, vt_);
    }
    /// Buffer types beyond the default and host ones (extra_buffer_types_device); empty
    /// when it has none.
    [[nodiscard]] std::vector<any_buffer_type> extra_buffer_types() const {
        std::vector<any_buffer_type> out;
        for (const buffer_type_ref& bt : vt_->extra_buffer_types(self())) out.push_back(any_buffer_type(bt, obj_, vt_));
        return out;
    }
    /// User memory [ptr, ptr + size) as a buffer of this device (host_ptr_device); the
    /// user keeps it alive. errc::not_supported when the device cannot wrap host memory.
    [[nodiscard]] result<buffer_ptr> buffer_from_host_ptr(void* ptr, std::size_t size) const {
        if (vt_->buffer_from_host_ptr == nullptr)
            return status(errc::not_supported,
                          std::string(name()) + ": this device cannot use host memory as a buffer");
        return vt_->buffer_from_host_ptr(self(), ptr, size);
    }
    [[nodiscard]] bool supports_op(const tensor& t) const { return vt_->supports_op(self(), t); }
    [[nodiscard]] bool supports_buffer_type(const buffer_type_ref& bt) const {
        return vt_->supports_buffer_type(self(), bt);
    }
    /// Whether it wants to run t on weights held elsewhere (offload_device); false when
    /// it never does.
    [[nodiscard]] bool offload_op(const tensor& t) const { return vt_->offload_op(self(), t); }
    /// Its features (featured_device); empty when it lists none.
    [[nodiscard]] std::vector<feature> features() const { return vt_->features(self()); }

    /// A new backend (stream) on this device; a status when the device cannot make one.
    [[nodiscard]] result<any_backend> make_backend(const backend_options& options = {}) const;

    /// The concrete device, when it is a D made by this module's code (null otherwise).
    template <device D>
    [[nodiscard]] const D* get_if() const noexcept {
        return vt_ == &detail::device_erasure<D>::table ? static_cast<const D*>(self()) : nullptr;
    }
    /// The device's address (identity): copies of one handle compare equal.
    [[nodiscard]] const void* id() const noexcept { return self(); }
    friend bool operator==(const any_device& a, const any_device& b) noexcept { return a.id() == b.id(); }

private:
    friend class any_buffer_type;
    any_device(std::shared_ptr<const void> obj, const detail::device_vtable* vt) : obj_(std::move(obj)), vt_(vt) {}
    any_device(detail::anchored<std::shared_ptr<const void>> obj, const detail::device_vtable* vt)
        : obj_(std::move(obj)), vt_(vt) {}
    [[nodiscard]] const void* self() const noexcept { return obj_.value().get(); }

    template <device D>
    friend struct detail::device_erasure;

    detail::anchored<std::shared_ptr<const void>> obj_;
    const detail::device_vtable* vt_;
};

inline std::optional<any_device> any_buffer_type::device() const {
    if (device_ == nullptr) return std::nullopt;
    any_device d(owner_, device_);
    const std::string_view named = ref_.device_name();
    if (!named.empty() && d.name() != named) return std::nullopt; // shared memory named after another device
    return d;
}

// ---------------------------------------------------------------------------------------
// any_backend

/// A backend (stream) of any concrete type, owned (move-only), with its device. Every
/// member of the backend concept, the optional ones as typed queries (caps(),
/// set_n_threads, set_abort_callback...) that return errc::not_supported where the
/// backend lacks them. Converts to backend_ref, so a std::vector<any_backend> is a
/// dynamic_scheduler's backend list. A moved-from any_backend may only be destroyed or
/// assigned to.
class any_backend {
public:
    /// Takes ownership of backend `b` running on `dev`, and applies `options`.
    template <backend B>
        requires(!std::is_same_v<std::remove_cvref_t<B>, any_backend> && !std::is_lvalue_reference_v<B>)
    [[nodiscard]] static result<any_backend> make(B&& b, any_device dev, const backend_options& options = {}) {
        using T = std::remove_cvref_t<B>;
        T* p = new (std::nothrow) T(std::move(b));
        if (p == nullptr) return status(errc::alloc_failed, "any_backend: out of memory");
        any_backend out(p, +[](void* x) noexcept { delete static_cast<T*>(x); }, &detail::backend_vtable_for<T>,
                        std::move(dev));
        if (auto s = out.apply(options); !s) return s;
        return out;
    }

    any_backend(any_backend&&) noexcept = default;
    any_backend& operator=(any_backend&&) noexcept = default;
    ~any_backend() = default;

    /// False for a moved-from backend.
    explicit operator bool() const noexcept { return p_.value().obj != nullptr; }

    [[nodiscard]] std::string_view name() const { return vt_->name(self()); }
    [[nodiscard]] const any_device& device() const noexcept { return p_.value().dev; }
    [[nodiscard]] buffer_type_ref buffer_type() const { return vt_->buffer_type(self()); }
    [[nodiscard]] bool supports_op(const tensor& t) const { return vt_->supports_op(self(), t); }
    /// supports_op(t) for a node its op defines (narrowing_backend).
    [[nodiscard]] bool supports_defined_op(const tensor& t) const { return vt_->supports_defined_op(self(), t); }
    [[nodiscard]] bool supports_buffer_type(const buffer_type_ref& bt) const {
        return vt_->supports_buffer_type(self(), bt);
    }
    [[nodiscard]] bool offload_op(const tensor& t) const { return vt_->offload_op(self(), t); }
    [[nodiscard]] status compute(graph_view g) { return vt_->compute(self(), g); }
    [[nodiscard]] status synchronize() { return vt_->synchronize(self()); }

    /// Queued writes / reads of a tensor's bytes where the backend is asynchronous
    /// (done by synchronize(); the host memory must stay alive until then), synchronous
    /// through the tensor's buffer otherwise.
    [[nodiscard]] status set_tensor_async(tensor& t, const void* src, std::size_t offset, std::size_t size) {
        if (vt_->set_tensor_async != nullptr) return vt_->set_tensor_async(self(), t, src, offset, size);
        if (t.buffer == nullptr) return {errc::invalid_argument, "set_tensor_async: tensor '" + t.name + "' has no buffer"};
        return t.buffer->set_tensor(t, src, offset, size);
    }
    [[nodiscard]] status get_tensor_async(const tensor& t, void* dst, std::size_t offset, std::size_t size) {
        if (vt_->get_tensor_async != nullptr) return vt_->get_tensor_async(self(), t, dst, offset, size);
        if (t.buffer == nullptr) return {errc::invalid_argument, "get_tensor_async: tensor '" + t.name + "' has no buffer"};
        return t.buffer->get_tensor(t, dst, offset, size);
    }
    /// A device-side copy queued on this backend; false when not possible.
    [[nodiscard]] bool copy_tensor_async(const tensor& src, tensor& dst) { return vt_->copy_async(self(), src, dst); }

    /// What the backend can do beyond the minimum.
    [[nodiscard]] backend_caps caps() const noexcept {
        return {.async = vt_->set_tensor_async != nullptr,
                .events = vt_->has_events,
                .plans = vt_->has_plans,
                .timing = vt_->has_timing,
                .offload = vt_->has_offload,
                .n_threads = vt_->set_n_threads != nullptr,
                .abort_callback = vt_->set_abort_callback != nullptr,
                .fusions = vt_->set_fusions != nullptr};
    }
    /// The fused groups it may make (fusing_backend); errc::not_supported without.
    status set_fusions(fusion_set f) {
        if (vt_->set_fusions == nullptr)
            return {errc::not_supported, std::string(name()) + ": this backend fuses nothing"};
        vt_->set_fusions(self(), f);
        return {};
    }
    /// Threads of the next computes (threaded_backend); errc::not_supported without.
    status set_n_threads(int n) {
        if (vt_->set_n_threads == nullptr)
            return {errc::not_supported, std::string(name()) + ": this backend has no thread count"};
        return vt_->set_n_threads(self(), n);
    }
    /// Its thread count, when it has one.
    [[nodiscard]] std::optional<int> n_threads() const {
        if (vt_->n_threads == nullptr) return std::nullopt;
        return vt_->n_threads(self());
    }
    /// The abort callback (abortable_backend); errc::not_supported without.
    status set_abort_callback(abort_function f) {
        if (vt_->set_abort_callback == nullptr)
            return {errc::not_supported, std::string(name()) + ": this backend takes no abort callback"};
        vt_->set_abort_callback(self(), std::move(f));
        return {};
    }
    /// Device timing on or off (timed_backend); false when it cannot time.
    bool set_timing(bool on) { return vt_->set_timing(self(), on); }
    [[nodiscard]] std::optional<device_span> last_compute_time() const { return vt_->last_compute_time(self()); }

    /// The non-owning run-time face the scheduler takes (events go through it).
    [[nodiscard]] backend_ref ref() noexcept { return {self(), vt_}; }
    operator backend_ref() noexcept { return ref(); } // NOLINT: implicit, so vectors of any_backend schedule

    /// The concrete backend, when it is a B made by this module's code (null otherwise).
    template <backend B>
    [[nodiscard]] B* get_if() noexcept {
        return vt_ == &detail::backend_vtable_for<B> ? static_cast<B*>(self()) : nullptr;
    }

private:
    struct deleter {
        void (*destroy)(void*) noexcept;
        void operator()(void* p) const noexcept {
            if (p) destroy(p);
        }
    };

    any_backend(void* obj, void (*destroy)(void*) noexcept, const detail::backend_vtable* vt, any_device dev)
        : p_(parts{std::move(dev), std::unique_ptr<void, deleter>(obj, deleter{destroy})}), vt_(vt) {}
    [[nodiscard]] void* self() const noexcept { return p_.value().obj.get(); }

    status apply(const backend_options& o) {
        if (o.n_threads > 0 && vt_->set_n_threads != nullptr)
            if (auto s = vt_->set_n_threads(self(), o.n_threads); !s) return s;
        if (o.abort_callback && vt_->set_abort_callback != nullptr) vt_->set_abort_callback(self(), o.abort_callback);
        if (vt_->set_fusions != nullptr) vt_->set_fusions(self(), o.fusions);
        return {};
    }

    /// Destroyed (and, by assignment, released) backend first, then its device, then the
    /// module anchor.
    struct parts {
        any_device dev;
        std::unique_ptr<void, deleter> obj;
    };
    detail::anchored<parts> p_;
    const detail::backend_vtable* vt_;
};

// ---------------------------------------------------------------------------------------
// the device table, generated

namespace detail {

/// Unwraps what a device's make_backend returns (a backend or a result of one).
template <class R>
struct made_backend {
    using type = R;
};
template <class B>
struct made_backend<result<B>> {
    using type = B;
};

template <device D>
struct device_erasure {
    static const D& self(const void* p) noexcept { return *static_cast<const D*>(p); }

    static result<any_backend> make_backend(const any_device& dev, const backend_options& o) {
        const D& d = self(dev.self());
        try {
            auto made = d.make_backend();
            using M = decltype(made);
            if constexpr (std::is_same_v<typename made_backend<M>::type, M>) {
                return any_backend::make(std::move(made), dev, o);
            } else {
                if (!made) return made.error();
                return any_backend::make(std::move(*made), dev, o);
            }
        } catch (...) {
            return status_of_current_exception(std::string(d.name()) + ": make_backend");
        }
    }

    static constexpr device_vtable table{
        [](const void* p) -> std::string_view { return self(p).name(); },
        [](const void* p) -> std::string_view { return self(p).description(); },
        [](const void* p) -> device_kind { return self(p).kind(); },
        [](const void* p) -> memory_info { return self(p).memory(); },
        [](const void* p) -> device_caps { return self(p).caps(); },
        [](const void* p) { return buffer_type_ref(self(p).buffer_type()); },
        [](const void* p) -> std::optional<buffer_type_ref> {
            if constexpr (host_buffer_device<D>)
                return buffer_type_ref(self(p).host_buffer_type());
            else
                return (void)p, std::nullopt;
        },
        [](const void* p) -> std::vector<buffer_type_ref> {
            if constexpr (extra_buffer_types_device<D>)
                return self(p).extra_buffer_types();
            else
                return (void)p, std::vector<buffer_type_ref>{};
        },
        []() -> result<buffer_ptr> (*)(const void*, void*, std::size_t) {
            if constexpr (host_ptr_device<D>)
                return [](const void* p, void* ptr, std::size_t n) -> result<buffer_ptr> {
                    auto r = self(p).buffer_from_host_ptr(ptr, n);
                    if constexpr (std::is_same_v<decltype(r), result<buffer_ptr>>) {
                        return r;
                    } else {
                        if (!r) return r.error();
                        return make_buffer(std::move(*r), buffer_type_ref(self(p).buffer_type()));
                    }
                };
            else
                return nullptr;
        }(),
        [](const void* p, const tensor& t) -> bool { return self(p).supports_op(t); },
        [](const void* p, const buffer_type_ref& bt) -> bool { return self(p).supports_buffer_type(bt); },
        [](const void* p, const tensor& t) -> bool {
            if constexpr (offload_device<D>)
                return static_cast<bool>(self(p).offload_op(t));
            else
                return (void)p, (void)t, false;
        },
        [](const void* p) -> std::vector<feature> {
            if constexpr (featured_device<D>)
                return self(p).features();
            else
                return (void)p, std::vector<feature>{};
        },
        &make_backend,
    };
};

} // namespace detail

inline result<any_backend> any_device::make_backend(const backend_options& options) const {
    return vt_->make_backend(*this, options);
}

} // namespace backplane
