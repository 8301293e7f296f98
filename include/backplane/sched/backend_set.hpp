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
// inlined into its entry. dynamic_backend_set is a vector of backend_ref, the same face
// erased for one backend at run time (erased/backend_ref.hpp).

#include <backplane/core/concepts.hpp>
#include <backplane/core/error.hpp>
#include <backplane/core/graph.hpp>
#include <backplane/core/tensor.hpp>
#include <backplane/erased/backend_ref.hpp>
#include <backplane/memory/buffer.hpp>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <iterator>
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

/// How one split input reaches its split in a set whose backends live in several
/// processes (routed_backend_set): the executor copies it here (`local`), another
/// process does (`none`), or it crosses between processes: this process sends it
/// (`send`; `send_and_local` also copies it here), or receives it (`receive`).
enum class copy_route : std::uint8_t { local, none, send, receive, send_and_local };

/// A backend set whose backends live in several processes (mpi/pipeline.hpp): for a copy
/// of a tensor computed by backend a into a split of backend b, `route(a, b)`; then
/// `send(a, b, src)` once a is synchronized, or `receive(a, b, dst)` once b no longer
/// reads dst.
template <class S>
concept routed_backend_set = backend_set<S> && requires(S& s, const S& cs, std::size_t a, const tensor& ct, tensor& t) {
    { cs.route(a, a) } -> std::same_as<copy_route>;
    { s.send(a, a, ct) } -> std::same_as<status>;
    { s.receive(a, a, t) } -> std::same_as<status>;
};

namespace detail {

/// Synchronizes every backend of `s`, all of them even after a failure: the first
/// failure's status.
template <backend_set Set>
status synchronize_all(Set& s) {
    status first;
    for (std::size_t i = 0; i < s.size(); ++i)
        if (status st = s.synchronize(i); !st && first) (void)(first = std::move(st));
    return first;
}

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
    /// supports_op for a node its op defines (narrowing_backend).
    [[nodiscard]] bool supports_defined_op(std::size_t i, const tensor& t) const {
        return dispatch(i, [&](const auto& b, const auto&) { return detail::supports_defined_of(b, t); });
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
    [[nodiscard]] bool supports_defined_op(std::size_t i, const tensor& t) const {
        return backends_[i].supports_defined_op(t);
    }
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
