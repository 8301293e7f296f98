#pragma once
// The contracts every backend models, as C++20 concepts.
//
// A backend author writes one type per concept (a buffer, a buffer type, a backend, a
// device, and optionally an event) and nothing else: allocation, scheduling, copying
// and the type-erased runtime face are derived from these models by templates.
// Capabilities that are optional in ggml (a NULL function pointer there) are refined
// concepts here, detected at compile time; generic code branches with `if constexpr`
// and always has a correct fallback.
//
// Each adapter proves conformance right after its definition:
//     static_assert(backplane::backend<my_backend>);
// and a missing member is then named by the compiler ("the required expression
// 'b.compute(g)' is invalid").

#include <backplane/core/error.hpp>
#include <backplane/core/fusion_set.hpp>
#include <backplane/core/graph.hpp>
#include <backplane/core/tensor.hpp>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace backplane {

class buffer_type_ref; // memory layer: a non-owning, type-erased reference to a buffer type

/// What a buffer holds; weights steer the scheduler (ops that read weights run where the
/// weights are).
enum class buffer_usage : std::uint8_t { any, weights, compute };

constexpr std::string_view to_string(buffer_usage u) noexcept {
    switch (u) {
    case buffer_usage::any: return "any";
    case buffer_usage::weights: return "weights";
    case buffer_usage::compute: return "compute";
    }
    return "?";
}

/// Kind of hardware behind a device.
enum class device_kind : std::uint8_t { cpu, gpu, igpu, accel };

constexpr std::string_view to_string(device_kind k) noexcept {
    switch (k) {
    case device_kind::cpu: return "cpu";
    case device_kind::gpu: return "gpu";
    case device_kind::igpu: return "igpu";
    case device_kind::accel: return "accel";
    }
    return "?";
}

/// Free and total bytes of a device's memory.
struct memory_info {
    std::size_t free = 0;
    std::size_t total = 0;
};

/// What a device can do beyond the required minimum.
struct device_caps {
    bool async = false;                ///< its backends transfer and compute asynchronously
    bool host_buffer = false;          ///< it offers a pinned host buffer type
    bool buffer_from_host_ptr = false; ///< it can wrap user memory as a buffer
    bool events = false;               ///< its backends support events
};

// ---------------------------------------------------------------------------------------
// buffer

/// A block of memory owned by a backend, holding tensors.
///
/// Requirements, for `B& b`, `tensor& t` (whose data lies in b), byte `offset` and `size`
/// within t, `src`/`dst` host pointers and a byte `value`:
///  1. `b.base()`: address of the first byte, in the address space tensors' data uses
///     (a real pointer for host memory; any stable, non-null value for device memory).
///  2. `b.size()`: bytes.
///  3. `b.set_tensor(t, src, offset, size)`, `b.get_tensor(t, dst, offset, size)`,
///     `b.memset_tensor(t, value, offset, size)`: byte ranges of a tensor, -> status.
///     Range checks are done by the generic layer before these are called.
///  4. `b.clear(value)`: every byte, -> status.
///  5. move-constructible (the generic layer takes ownership).
///
/// Example:
///     struct my_buffer {
///         void* base() const; std::size_t size() const;
///         status set_tensor(tensor&, const void*, std::size_t, std::size_t);
///         status get_tensor(const tensor&, void*, std::size_t, std::size_t);
///         status memset_tensor(tensor&, std::uint8_t, std::size_t, std::size_t);
///         status clear(std::uint8_t);
///     };
template <class B>
concept buffer = std::move_constructible<B> && std::destructible<B> &&
                 requires(B& b, const B& cb, tensor& t, const tensor& ct, const void* src, void* dst,
                          std::size_t offset, std::size_t size, std::uint8_t value) {
                     { cb.base() } -> std::convertible_to<void*>;
                     { cb.size() } -> std::convertible_to<std::size_t>;
                     { b.set_tensor(t, src, offset, size) } -> std::same_as<status>;
                     { b.get_tensor(ct, dst, offset, size) } -> std::same_as<status>;
                     { b.memset_tensor(t, value, offset, size) } -> std::same_as<status>;
                     { b.clear(value) } -> std::same_as<status>;
                 };

/// A buffer that prepares tensors placed in it (for example device-side metadata).
template <class B>
concept tensor_init_buffer = buffer<B> && requires(B& b, tensor& t) {
    { b.init_tensor(t) } -> std::same_as<status>;
};

/// A buffer that copies into its tensors from another buffer on the device side.
/// `b.copy_tensor(src, dst)` (dst in b) returns false when it cannot read src's buffer;
/// the generic layer then stages the copy through the host.
template <class B>
concept copy_buffer = buffer<B> && requires(B& b, const tensor& src, tensor& dst) {
    { b.copy_tensor(src, dst) } -> std::same_as<bool>;
};

/// A buffer with per-allocation state to drop when its tensors are re-placed.
template <class B>
concept resettable_buffer = buffer<B> && requires(B& b) { b.reset(); };

// ---------------------------------------------------------------------------------------
// buffer_type

/// A kind of memory and the allocator for it.
///
/// Requirements, for `const T& bt`, a tensor `t` and a byte count `size`:
///  1. `typename T::buffer_t` models `buffer`.
///  2. `bt.name()`: a short name ("CPU", "Vulkan0").
///  3. `bt.alignment()`: alignment of tensor data in its buffers (a power of two).
///  4. `bt.max_size()`: the largest buffer it can allocate.
///  5. `bt.alloc_size(t)`: bytes t needs in such a buffer (at least t.nbytes()).
///  6. `bt.is_host()`: its memory is host memory that the CPU may read and write.
///  7. `bt.allocate(size)` -> result<buffer_t>: out of memory is a status, never an abort.
/// A buffer type object must outlive every buffer allocated from it.
template <class T>
concept buffer_type = requires(const T& bt, const tensor& t, std::size_t size) {
    typename T::buffer_t;
    requires buffer<typename T::buffer_t>;
    { bt.name() } -> std::convertible_to<std::string_view>;
    { bt.alignment() } -> std::convertible_to<std::size_t>;
    { bt.max_size() } -> std::convertible_to<std::size_t>;
    { bt.alloc_size(t) } -> std::convertible_to<std::size_t>;
    { bt.is_host() } -> std::convertible_to<bool>;
    { bt.allocate(size) } -> std::same_as<result<typename T::buffer_t>>;
};

/// A buffer type whose memory is host memory, known at compile time
/// (`static constexpr bool host_memory = true`). The last backend of a scheduler must
/// use one, so that graph inputs and fallbacks always have a home.
template <class T>
concept host_buffer_type = buffer_type<T> && requires {
    requires T::host_memory;
};

/// A buffer type that names the device its memory belongs to (ggml's
/// ggml_backend_buft_get_device): `bt.device_name()` -> that device's name() (what the
/// registry finds it by). Optional: the runtime face (buffer_type_ref::device_name)
/// answers "" (unknown) for a buffer type that does not say.
template <class T>
concept device_buffer_type = buffer_type<T> && requires(const T& bt) {
    { bt.device_name() } -> std::convertible_to<std::string_view>;
};

namespace detail {
/// An lvalue reference to a buffer type model (what devices and backends return).
template <class R>
concept buffer_type_lvalue = std::is_lvalue_reference_v<R> && buffer_type<std::remove_cvref_t<R>>;
} // namespace detail

// ---------------------------------------------------------------------------------------
// device

/// A piece of hardware, or a part of one, that can make backends.
///
/// Requirements, for `const D& d`, a tensor `t` and `buffer_type_ref bt`:
///  1. `d.name()`, `d.description()`: short name ("CPU") and a human description.
///  2. `d.kind()` -> device_kind; `d.memory()` -> memory_info; `d.caps()` -> device_caps.
///  3. `d.buffer_type()`: a reference to its default buffer type (models buffer_type).
///  4. `d.supports_op(t)`, `d.supports_buffer_type(bt)` -> bool.
///  5. `d.make_backend()`: a new backend (stream) on the device. (Checked where used:
///     concepts cannot refer to each other recursively.)
template <class D>
concept device = requires(const D& d, const tensor& t, const buffer_type_ref& bt) {
    { d.name() } -> std::convertible_to<std::string_view>;
    { d.description() } -> std::convertible_to<std::string_view>;
    { d.kind() } -> std::same_as<device_kind>;
    { d.memory() } -> std::same_as<memory_info>;
    { d.caps() } -> std::same_as<device_caps>;
    { d.buffer_type() } -> detail::buffer_type_lvalue;
    { d.supports_op(t) } -> std::convertible_to<bool>;
    { d.supports_buffer_type(bt) } -> std::convertible_to<bool>;
    d.make_backend();
};

/// A device that offers a pinned host buffer type for fast transfers.
template <class D>
concept host_buffer_device = device<D> && requires(const D& d) {
    { d.host_buffer_type() } -> detail::buffer_type_lvalue;
};

/// A device that wraps user memory as a buffer of its own
/// (`d.buffer_from_host_ptr(ptr, size)` -> result<a buffer>).
template <class D>
concept host_ptr_device = device<D> && requires(const D& d, void* ptr, std::size_t size) {
    { d.buffer_from_host_ptr(ptr, size) };
};

/// A device that wants to run some ops on weights that live elsewhere
/// (large batches, where the transfer pays for itself).
template <class D>
concept offload_device = device<D> && requires(const D& d, const tensor& t) {
    { d.offload_op(t) } -> std::convertible_to<bool>;
};

// ---------------------------------------------------------------------------------------
// event

/// A point in a backend's stream of work that others can wait for.
/// `e.synchronize()` blocks the host until the work recorded before it is done.
/// Recording and device-side waiting are members of the backend that owns the event
/// type (see event_backend), because only that backend knows how to do them.
template <class E>
concept event = std::move_constructible<E> && std::destructible<E> && requires(E& e) {
    { e.synchronize() } -> std::same_as<status>;
};

// ---------------------------------------------------------------------------------------
// backend

/// A stream of work on a device.
///
/// Requirements, for `B& b`, `const B& cb`, a tensor `t`, a graph view `g` and
/// `buffer_type_ref bt`:
///  1. `cb.name()`: short name.
///  2. `cb.device()`: a reference to the device it runs on (models device).
///  3. `b.buffer_type()`: a reference to its default buffer type (models buffer_type).
///  4. `cb.supports_op(t)`: it can compute t with t's types and layouts (the truth: the
///     scheduler relies on it).
///  5. `cb.supports_buffer_type(bt)`: it can read and write tensors in such buffers.
///  6. `b.compute(g)` -> status: computes the nodes of g in order (view ops compute
///     nothing). May return before the work is done on asynchronous backends, which may
///     read g when they get to it: the caller keeps the node list, the nodes, their
///     sources and their memory as they were until that work is done (synchronize(), or
///     an event recorded after it).
///  7. `b.synchronize()` -> status: waits until all submitted work is done.
///
/// Example:
///     static_assert(backplane::backend<backplane::cpu_backend>);
template <class B>
concept backend = requires(B& b, const B& cb, const tensor& t, graph_view g, const buffer_type_ref& bt) {
    { cb.name() } -> std::convertible_to<std::string_view>;
    cb.device();
    requires device<std::remove_cvref_t<decltype(cb.device())>>;
    { b.buffer_type() } -> detail::buffer_type_lvalue;
    { cb.supports_op(t) } -> std::convertible_to<bool>;
    { cb.supports_buffer_type(bt) } -> std::convertible_to<bool>;
    { b.compute(g) } -> std::same_as<status>;
    { b.synchronize() } -> std::same_as<status>;
};

/// A backend with asynchronous transfers. Each call queues the transfer on the stream
/// and may return before it is done; synchronize() waits. copy_tensor_async(src, dst)
/// returns false when it cannot copy from src's buffer (the caller then falls back to a
/// synchronous staged copy).
template <class B>
concept async_backend = backend<B> && requires(B& b, tensor& t, const tensor& ct, const void* src, void* dst,
                                               std::size_t offset, std::size_t size) {
    { b.set_tensor_async(t, src, offset, size) } -> std::same_as<status>;
    { b.get_tensor_async(ct, dst, offset, size) } -> std::same_as<status>;
    { b.copy_tensor_async(ct, t) } -> std::same_as<bool>;
};

/// A backend with events: `typename B::event_t` models event; `b.make_event()` ->
/// result<event_t>; `b.record(e)` marks the current end of the stream; `b.wait(e)` makes
/// this stream wait on the device until e is reached (no host round trip).
template <class B>
concept event_backend = backend<B> && requires(B& b) {
    typename B::event_t;
    requires event<typename B::event_t>;
    { b.make_event() } -> std::same_as<result<typename B::event_t>>;
} && requires(B& b, typename B::event_t& e) {
    { b.record(e) } -> std::same_as<status>;
    { b.wait(e) } -> std::same_as<status>;
};

/// A backend that prepares a graph once and computes it many times:
/// `typename B::plan_t`, `b.make_plan(g)` -> result<plan_t>, `b.compute(plan)` -> status.
template <class B>
concept plan_backend = backend<B> && requires(B& b, graph_view g) {
    typename B::plan_t;
    { b.make_plan(g) } -> std::same_as<result<typename B::plan_t>>;
} && requires(B& b, typename B::plan_t& p) {
    { b.compute(p) } -> std::same_as<status>;
};

/// A backend that says what it narrows: `cb.supports_defined_op(t)` answers supports_op(t)
/// for a node t that its op defines (is_defined(t), core/op_traits.hpp), so supports_op(t)
/// is `is_defined(t) && supports_defined_op(t)`. A scheduler judges each node's rule once
/// and then asks every backend only this; a backend without it is asked supports_op.
template <class B>
concept narrowing_backend = backend<B> && requires(const B& cb, const tensor& t) {
    { cb.supports_defined_op(t) } -> std::convertible_to<bool>;
};

/// A backend that wants to run ops on weights held by another backend (see
/// offload_device).
template <class B>
concept offload_backend = backend<B> && requires(const B& cb, const tensor& t) {
    { cb.offload_op(t) } -> std::convertible_to<bool>;
};

/// When a backend's device ran its latest compute, in nanoseconds of the device's own
/// clock (comparable between the computes of one backend, not with the host's clock).
struct device_span {
    std::uint64_t start_ns = 0;
    std::uint64_t end_ns = 0;
};

/// A backend that times its computes on the device (GPU timestamps): after
/// `b.set_timing(true)`, each compute() also records when its work started and ended on
/// the device; after synchronize(), `b.last_compute_time()` returns that span of the
/// latest compute(), or nothing when timing is off, the device cannot time, or no
/// compute ran since timing was turned on. The scheduler's execution traces use it.
template <class B>
concept timed_backend = backend<B> && requires(B& b, const B& cb, bool on) {
    b.set_timing(on);
    { cb.last_compute_time() } -> std::same_as<std::optional<device_span>>;
};

/// A backend with a thread count: `b.set_n_threads(n)` -> status (n >= 1),
/// `cb.n_threads()`. The runtime's any_backend exposes it as a typed query (what ggml
/// looks up by the string "ggml_backend_set_n_threads").
template <class B>
concept threaded_backend = backend<B> && requires(B& b, const B& cb, int n) {
    { b.set_n_threads(n) } -> std::same_as<status>;
    { cb.n_threads() } -> std::convertible_to<int>;
};

/// A backend that asks a callback whether to stop a compute: `typename B::abort_callback`
/// (a callable returning bool, constructible from std::function<bool()>) and
/// `b.set_abort_callback(cb)`; a stopped compute returns errc::aborted.
template <class B>
concept abortable_backend = backend<B> && requires(B& b, typename B::abort_callback cb) {
    b.set_abort_callback(std::move(cb));
};

/// A backend that fuses groups of nodes (core/fusion.hpp) and can be told which:
/// `b.set_fusions(f)` with a fusion_set.
template <class B>
concept fusing_backend = backend<B> && requires(B& b, fusion_set f) { b.set_fusions(f); };

/// A name and a value describing what a device or a backend registry offers
/// ("AVX2" = "1", "subgroup_size" = "32").
struct feature {
    std::string name;
    std::string value;
    friend bool operator==(const feature&, const feature&) = default;
};

/// A device that lists its features (`d.features()` -> a range of feature).
template <class D>
concept featured_device = device<D> && requires(const D& d) {
    { d.features() } -> std::convertible_to<std::vector<feature>>;
};

/// A device with buffer types beyond its default and host ones (for example memory
/// laid out for its own kernels): `d.extra_buffer_types()` -> std::vector<buffer_type_ref>.
template <class D>
concept extra_buffer_types_device = device<D> && requires(const D& d) {
    { d.extra_buffer_types() } -> std::convertible_to<std::vector<buffer_type_ref>>;
};

/// A backend whose default buffer type is host memory, known at compile time.
template <class B>
concept host_backend = backend<B> && host_buffer_type<std::remove_cvref_t<decltype(std::declval<B&>().buffer_type())>>;

} // namespace backplane
