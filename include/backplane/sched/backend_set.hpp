#pragma once
// The backends a scheduler partitions a graph over, as one small interface that both a
// compile-time tuple and a run-time vector model, so the partitioning code is written
// once (DESIGN.md section 5).
//
// A backend set is an ordered list of backends, index 0 the highest priority; the last
// one is the host fallback. Everything the scheduler needs from a backend goes through
// the set by index:
//
//   size(), name(i), buffer_type(i)             what the backends are
//   description(i), kind(i), memory(i)          their devices (cost model keys, copy batches)
//   supports_op(i, t), supports_buffer_type(i, bt), offload_op(i, t)
//   compute(i, view), synchronize(i)            the stream
//   copy_async(i, src, dst) -> bool             a device-side copy queued on backend i (the
//                                               destination's); false: not possible
//   init_events(n_copies), has_events(i),       per-(backend, copy) events, created by the
//   record(i, c), wait(i, j, c), event_sync(i, c)  set for the backends that have them
//   set_timing(i, on), last_compute_time(i)     device timestamps (timed_backend), else
//                                               nothing
//
// Optional capabilities are detected with the refined concepts (async_backend,
// event_backend, offload_backend); where a backend lacks one the set reports false or
// falls back to what is always correct: waiting on an event of a backend without events
// synchronizes that backend on the host.
//
// tuple_backend_set<B0, ..., Bn> holds references to concrete backends and dispatches by
// index through a table generated per operation: no virtual calls, each backend's code
// inlined into its entry. backend_ref is the same face erased for one backend at run time
// (a non-owning (object, table) pair generated from the concept model, like
// buffer_type_ref), and dynamic_backend_set is a vector of them.

#include <backplane/core/concepts.hpp>
#include <backplane/core/error.hpp>
#include <backplane/core/graph.hpp>
#include <backplane/core/tensor.hpp>
#include <backplane/memory/buffer.hpp>

#include <concepts>
#include <cstddef>
#include <functional>
#include <memory>
#include <new>
#include <optional>
#include <iterator>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace backplane {

/// What the scheduler needs from its list of backends (see the header comment).
template <class S>
concept backend_set = requires(S& s, const S& cs, std::size_t i, std::size_t j, int c, const tensor& ct, tensor& t,
                               graph_view g, const buffer_type_ref& bt) {
    { cs.size() } -> std::convertible_to<std::size_t>;
    { cs.name(i) } -> std::convertible_to<std::string_view>;
    { cs.description(i) } -> std::convertible_to<std::string_view>;
    { cs.kind(i) } -> std::same_as<device_kind>;
    { cs.memory(i) } -> std::same_as<memory_info>;
    { cs.buffer_type(i) } -> std::same_as<buffer_type_ref>;
    { cs.supports_op(i, ct) } -> std::same_as<bool>;
    { cs.supports_buffer_type(i, bt) } -> std::same_as<bool>;
    { cs.offload_op(i, ct) } -> std::same_as<bool>;
    { s.compute(i, g) } -> std::same_as<status>;
    { s.synchronize(i) } -> std::same_as<status>;
    { s.copy_async(i, ct, t) } -> std::same_as<bool>;
    { s.init_events(c) } -> std::same_as<status>;
    { cs.has_events(i) } -> std::same_as<bool>;
    { s.set_timing(i, true) } -> std::same_as<bool>;
    { cs.last_compute_time(i) } -> std::same_as<std::optional<device_span>>;
    { s.record(i, c) } -> std::same_as<status>;
    { s.wait(i, j, c) } -> std::same_as<status>;
    { s.event_sync(i, c) } -> std::same_as<status>;
};

namespace detail {

/// A backend's events, one per pipeline copy (nothing for a backend without events).
template <class B, bool = event_backend<B>>
struct event_slots {
    std::vector<std::optional<typename B::event_t>> v;
};
template <class B>
struct event_slots<B, false> {};

/// True when backend B's events are of type E (so B can wait on one on its stream).
template <class B, class E>
constexpr bool event_of() noexcept {
    if constexpr (event_backend<B>)
        return std::is_same_v<typename B::event_t, E>;
    else
        return false;
}

template <class B>
bool offload_of(const B& b, const tensor& t) {
    if constexpr (offload_backend<B>)
        return static_cast<bool>(b.offload_op(t));
    else
        return false;
}

template <class B>
bool copy_async_of(B& b, const tensor& src, tensor& dst) {
    if constexpr (async_backend<B>)
        return b.copy_tensor_async(src, dst);
    else
        return false;
}

/// The description of b's device; its name when device() returns a temporary (whose
/// description would not outlive the call).
template <class B>
std::string_view description_of(const B& b) {
    if constexpr (std::is_lvalue_reference_v<decltype(b.device())>)
        return b.device().description();
    else
        return b.name();
}

/// Turns device timing on or off; false when B cannot time on the device.
template <class B>
bool set_timing_of(B& b, bool on) {
    if constexpr (timed_backend<B>) {
        b.set_timing(on);
        return true;
    } else {
        return (void)b, (void)on, false;
    }
}

template <class B>
std::optional<device_span> last_compute_time_of(const B& b) {
    if constexpr (timed_backend<B>)
        return b.last_compute_time();
    else
        return (void)b, std::nullopt;
}

template <class B>
status init_events_of(B& b, event_slots<B>& e, int n_copies) {
    if constexpr (event_backend<B>) {
        e.v.clear();
        e.v.resize(static_cast<std::size_t>(n_copies));
        for (auto& slot : e.v) {
            auto r = b.make_event();
            if (!r) { // a backend that cannot make events runs with host synchronization
                e.v.clear();
                return {};
            }
            slot.emplace(std::move(*r));
        }
    } else {
        (void)b, (void)e, (void)n_copies;
    }
    return {};
}

template <class B>
bool has_events_of(const event_slots<B>& e) noexcept {
    if constexpr (event_backend<B>)
        return !e.v.empty();
    else
        return (void)e, false;
}

} // namespace detail

/// Backends B0..Bn by reference, index 0 the highest priority (see the header comment).
/// The backends must outlive the set.
template <backend... Bs>
class tuple_backend_set {
    static_assert(sizeof...(Bs) > 0, "a backend set needs at least one backend");

public:
    explicit tuple_backend_set(Bs&... backends) : backends_(backends...) {}

    [[nodiscard]] static constexpr std::size_t size() noexcept { return sizeof...(Bs); }

    /// Backend I itself.
    template <std::size_t I>
    [[nodiscard]] auto& get() noexcept {
        return std::get<I>(backends_);
    }
    /// The index of `b` in the set, or size() when it is not one of them.
    template <class B>
    [[nodiscard]] std::size_t index_of(const B& b) const noexcept {
        std::size_t found = size();
        [&]<std::size_t... I>(std::index_sequence<I...>) {
            ((found == size() && is_same_object<I>(b) ? (found = I, 0) : 0), ...);
        }(std::index_sequence_for<Bs...>{});
        return found;
    }

    [[nodiscard]] std::string_view name(std::size_t i) const {
        return dispatch(i, [](const auto& b, const auto&) -> std::string_view { return b.name(); });
    }
    [[nodiscard]] std::string_view description(std::size_t i) const {
        return dispatch(i, [](const auto& b, const auto&) { return detail::description_of(b); });
    }
    [[nodiscard]] device_kind kind(std::size_t i) const {
        return dispatch(i, [](const auto& b, const auto&) -> device_kind { return b.device().kind(); });
    }
    [[nodiscard]] memory_info memory(std::size_t i) const {
        return dispatch(i, [](const auto& b, const auto&) -> memory_info { return b.device().memory(); });
    }
    [[nodiscard]] buffer_type_ref buffer_type(std::size_t i) const {
        return dispatch(i, [](const auto& b, const auto&) {
            return buffer_type_ref(const_cast<std::remove_cvref_t<decltype(b)>&>(b).buffer_type());
        });
    }
    [[nodiscard]] bool supports_op(std::size_t i, const tensor& t) const {
        return dispatch(i, [&](const auto& b, const auto&) -> bool { return b.supports_op(t); });
    }
    [[nodiscard]] bool supports_buffer_type(std::size_t i, const buffer_type_ref& bt) const {
        return dispatch(i, [&](const auto& b, const auto&) -> bool { return b.supports_buffer_type(bt); });
    }
    [[nodiscard]] bool offload_op(std::size_t i, const tensor& t) const {
        return dispatch(i, [&](const auto& b, const auto&) { return detail::offload_of(b, t); });
    }
    [[nodiscard]] status compute(std::size_t i, graph_view g) {
        return dispatch(i, [&](auto& b, auto&) -> status { return b.compute(g); });
    }
    [[nodiscard]] status synchronize(std::size_t i) {
        return dispatch(i, [](auto& b, auto&) -> status { return b.synchronize(); });
    }
    [[nodiscard]] bool copy_async(std::size_t i, const tensor& src, tensor& dst) {
        return dispatch(i, [&](auto& b, auto&) { return detail::copy_async_of(b, src, dst); });
    }
    [[nodiscard]] status init_events(int n_copies) {
        for (std::size_t i = 0; i < size(); ++i)
            if (auto s = dispatch(i, [&](auto& b, auto& e) { return detail::init_events_of(b, e, n_copies); }); !s)
                return s;
        return {};
    }
    [[nodiscard]] bool has_events(std::size_t i) const {
        return dispatch(i, [](const auto&, const auto& e) { return detail::has_events_of(e); });
    }
    /// Device timing on or off for backend i; false when it cannot time on its device.
    bool set_timing(std::size_t i, bool on) {
        return dispatch(i, [&](auto& b, auto&) { return detail::set_timing_of(b, on); });
    }
    [[nodiscard]] std::optional<device_span> last_compute_time(std::size_t i) const {
        return dispatch(i, [](const auto& b, const auto&) { return detail::last_compute_time_of(b); });
    }
    [[nodiscard]] status record(std::size_t i, int c) {
        return dispatch(i, [&](auto& b, auto& e) -> status {
            if constexpr (requires { e.v; }) {
                if (!e.v.empty()) return b.record(*e.v[static_cast<std::size_t>(c)]);
            }
            return {};
        });
    }
    /// Backend i waits (on its stream) for backend j's event of copy c; a synchronize of
    /// j on the host where j has no events.
    [[nodiscard]] status wait(std::size_t i, std::size_t j, int c) {
        if (i == j) return {}; // a stream is ordered
        if (!has_events(j)) return synchronize(j);
        return dispatch(j, [&](auto&, auto& ej) -> status {
            if constexpr (requires { ej.v; }) {
                auto& ev = *ej.v[static_cast<std::size_t>(c)];
                return dispatch(i, [&](auto& bi, auto&) -> status {
                    using BI = std::remove_cvref_t<decltype(bi)>;
                    using EJ = std::remove_cvref_t<decltype(ev)>;
                    if constexpr (detail::event_of<BI, EJ>())
                        return bi.wait(ev);
                    else
                        return ev.synchronize(); // another kind of event: wait on the host
                });
            } else {
                return {};
            }
        });
    }
    /// The host waits for backend i's event of copy c (a synchronize without events).
    [[nodiscard]] status event_sync(std::size_t i, int c) {
        if (!has_events(i)) return synchronize(i);
        return dispatch(i, [&](auto&, auto& e) -> status {
            if constexpr (requires { e.v; })
                return e.v[static_cast<std::size_t>(c)]->synchronize();
            else
                return {};
        });
    }

private:
    template <std::size_t I, class B>
    bool is_same_object(const B& b) const noexcept {
        if constexpr (std::is_same_v<std::remove_cvref_t<std::tuple_element_t<I, std::tuple<Bs...>>>, B>)
            return static_cast<const void*>(&std::get<I>(backends_)) == static_cast<const void*>(&b);
        else
            return false;
    }

    // Calls f(backend I, events of I) for I = i through a table of one entry per backend.
    template <class F>
    decltype(auto) dispatch(std::size_t i, F&& f) {
        return dispatch_impl<tuple_backend_set>(*this, i, f, std::index_sequence_for<Bs...>{});
    }
    template <class F>
    decltype(auto) dispatch(std::size_t i, F&& f) const {
        return dispatch_impl<const tuple_backend_set>(*this, i, f, std::index_sequence_for<Bs...>{});
    }
    template <class Self, class F, std::size_t... I>
    static decltype(auto) dispatch_impl(Self& self, std::size_t i, F& f, std::index_sequence<I...>) {
        using R = decltype(f(std::get<0>(self.backends_), std::get<0>(self.events_)));
        using entry = R (*)(Self&, F&);
        static constexpr entry table[] = {+[](Self& s, F& fn) -> R {
            return fn(std::get<I>(s.backends_), std::get<I>(s.events_));
        }...};
        return table[i](self, f);
    }

    std::tuple<Bs&...> backends_;
    std::tuple<detail::event_slots<Bs>...> events_;
};

// ---------------------------------------------------------------------------------------
// run-time face

class backend_ref;

/// What any_backend::set_abort_callback takes (see abortable_backend).
using abort_function = std::function<bool()>;

namespace detail {

/// The operations of one backend type, generated from its concept model
/// (backend_vtable_for<B>): what backend_ref and the runtime's any_backend dispatch
/// through. Optional capabilities have an entry that reports "not available".
struct backend_vtable {
    struct event_deleter {
        void (*destroy)(void*) noexcept;
        void operator()(void* e) const noexcept { destroy(e); }
    };
    using event_ptr = std::unique_ptr<void, event_deleter>;

    std::string_view (*name)(void*);
    std::string_view (*description)(void*);
    device_kind (*kind)(void*);
    memory_info (*memory)(void*);
    buffer_type_ref (*buffer_type)(void*);
    bool (*supports_op)(void*, const tensor&);
    bool (*supports_buffer_type)(void*, const buffer_type_ref&);
    bool (*offload_op)(void*, const tensor&);
    status (*compute)(void*, graph_view);
    status (*synchronize)(void*);
    bool (*copy_async)(void*, const tensor&, tensor&);
    bool (*set_timing)(void*, bool);
    std::optional<device_span> (*last_compute_time)(void*);
    event_ptr (*make_event)(void*);
    status (*record)(void*, void*);
    status (*wait)(void*, void*);
    status (*event_sync)(void*);
    // typed capabilities (null when the backend lacks them)
    status (*set_tensor_async)(void*, tensor&, const void*, std::size_t, std::size_t);
    status (*get_tensor_async)(void*, const tensor&, void*, std::size_t, std::size_t);
    status (*set_n_threads)(void*, int);
    int (*n_threads)(void*);
    void (*set_abort_callback)(void*, abort_function);
    bool has_events;
    bool has_plans;
    bool has_timing;
    bool has_offload;
};

template <class B>
B& backend_self(void* p) noexcept {
    return *static_cast<B*>(p);
}

template <backend B>
inline constexpr backend_vtable backend_vtable_for{
    [](void* p) -> std::string_view { return backend_self<B>(p).name(); },
    [](void* p) { return description_of(backend_self<B>(p)); },
    [](void* p) -> device_kind { return backend_self<B>(p).device().kind(); },
    [](void* p) -> memory_info { return backend_self<B>(p).device().memory(); },
    [](void* p) { return buffer_type_ref(backend_self<B>(p).buffer_type()); },
    [](void* p, const tensor& t) -> bool { return backend_self<B>(p).supports_op(t); },
    [](void* p, const buffer_type_ref& bt) -> bool { return backend_self<B>(p).supports_buffer_type(bt); },
    [](void* p, const tensor& t) { return offload_of(backend_self<B>(p), t); },
    [](void* p, graph_view g) -> status { return backend_self<B>(p).compute(g); },
    [](void* p) -> status { return backend_self<B>(p).synchronize(); },
    [](void* p, const tensor& s, tensor& d) { return copy_async_of(backend_self<B>(p), s, d); },
    [](void* p, bool on) { return set_timing_of(backend_self<B>(p), on); },
    [](void* p) { return last_compute_time_of(std::as_const(backend_self<B>(p))); },
    [](void* p) -> backend_vtable::event_ptr {
        using ptr = backend_vtable::event_ptr;
        if constexpr (event_backend<B>) {
            using E = typename B::event_t;
            auto r = backend_self<B>(p).make_event();
            if (!r) return ptr(nullptr, {+[](void*) noexcept {}});
            E* e = new (std::nothrow) E(std::move(*r));
            return ptr(e, {+[](void* x) noexcept { delete static_cast<E*>(x); }});
        } else {
            (void)p;
            return ptr(nullptr, {+[](void*) noexcept {}});
        }
    },
    [](void* p, void* e) -> status {
        if constexpr (event_backend<B>)
            return backend_self<B>(p).record(*static_cast<typename B::event_t*>(e));
        else
            return (void)p, (void)e, status{};
    },
    [](void* p, void* e) -> status {
        if constexpr (event_backend<B>)
            return backend_self<B>(p).wait(*static_cast<typename B::event_t*>(e));
        else
            return (void)p, (void)e, status{};
    },
    [](void* e) -> status {
        if constexpr (event_backend<B>)
            return static_cast<typename B::event_t*>(e)->synchronize();
        else
            return (void)e, status{};
    },
    []() -> status (*)(void*, tensor&, const void*, std::size_t, std::size_t) {
        if constexpr (async_backend<B>)
            return [](void* p, tensor& t, const void* src, std::size_t o, std::size_t n) -> status {
                return backend_self<B>(p).set_tensor_async(t, src, o, n);
            };
        else
            return nullptr;
    }(),
    []() -> status (*)(void*, const tensor&, void*, std::size_t, std::size_t) {
        if constexpr (async_backend<B>)
            return [](void* p, const tensor& t, void* dst, std::size_t o, std::size_t n) -> status {
                return backend_self<B>(p).get_tensor_async(t, dst, o, n);
            };
        else
            return nullptr;
    }(),
    []() -> status (*)(void*, int) {
        if constexpr (threaded_backend<B>)
            return [](void* p, int n) -> status { return backend_self<B>(p).set_n_threads(n); };
        else
            return nullptr;
    }(),
    []() -> int (*)(void*) {
        if constexpr (threaded_backend<B>)
            return [](void* p) -> int { return std::as_const(backend_self<B>(p)).n_threads(); };
        else
            return nullptr;
    }(),
    []() -> void (*)(void*, abort_function) {
        if constexpr (abortable_backend<B>)
            return [](void* p, abort_function f) { backend_self<B>(p).set_abort_callback(std::move(f)); };
        else
            return nullptr;
    }(),
    event_backend<B>,
    plan_backend<B>,
    timed_backend<B>,
    offload_backend<B>,
};

} // namespace detail

/// A non-owning, type-erased reference to a backend: the operations of a backend set for
/// one backend, generated from its concept model. Copyable; the backend must outlive it.
class backend_ref {
public:
    template <backend B>
        requires(!std::is_same_v<std::remove_cvref_t<B>, backend_ref>)
    backend_ref(B& b) noexcept // NOLINT: implicit on purpose, like a span
        : self_(&b), vt_(&detail::backend_vtable_for<B>) {}
    /// A backend object and its generated table (what owning wrappers hand out).
    backend_ref(void* self, const detail::backend_vtable* vt) noexcept : self_(self), vt_(vt) {}

    [[nodiscard]] std::string_view name() const { return vt_->name(self_); }
    [[nodiscard]] std::string_view description() const { return vt_->description(self_); }
    [[nodiscard]] device_kind kind() const { return vt_->kind(self_); }
    [[nodiscard]] memory_info memory() const { return vt_->memory(self_); }
    [[nodiscard]] buffer_type_ref buffer_type() const { return vt_->buffer_type(self_); }
    [[nodiscard]] bool supports_op(const tensor& t) const { return vt_->supports_op(self_, t); }
    [[nodiscard]] bool supports_buffer_type(const buffer_type_ref& bt) const {
        return vt_->supports_buffer_type(self_, bt);
    }
    [[nodiscard]] bool offload_op(const tensor& t) const { return vt_->offload_op(self_, t); }
    [[nodiscard]] status compute(graph_view g) const { return vt_->compute(self_, g); }
    [[nodiscard]] status synchronize() const { return vt_->synchronize(self_); }
    [[nodiscard]] bool copy_tensor_async(const tensor& src, tensor& dst) const {
        return vt_->copy_async(self_, src, dst);
    }
    bool set_timing(bool on) const { return vt_->set_timing(self_, on); }
    [[nodiscard]] std::optional<device_span> last_compute_time() const { return vt_->last_compute_time(self_); }
    /// The backend's address (identity).
    [[nodiscard]] const void* id() const noexcept { return self_; }

    /// An event of this backend, or null when it has none (or could not make one).
    using event_ptr = detail::backend_vtable::event_ptr;
    [[nodiscard]] event_ptr make_event() const { return vt_->make_event(self_); }
    [[nodiscard]] status record(void* e) const { return vt_->record(self_, e); }
    /// This backend's stream waits for `e`, an event of `owner` (on the host when the two
    /// are different kinds of backend).
    [[nodiscard]] status wait(const backend_ref& owner, void* e) const {
        if (owner.vt_ == vt_) return vt_->wait(self_, e);
        return owner.vt_->event_sync(e);
    }
    [[nodiscard]] status event_sync(void* e) const { return vt_->event_sync(e); }

private:
    void* self_;
    const detail::backend_vtable* vt_;
};

/// Backends chosen at run time, index 0 the highest priority: a vector of backend_ref.
/// The backends must outlive the set. The last one must use host memory; the scheduler
/// checks that when it is constructed.
class dynamic_backend_set {
public:
    dynamic_backend_set() = default;
    explicit dynamic_backend_set(std::vector<backend_ref> backends) : backends_(std::move(backends)) {}
    /// Every element of a range of backends that convert to backend_ref (for example the
    /// runtime's any_backend: `dynamic_scheduler sched(backends)` with a
    /// std::vector<any_backend>), in order.
    template <class R>
        requires(!std::is_same_v<std::remove_cvref_t<R>, dynamic_backend_set> &&
                 !std::is_same_v<std::remove_cvref_t<R>, std::vector<backend_ref>> &&
                 requires(R& r) {
                     { *std::begin(r) } -> std::convertible_to<backend_ref>;
                     std::end(r);
                 })
    dynamic_backend_set(R&& backends) { // NOLINT: implicit, so a scheduler takes the range directly
        for (auto&& b : backends) backends_.push_back(static_cast<backend_ref>(b));
    }

    void push_back(backend_ref b) { backends_.push_back(b); }
    [[nodiscard]] std::size_t size() const noexcept { return backends_.size(); }
    [[nodiscard]] const backend_ref& operator[](std::size_t i) const noexcept { return backends_[i]; }
    /// The index of `b` in the set, or size() when it is not one of them. `b` is a
    /// backend, a backend_ref or an owning wrapper that converts to one (any_backend).
    template <class B>
    [[nodiscard]] std::size_t index_of(const B& b) const noexcept {
        const void* id = &b;
        if constexpr (std::is_same_v<B, backend_ref>)
            id = b.id();
        else if constexpr (!backend<B> && std::is_convertible_v<B&, backend_ref>)
            id = static_cast<backend_ref>(const_cast<B&>(b)).id();
        for (std::size_t i = 0; i < backends_.size(); ++i)
            if (backends_[i].id() == id) return i;
        return size();
    }

    [[nodiscard]] std::string_view name(std::size_t i) const { return backends_[i].name(); }
    [[nodiscard]] std::string_view description(std::size_t i) const { return backends_[i].description(); }
    [[nodiscard]] device_kind kind(std::size_t i) const { return backends_[i].kind(); }
    [[nodiscard]] memory_info memory(std::size_t i) const { return backends_[i].memory(); }
    [[nodiscard]] buffer_type_ref buffer_type(std::size_t i) const { return backends_[i].buffer_type(); }
    [[nodiscard]] bool supports_op(std::size_t i, const tensor& t) const { return backends_[i].supports_op(t); }
    [[nodiscard]] bool supports_buffer_type(std::size_t i, const buffer_type_ref& bt) const {
        return backends_[i].supports_buffer_type(bt);
    }
    [[nodiscard]] bool offload_op(std::size_t i, const tensor& t) const { return backends_[i].offload_op(t); }
    [[nodiscard]] status compute(std::size_t i, graph_view g) { return backends_[i].compute(g); }
    [[nodiscard]] status synchronize(std::size_t i) { return backends_[i].synchronize(); }
    [[nodiscard]] bool copy_async(std::size_t i, const tensor& src, tensor& dst) {
        return backends_[i].copy_tensor_async(src, dst);
    }
    [[nodiscard]] status init_events(int n_copies) {
        events_.clear();
        events_.resize(backends_.size());
        for (std::size_t i = 0; i < backends_.size(); ++i) {
            for (int c = 0; c < n_copies; ++c) {
                auto e = backends_[i].make_event();
                if (!e) { // no events (or none could be made): host synchronization
                    events_[i].clear();
                    break;
                }
                events_[i].push_back(std::move(e));
            }
        }
        return {};
    }
    [[nodiscard]] bool has_events(std::size_t i) const noexcept { return i < events_.size() && !events_[i].empty(); }
    bool set_timing(std::size_t i, bool on) { return backends_[i].set_timing(on); }
    [[nodiscard]] std::optional<device_span> last_compute_time(std::size_t i) const {
        return backends_[i].last_compute_time();
    }
    [[nodiscard]] status record(std::size_t i, int c) {
        if (!has_events(i)) return {};
        return backends_[i].record(events_[i][static_cast<std::size_t>(c)].get());
    }
    [[nodiscard]] status wait(std::size_t i, std::size_t j, int c) {
        if (i == j) return {};
        if (!has_events(j)) return synchronize(j);
        return backends_[i].wait(backends_[j], events_[j][static_cast<std::size_t>(c)].get());
    }
    [[nodiscard]] status event_sync(std::size_t i, int c) {
        if (!has_events(i)) return synchronize(i);
        return backends_[i].event_sync(events_[i][static_cast<std::size_t>(c)].get());
    }

private:
    std::vector<backend_ref> backends_;
    std::vector<std::vector<backend_ref::event_ptr>> events_;
};

static_assert(backend_set<dynamic_backend_set>);

} // namespace backplane
