#pragma once
// A real backend for tests whose memory is NOT host memory: the device a scheduler test
// runs on any machine, as if it had a GPU.
//
//     backplane::test::test_device gpu({.name = "TEST0"});        // not a singleton
//     backplane::test::test_backend b = gpu.make_backend();       // a stream with a worker thread
//     auto w = backplane::alloc_tensors(ctx, gpu.buffer_type());  // private memory
//     b.set_tensor_async(*x, host, 0, n);  b.compute(g);  b.get_tensor_async(*y, out, 0, m);
//     status s = b.synchronize();                                 // first error since last time
//     CHECK(b.n_nodes_computed() == ...);                         // which paths ran
//
// Memory. A test_buffer's base() is the start of an address range reserved with
// mmap(PROT_NONE): tensors get addresses in it as in any buffer, but any host access to
// them faults (SIGSEGV, reported by ASan), because the bytes live in a private heap
// allocation reachable only through set / get / memset / copy and the backend's stream.
// A scheduler that dereferences tensor data of a non-host buffer crashes here instead of
// silently working. Fresh buffers hold params.fill_byte (0xff: NaN as f32, -1 as i32), so
// a tensor nobody copied shows up as NaN or an out-of-range row index.
//
// Compute. Every node that computes something is checked before anything is queued: it
// must be supported (params.supports and the CPU backend's supports_op), and it and each
// of its sources must lie in a buffer of this device's buffer type; otherwise compute()
// returns not_supported / invalid_argument naming the tensor and nothing runs (a
// scheduler bug shows up here). The launch parameters of each node (types, shapes,
// strides, op params, device addresses) are captured at that moment, as a GPU launch
// does. When the node runs, the bytes of its sources' elements are staged from private
// memory into host scratch tensors with the same ne / nb, the CPU reference kernel runs
// on one thread (cpu::compute_forward with compute_params::reference), and the bytes of
// the destination's elements are written back. Views and leafs compute nothing and are
// not checked (as on the CPU and CUDA backends).
//
// Streams. Each backend owns a worker thread and a FIFO queue. compute,
// set_tensor_async, get_tensor_async, copy_tensor_async, record and wait queue their
// work and return at once (params.async; with async = false everything runs inline on
// the calling thread). synchronize() waits for the queue to drain and returns the first
// error since the previous synchronize(); after an error, queued transfers and computes
// are skipped until that synchronize (event records and waits still run, so no other
// stream hangs on this one). Lifetimes, as in ggml:
//  * the host memory given to set_tensor_async / get_tensor_async, or read by
//    copy_tensor_async from a host tensor, must stay alive and untouched until
//    synchronize() (nothing is copied at enqueue time: ASan / TSan catch a caller that
//    frees or reuses it early);
//  * buffers must stay alive until the work that uses them has run;
//  * tensor metadata (and graph node lists) may change right after the call returns.
// Events: record(e) queues a marker that signals e when reached; wait(e) queues a wait on
// e on this stream (the host is not blocked: a stream waits for another stream's event
// on its own queue); e.synchronize() blocks the host. A wait refers to the latest record
// made before it (CUDA's rule); an event never recorded is complete. Waits time out
// after params.wait_timeout with device_error (a cycle of waits is a scheduler bug).
// pause() / resume() hold a stream's queue so that a test can see that work is really
// asynchronous; synchronize() resumes a paused stream.
//
// Counters. device.counters(): synchronous operations on the device's buffers (the
// buffer_handle paths: set / get / memset / copy_tensor); backend.counters() (and the
// shortcuts n_computes() ...): what ran on that backend's stream. Read them after
// synchronize().
//
// Threads: a backend is one stream, used by one thread at a time; different backends
// and devices may be used from different threads. No leaks; ASan, UBSan and TSan clean.

#include <backplane/backends/cpu/compute.hpp>
#include <backplane/core/op_traits.hpp>
#include <backplane/core/concepts.hpp>
#include <backplane/core/detail/describe.hpp>
#include <backplane/core/error.hpp>
#include <backplane/core/graph.hpp>
#include <backplane/core/tensor.hpp>
#include <backplane/memory/buffer.hpp>
#include <backplane/memory/detail/align.hpp>
#include <backplane/memory/tensor_copy.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <new>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>

namespace backplane::test {

class test_buffer;
class test_buffer_type;
class test_device;
class test_backend;
class test_event;
namespace detail {
struct count;
class test_stream;
} // namespace detail

// ---------------------------------------------------------------------------------------
// counters

/// Operation counters (relaxed atomics): what ran, so tests can assert which paths a
/// scheduler took. Counted when the work runs, so read them after synchronize().
class test_counters {
public:
    test_counters() = default;
    test_counters(const test_counters&) = delete;
    test_counters& operator=(const test_counters&) = delete;

    [[nodiscard]] std::uint64_t n_computes() const noexcept { return get(n_computes_); }       ///< graphs
    [[nodiscard]] std::uint64_t n_nodes_computed() const noexcept { return get(n_nodes_); }    ///< no views
    [[nodiscard]] std::uint64_t n_sets() const noexcept { return get(n_sets_); }               ///< calls
    [[nodiscard]] std::uint64_t bytes_set() const noexcept { return get(bytes_set_); }
    [[nodiscard]] std::uint64_t n_gets() const noexcept { return get(n_gets_); }
    [[nodiscard]] std::uint64_t bytes_get() const noexcept { return get(bytes_get_); }
    [[nodiscard]] std::uint64_t n_copies() const noexcept { return get(n_copies_); }
    [[nodiscard]] std::uint64_t bytes_copied() const noexcept { return get(bytes_copied_); }
    [[nodiscard]] std::uint64_t n_memsets() const noexcept { return get(n_memsets_); } ///< clear too
    /// copy_buffer::copy_tensor / copy_tensor_async calls that returned false.
    [[nodiscard]] std::uint64_t n_copy_refused() const noexcept { return get(n_copy_refused_); }
    [[nodiscard]] std::uint64_t n_copy_async_refused() const noexcept { return get(n_copy_refused_); }
    [[nodiscard]] std::uint64_t n_records() const noexcept { return get(n_records_); }
    [[nodiscard]] std::uint64_t n_waits() const noexcept { return get(n_waits_); }

    void reset() noexcept {
        for (auto* c : {&n_computes_, &n_nodes_, &n_sets_, &bytes_set_, &n_gets_, &bytes_get_, &n_copies_,
                        &bytes_copied_, &n_memsets_, &n_copy_refused_, &n_records_, &n_waits_})
            c->store(0, std::memory_order_relaxed);
    }

private:
    friend struct detail::count;
    using counter = std::atomic<std::uint64_t>;
    static std::uint64_t get(const counter& c) noexcept { return c.load(std::memory_order_relaxed); }

    counter n_computes_{0}, n_nodes_{0}, n_sets_{0}, bytes_set_{0}, n_gets_{0}, bytes_get_{0}, n_copies_{0},
        bytes_copied_{0}, n_memsets_{0}, n_copy_refused_{0}, n_records_{0}, n_waits_{0};
};

namespace detail {
/// The only writer of counters.
struct count {
    static void add(std::atomic<std::uint64_t>& c, std::uint64_t n = 1) noexcept {
        c.fetch_add(n, std::memory_order_relaxed);
    }
    static void compute(test_counters& c) noexcept { add(c.n_computes_); }
    static void node(test_counters& c) noexcept { add(c.n_nodes_); }
    static void set(test_counters& c, std::uint64_t bytes) noexcept {
        add(c.n_sets_);
        add(c.bytes_set_, bytes);
    }
    static void get(test_counters& c, std::uint64_t bytes) noexcept {
        add(c.n_gets_);
        add(c.bytes_get_, bytes);
    }
    static void copy(test_counters& c, std::uint64_t bytes) noexcept {
        add(c.n_copies_);
        add(c.bytes_copied_, bytes);
    }
    static void memset(test_counters& c) noexcept { add(c.n_memsets_); }
    static void copy_refused(test_counters& c) noexcept { add(c.n_copy_refused_); }
    static void record(test_counters& c) noexcept { add(c.n_records_); }
    static void wait(test_counters& c) noexcept { add(c.n_waits_); }
};
} // namespace detail

// ---------------------------------------------------------------------------------------
// parameters

/// How a test_device behaves. Every field has a default that models a plain GPU.
struct test_device_params {
    std::string name = "TEST0";   ///< device, buffer type and backend name
    std::string description = {}; ///< empty: "backplane test device <name> (private memory)"
    device_kind kind = device_kind::gpu;
    /// Extra restriction of the ops it computes, asked only for nodes that compute
    /// something (views and leafs are always supported). Empty: everything the CPU
    /// backend supports. supports_op is `is_defined(t) && supports(t)` (supports_defined_op: `supports(t)`).
    std::function<bool(const tensor&)> supports = {};
    bool async = true;  ///< queue work on a worker thread (false: everything inline)
    bool events = true; ///< make_event works (false: not_supported, caps().events false)
    /// offload_op(t): true for mul_mat with src[1]->ne[1] >= offload_min_batch (ggml's
    /// rule for GPUs: large batches pay for the weights' transfer); false when disabled.
    bool offload = false;
    std::int64_t offload_min_batch = 32;
    /// Buffers and streams also copy from other test devices' buffers (a peer copy);
    /// false: only from this device's buffers and host memory.
    bool peer_copy = false;
    std::size_t alignment = 64;                                                ///< a power of two
    std::size_t max_buffer_size = std::numeric_limits<std::size_t>::max() / 4; ///< max_size()
    /// Failure injection: allocations of more bytes than this fail with alloc_failed
    /// (also settable later: test_device::set_fail_alloc_above).
    std::size_t fail_alloc_above = std::numeric_limits<std::size_t>::max();
    /// memory().total; allocations that would exceed it fail with alloc_failed.
    std::size_t memory_size = std::size_t{64} << 30;
    std::uint8_t fill_byte = 0xff;             ///< contents of fresh buffers
    std::chrono::microseconds delay{0};        ///< the worker sleeps this long before each work item
    std::chrono::milliseconds wait_timeout{30000}; ///< event waits give up (device_error) after this
    /// Backends keep the list of nodes they computed (test_backend::computed_nodes()).
    bool record_nodes = false;
    /// Check and capture each graph when the worker gets to it, not in compute(): the
    /// backend then reads the node list and the tensors it was given until synchronize(),
    /// as the backend contract allows (core/concepts.hpp), so a caller that changes them
    /// earlier shows up (wrong results, or sanitizer reports).
    bool lazy = false;
    /// Fault injection: called with each computed node's result (host scratch with the
    /// node's type, shape and strides, after the reference kernel, before it is written
    /// back), so a test can break one op (scale it by 1 + 2^-10, say) and check that a
    /// comparison catches it. Runs on the backend's worker thread.
    std::function<void(tensor&)> fault = {};
};

namespace detail {

using backplane::for_each_byte_run; // memory/tensor_copy.hpp

/// Copies the element bytes of a tensor with t's layout from `from` to `to` (both point
/// at element 0).
inline void copy_elements(const tensor& t, std::byte* to, const std::byte* from) {
    for_each_byte_run(t, [&](std::size_t off, std::size_t n) { std::memmove(to + off, from + off, n); });
}

/// How src's bytes can be copied into dst: element by element when the layouts match,
/// as one block when both are contiguous with equal sizes; otherwise not at all.
enum class copy_shape : std::uint8_t { none, same_layout, flat };
inline copy_shape copy_shape_of(const tensor& src, const tensor& dst) noexcept {
    if (same_layout(src, dst)) return copy_shape::same_layout;
    if (src.is_contiguous() && dst.is_contiguous() && src.nbytes() == dst.nbytes()) return copy_shape::flat;
    return copy_shape::none;
}
inline void copy_tensor_bytes(copy_shape how, const tensor& dst, std::byte* to, const std::byte* from) {
    if (how == copy_shape::same_layout)
        copy_elements(dst, to, from);
    else if (dst.nbytes() != 0)
        std::memmove(to, from, dst.nbytes());
}

inline std::string device_prefix(std::string_view name) { return "test device '" + std::string(name) + "': "; }

} // namespace detail

// ---------------------------------------------------------------------------------------
// buffer

/// A buffer of a test device: a PROT_NONE address range for tensor addresses and a
/// private allocation holding the bytes. Models copy_buffer.
class test_buffer {
public:
    test_buffer(test_buffer&& o) noexcept
        : reservation_(std::exchange(o.reservation_, nullptr)), reserved_(std::exchange(o.reserved_, 0)),
          base_(std::exchange(o.base_, nullptr)), size_(std::exchange(o.size_, 0)),
          storage_(std::move(o.storage_)), bt_(std::exchange(o.bt_, nullptr)) {}
    test_buffer& operator=(test_buffer&&) = delete;
    test_buffer(const test_buffer&) = delete;
    test_buffer& operator=(const test_buffer&) = delete;
    inline ~test_buffer();

    /// The start of the reserved (inaccessible) address range: never dereference it.
    [[nodiscard]] void* base() const noexcept { return base_; }
    [[nodiscard]] std::size_t size() const noexcept { return size_; }
    [[nodiscard]] const test_buffer_type& buffer_type() const noexcept { return *bt_; }

    // Range checks were done by buffer_handle: [t.data + offset, + size) is inside.
    inline status set_tensor(tensor& t, const void* src, std::size_t offset, std::size_t size);
    inline status get_tensor(const tensor& t, void* dst, std::size_t offset, std::size_t size);
    inline status memset_tensor(tensor& t, std::uint8_t value, std::size_t offset, std::size_t size);
    inline status clear(std::uint8_t value);
    /// dst (in this buffer) from src in a buffer of this buffer type, in host memory (a
    /// host buffer or context data: a host-to-device copy) or, with params.peer_copy, in
    /// another test device's buffer. Layouts must match (or both be contiguous of one
    /// size). false otherwise: the caller stages the copy through the host.
    inline bool copy_tensor(const tensor& src, tensor& dst);

    /// The private bytes (for tests of the test backend itself; a scheduler must never
    /// need this: it goes through the buffer handle).
    [[nodiscard]] std::span<std::byte> storage() const noexcept { return {storage_.get(), size_}; }
    /// Where t's element 0 lives in the private bytes (t in this buffer).
    [[nodiscard]] std::byte* storage_of(const tensor& t) const noexcept {
        return storage_.get() + (reinterpret_cast<std::uintptr_t>(t.data) - reinterpret_cast<std::uintptr_t>(base_));
    }

    /// The test buffer t lives in, or null (no buffer, or another kind).
    [[nodiscard]] static test_buffer* of(const tensor& t) noexcept {
        return t.buffer != nullptr ? t.buffer->get_if<test_buffer>() : nullptr;
    }

private:
    friend class test_buffer_type;
    test_buffer(void* reservation, std::size_t reserved, void* base, std::size_t size,
                std::unique_ptr<std::byte[]> storage, const test_buffer_type* bt) noexcept
        : reservation_(reservation), reserved_(reserved), base_(base), size_(size), storage_(std::move(storage)),
          bt_(bt) {}

    void* reservation_ = nullptr;
    std::size_t reserved_ = 0;
    void* base_ = nullptr;
    std::size_t size_ = 0;
    std::unique_ptr<std::byte[]> storage_;
    const test_buffer_type* bt_ = nullptr;
};

// ---------------------------------------------------------------------------------------
// buffer type

/// The memory of a test device (owned by it; identified by address like every buffer
/// type). Not host memory.
class test_buffer_type {
public:
    using buffer_t = test_buffer;

    test_buffer_type(const test_buffer_type&) = delete;
    test_buffer_type& operator=(const test_buffer_type&) = delete;

    [[nodiscard]] std::string_view name() const noexcept { return name_; }
    [[nodiscard]] std::size_t alignment() const noexcept { return alignment_; }
    [[nodiscard]] std::size_t max_size() const noexcept { return max_size_; }
    [[nodiscard]] std::size_t alloc_size(const tensor& t) const noexcept { return t.nbytes(); }
    [[nodiscard]] bool is_host() const noexcept { return false; }

    /// A buffer of `size` bytes, or alloc_failed when size exceeds max_size(), the
    /// injected failure threshold, or the device's remaining memory, or the host cannot
    /// provide it.
    [[nodiscard]] inline result<test_buffer> allocate(std::size_t size) const;

    [[nodiscard]] const test_device& device() const noexcept { return *dev_; }
    [[nodiscard]] inline std::string_view device_name() const noexcept;
    /// Synchronous operations on this type's buffers.
    [[nodiscard]] const test_counters& counters() const noexcept { return counters_; }
    [[nodiscard]] test_counters& counters() noexcept { return counters_; }
    [[nodiscard]] std::size_t live_buffers() const noexcept { return live_buffers_.load(); }
    [[nodiscard]] std::size_t live_bytes() const noexcept { return live_bytes_.load(); }
    [[nodiscard]] std::size_t n_allocations() const noexcept { return n_allocations_.load(); } ///< successful
    [[nodiscard]] std::size_t n_failed_allocations() const noexcept { return n_failed_.load(); }

private:
    friend class test_device;
    friend class test_buffer;
    test_buffer_type(const test_device* dev, const test_device_params& p)
        : dev_(dev), name_(p.name), alignment_(backplane::detail::sane_alignment(p.alignment)),
          max_size_(p.max_buffer_size), memory_size_(p.memory_size), fill_(p.fill_byte), peer_copy_(p.peer_copy),
          fail_above_(p.fail_alloc_above) {}

    status fail(std::string what) const {
        n_failed_.fetch_add(1);
        return {errc::alloc_failed, detail::device_prefix(name_) + what};
    }

    const test_device* dev_;
    std::string name_;
    std::size_t alignment_;
    std::size_t max_size_;
    std::size_t memory_size_;
    std::uint8_t fill_;
    bool peer_copy_;
    mutable std::atomic<std::size_t> fail_above_;
    mutable std::atomic<std::size_t> live_buffers_{0};
    mutable std::atomic<std::size_t> live_bytes_{0};
    mutable std::atomic<std::size_t> n_allocations_{0};
    mutable std::atomic<std::size_t> n_failed_{0};
    mutable test_counters counters_;
};

inline result<test_buffer> test_buffer_type::allocate(std::size_t size) const {
    if (size > max_size_)
        return fail("buffer of " + std::to_string(size) + " bytes exceeds max_size " + std::to_string(max_size_));
    const std::size_t limit = fail_above_.load();
    if (size > limit)
        return fail("injected allocation failure: " + std::to_string(size) + " bytes requested, allocations above " +
                    std::to_string(limit) + " bytes fail");
    // account the device memory first (a compare-exchange: allocations may race)
    std::size_t used = live_bytes_.load();
    do {
        if (size > memory_size_ - std::min(used, memory_size_))
            return fail("out of device memory: " + std::to_string(size) + " bytes requested, " +
                        std::to_string(memory_size_ - std::min(used, memory_size_)) + " of " +
                        std::to_string(memory_size_) + " free");
    } while (!live_bytes_.compare_exchange_weak(used, used + size));
    auto unaccount = [&] { live_bytes_.fetch_sub(size); };

    // the address range: at least a page, aligned to the alignment, never accessible
    const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE) > 0 ? ::sysconf(_SC_PAGESIZE) : 4096);
    const std::size_t extra = alignment_ > page ? alignment_ : 0;
    const auto reserved = backplane::detail::align_up(std::max<std::size_t>(size, 1), page);
    if (!reserved || *reserved > std::numeric_limits<std::size_t>::max() - extra) {
        unaccount();
        return fail("buffer of " + std::to_string(size) + " bytes: size overflows");
    }
    const std::size_t span = *reserved + extra;
    void* r = ::mmap(nullptr, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (r == MAP_FAILED) {
        unaccount();
        return fail("cannot reserve " + std::to_string(span) + " bytes of address space");
    }
    void* base = static_cast<std::byte*>(r) + backplane::detail::padding_for(r, alignment_);

    std::unique_ptr<std::byte[]> storage(new (std::nothrow) std::byte[std::max<std::size_t>(size, 1)]);
    if (!storage) {
        ::munmap(r, span);
        unaccount();
        return fail("out of host memory for the private bytes of a " + std::to_string(size) + " bytes buffer");
    }
    std::memset(storage.get(), fill_, size);
    live_buffers_.fetch_add(1);
    n_allocations_.fetch_add(1);
    return test_buffer(r, span, base, size, std::move(storage), this);
}

inline test_buffer::~test_buffer() {
    if (bt_ == nullptr) return; // moved from
    ::munmap(reservation_, reserved_);
    bt_->live_buffers_.fetch_sub(1);
    bt_->live_bytes_.fetch_sub(size_);
}

inline status test_buffer::set_tensor(tensor& t, const void* src, std::size_t offset, std::size_t size) {
    std::memcpy(storage_of(t) + offset, src, size);
    detail::count::set(bt_->counters_, size);
    return {};
}

inline status test_buffer::get_tensor(const tensor& t, void* dst, std::size_t offset, std::size_t size) {
    std::memcpy(dst, storage_of(t) + offset, size);
    detail::count::get(bt_->counters_, size);
    return {};
}

inline status test_buffer::memset_tensor(tensor& t, std::uint8_t value, std::size_t offset, std::size_t size) {
    std::memset(storage_of(t) + offset, value, size);
    detail::count::memset(bt_->counters_);
    return {};
}

inline status test_buffer::clear(std::uint8_t value) {
    if (size_ != 0) std::memset(storage_.get(), value, size_);
    detail::count::memset(bt_->counters_);
    return {};
}

namespace detail {
/// Where a copy into a buffer of `dst_bt` may read src's bytes from (host pointer or
/// private storage), or null when it cannot read src's memory.
inline const std::byte* readable_source(const tensor& src, const test_buffer_type& dst_bt, bool peer_copy) {
    if (src.data == nullptr) return nullptr;
    if (src.buffer == nullptr || src.buffer->is_host()) return static_cast<const std::byte*>(src.data);
    if (test_buffer* b = test_buffer::of(src)) {
        if (&b->buffer_type() == &dst_bt || peer_copy) return b->storage_of(src);
    }
    return nullptr;
}
} // namespace detail

inline bool test_buffer::copy_tensor(const tensor& src, tensor& dst) {
    const auto how = detail::copy_shape_of(src, dst);
    const std::byte* from = detail::readable_source(src, *bt_, bt_->peer_copy_);
    if (how == detail::copy_shape::none || from == nullptr) {
        detail::count::copy_refused(bt_->counters_);
        return false;
    }
    detail::copy_tensor_bytes(how, dst, storage_of(dst), from);
    detail::count::copy(bt_->counters_, dst.nbytes());
    return true;
}

static_assert(backplane::buffer<test_buffer>);
static_assert(backplane::copy_buffer<test_buffer>);
static_assert(backplane::buffer_type<test_buffer_type>);
static_assert(!backplane::host_buffer_type<test_buffer_type>);
static_assert(backplane::device_buffer_type<test_buffer_type>);

// ---------------------------------------------------------------------------------------
// events and streams (internals)

namespace detail {

/// Shared by an event and the markers and waits queued on it.
struct test_event_state {
    std::mutex m;
    std::condition_variable cv;
    std::uint64_t n_recorded = 0;       ///< records made so far; record k is the k-th
    std::vector<std::uint64_t> pending; ///< records queued but not reached yet
    const void* device = nullptr;       ///< the device whose backends may record it
    std::string device_name;
    std::chrono::milliseconds timeout{30000};

    bool reached(std::uint64_t k) const noexcept {
        return k == 0 || std::find(pending.begin(), pending.end(), k) == pending.end();
    }
    /// Blocks until record k is reached; false on timeout.
    bool wait_for(std::uint64_t k) {
        std::unique_lock lk(m);
        return cv.wait_for(lk, timeout, [&] { return reached(k); });
    }
    void signal(std::uint64_t k) {
        {
            std::lock_guard lk(m);
            pending.erase(std::remove(pending.begin(), pending.end(), k), pending.end());
        }
        cv.notify_all();
    }
};

/// One operand of a captured node: its metadata and where its element 0 is in private
/// memory.
struct launch_operand {
    tensor meta;
    std::byte* at = nullptr;
};
/// A node as launched: its operands captured at compute() time.
struct node_launch {
    const tensor* origin = nullptr; ///< the graph's node (for computed_nodes())
    launch_operand dst;
    std::array<launch_operand, max_srcs> src;
    std::array<bool, max_srcs> has_src{};
};

/// A work item: the operation, and whether it runs even after an error (event records
/// and waits: other streams may depend on them).
struct test_work {
    std::function<status(test_stream&)> run;
    bool control = false;
};

/// A FIFO of work and the thread that runs it (or nothing, run inline).
class test_stream {
public:
    test_stream(bool async, std::chrono::microseconds delay, bool record_nodes)
        : async_(async), record_nodes_(record_nodes), delay_(delay) {
        if (async_) worker_ = std::thread([this] { loop(); });
    }
    test_stream(const test_stream&) = delete;
    test_stream& operator=(const test_stream&) = delete;
    /// Runs what is queued, then stops the worker.
    ~test_stream() {
        {
            std::lock_guard lk(m_);
            stop_ = true;
            paused_ = false;
        }
        cv_work_.notify_all();
        if (worker_.joinable()) worker_.join();
    }

    [[nodiscard]] bool async() const noexcept { return async_; }

    /// Queues w (async) or runs it now and returns its status (inline).
    status submit(test_work w) {
        if (!async_) return run_one(w);
        try {
            {
                std::lock_guard lk(m_);
                queue_.push_back(std::move(w));
            }
        } catch (const std::bad_alloc&) {
            return {errc::alloc_failed, "test stream: out of host memory queueing work"};
        }
        cv_work_.notify_one();
        return {};
    }

    /// Waits until the queue is empty and idle; the first error since the last call.
    status synchronize() {
        if (!async_) return {};
        std::unique_lock lk(m_);
        if (paused_) {
            paused_ = false;
            cv_work_.notify_all();
        }
        cv_idle_.wait(lk, [&] { return queue_.empty() && !busy_; });
        return std::exchange(error_, status{});
    }

    void pause() {
        std::lock_guard lk(m_);
        paused_ = true;
    }
    void resume() {
        {
            std::lock_guard lk(m_);
            paused_ = false;
        }
        cv_work_.notify_all();
    }

    test_counters counters;

    /// Notes a computed node (when recording).
    void computed(const tensor* node) {
        if (!record_nodes_) return;
        std::lock_guard lk(log_m_);
        log_.push_back(node);
    }
    std::vector<const tensor*> computed_nodes() const {
        std::lock_guard lk(log_m_);
        return log_;
    }
    void clear_log() {
        std::lock_guard lk(log_m_);
        log_.clear();
    }

    /// Host scratch of at least n bytes, 64-aligned, reused between nodes.
    std::byte* scratch(std::size_t n) {
        if (n + 64 > scratch_.size()) scratch_.resize(n + 64);
        auto* p = scratch_.data();
        return p + backplane::detail::padding_for(p, 64);
    }

private:
    status run_one(test_work& w) {
        try {
            return w.run(*this);
        } catch (const std::bad_alloc&) {
            return {errc::alloc_failed, "test stream: out of host memory"};
        } catch (const std::exception& e) {
            return {errc::failed, std::string("test stream: ") + e.what()};
        }
    }

    void loop() {
        std::unique_lock lk(m_);
        for (;;) {
            cv_work_.wait(lk, [&] { return (stop_ && queue_.empty()) || (!paused_ && !queue_.empty()); });
            if (queue_.empty()) return; // stopping, and everything ran
            test_work w = std::move(queue_.front());
            queue_.pop_front();
            busy_ = true;
            const bool skip = !error_.ok() && !w.control;
            lk.unlock();
            if (delay_.count() > 0) std::this_thread::sleep_for(delay_);
            status s = skip ? status{} : run_one(w);
            w = {}; // drop captures outside the lock
            lk.lock();
            busy_ = false;
            if (!s && error_.ok()) error_ = std::move(s);
            if (queue_.empty()) cv_idle_.notify_all();
        }
    }

    bool async_;
    bool record_nodes_;
    std::chrono::microseconds delay_;
    mutable std::mutex log_m_;
    std::vector<const tensor*> log_;
    std::vector<std::byte> scratch_;
    std::mutex m_;
    std::condition_variable cv_work_;
    std::condition_variable cv_idle_;
    std::deque<test_work> queue_;
    bool busy_ = false;
    bool paused_ = false;
    bool stop_ = false;
    status error_;
    std::thread worker_; // last: starts after everything it uses exists
};

/// Runs captured nodes: stage sources, compute with the reference kernel, write back.
inline status run_launches(const std::vector<node_launch>& launches, test_stream& s, std::string_view dev,
                           const std::function<void(tensor&)>& fault) {
    count::compute(s.counters);
    for (const node_launch& l : launches) {
        // scratch: the destination and each source, 64-aligned one after another
        std::size_t need = 0;
        auto reserve = [&](const tensor& t) {
            const std::size_t at = need;
            need += (t.nbytes() + 63) & ~std::size_t{63};
            return at;
        };
        const std::size_t dst_at = reserve(l.dst.meta);
        std::array<std::size_t, max_srcs> src_at{};
        for (std::size_t i = 0; i < max_srcs; ++i)
            if (l.has_src[i]) src_at[i] = reserve(l.src[i].meta);
        std::byte* scratch = s.scratch(need);

        std::array<tensor, max_srcs> srcs;
        tensor node = l.dst.meta;
        for (std::size_t i = 0; i < max_srcs; ++i) {
            if (!l.has_src[i]) {
                node.src[i] = nullptr;
                continue;
            }
            srcs[i] = l.src[i].meta;
            srcs[i].set_placement(nullptr, 0, scratch + src_at[i]); // host scratch, no buffer
            srcs[i].view_src = nullptr;
            copy_elements(srcs[i], static_cast<std::byte*>(srcs[i].data), l.src[i].at);
            node.src[i] = &srcs[i];
        }
        node.set_placement(nullptr, 0, scratch + dst_at);
        node.view_src = nullptr;

        cpu::compute_params p;
        p.reference = true;
        if (const errc e = cpu::compute_forward(p, node); e != errc::ok)
            return {e, device_prefix(dev) + "node " + backplane::detail::describe(&l.dst.meta) + " (" +
                           std::string(to_string(node.op)) + ") failed: " + std::string(to_string(e))};
        if (fault) fault(node);
        copy_elements(node, l.dst.at, static_cast<const std::byte*>(node.data));
        count::node(s.counters);
        s.computed(l.origin);
    }
    return {};
}

} // namespace detail

/// An event of a test device (see event_backend). Move-only; queued markers and waits
/// keep its state alive, so it may be destroyed at any time.
class test_event {
public:
    test_event(test_event&&) noexcept = default;
    test_event& operator=(test_event&&) noexcept = default;
    test_event(const test_event&) = delete;
    test_event& operator=(const test_event&) = delete;
    ~test_event() = default;

    /// Blocks the host until the latest record is reached (at once when never recorded).
    /// device_error after the device's wait_timeout.
    status synchronize() {
        if (!s_) return {errc::invalid_argument, "test event: moved from"};
        std::uint64_t k = 0;
        {
            std::lock_guard lk(s_->m);
            k = s_->n_recorded;
        }
        if (!s_->wait_for(k))
            return {errc::device_error, detail::device_prefix(s_->device_name) + "event synchronize timed out after " +
                                            std::to_string(s_->timeout.count()) + " ms"};
        return {};
    }
    /// True when the latest record has been reached (never blocks).
    [[nodiscard]] bool query() const {
        if (!s_) return true;
        std::lock_guard lk(s_->m);
        return s_->reached(s_->n_recorded);
    }

private:
    friend class test_backend;
    explicit test_event(std::shared_ptr<detail::test_event_state> s) noexcept : s_(std::move(s)) {}
    std::shared_ptr<detail::test_event_state> s_;
};

static_assert(backplane::event<test_event>);

// ---------------------------------------------------------------------------------------
// device

/// A configurable device with private (non-host) memory; see the file comment. Not a
/// singleton: make as many as a test needs. Its buffer type lives inside it and its
/// backends and buffers refer to it by address, so it is neither copyable nor movable
/// (hold it in a std::unique_ptr to keep several in a container) and must outlive them.
class test_device {
public:
    explicit test_device(test_device_params params = {})
        : params_(std::move(params)), bt_(this, params_),
          description_(params_.description.empty() ? "backplane test device " + params_.name + " (private memory)"
                                                    : params_.description) {}
    test_device(const test_device&) = delete;
    test_device& operator=(const test_device&) = delete;

    [[nodiscard]] std::string_view name() const noexcept { return params_.name; }
    [[nodiscard]] std::string_view description() const noexcept { return description_; }
    [[nodiscard]] device_kind kind() const noexcept { return params_.kind; }
    [[nodiscard]] memory_info memory() const noexcept {
        const std::size_t used = std::min(bt_.live_bytes(), params_.memory_size);
        return {params_.memory_size - used, params_.memory_size};
    }
    [[nodiscard]] device_caps caps() const noexcept {
        return {.async = params_.async, .host_buffer = false, .buffer_from_host_ptr = false, .events = params_.events};
    }
    [[nodiscard]] const test_buffer_type& buffer_type() const noexcept { return bt_; }

    /// view ops and leafs: always; other nodes: params.supports (if set) and the CPU.
    [[nodiscard]] bool supports_op(const tensor& t) const {
        if (t.op == op_kind::none || is_view_op(t.op)) return true;
        return is_defined(t) && supports_defined_op(t);
    }
    [[nodiscard]] bool supports_defined_op(const tensor& t) const { return !params_.supports || params_.supports(t); }
    /// Only its own buffer type (not host memory: its kernels cannot read it).
    [[nodiscard]] bool supports_buffer_type(const buffer_type_ref& bt) const noexcept {
        return bt == buffer_type_ref(bt_);
    }
    /// See test_device_params::offload.
    [[nodiscard]] bool offload_op(const tensor& t) const noexcept {
        return params_.offload && t.op == op_kind::mul_mat && t.src[1] != nullptr &&
               t.src[1]->ne[1] >= params_.offload_min_batch;
    }

    /// A new stream on this device.
    [[nodiscard]] inline test_backend make_backend() const;

    [[nodiscard]] const test_device_params& params() const noexcept { return params_; }
    /// Synchronous operations on this device's buffers (buffer_handle set/get/memset/copy).
    [[nodiscard]] const test_counters& counters() const noexcept { return bt_.counters(); }
    void reset_counters() noexcept { bt_.counters_.reset(); }
    /// Failure injection: allocations of more than n bytes fail from now on.
    void set_fail_alloc_above(std::size_t n) noexcept { bt_.fail_above_.store(n); }
    [[nodiscard]] std::size_t live_buffers() const noexcept { return bt_.live_buffers(); }

private:
    test_device_params params_;
    test_buffer_type bt_;
    std::string description_;
};

// ---------------------------------------------------------------------------------------
// backend

/// A stream on a test device: models backend, async_backend, event_backend and
/// offload_backend (offload_op answers false unless params.offload). Movable (the queue
/// and its worker stay on the heap); a moved-from backend reports invalid_argument.
class test_backend {
public:
    using event_t = test_event;

    explicit test_backend(const test_device& dev)
        : dev_(&dev), stream_(std::make_unique<detail::test_stream>(dev.params().async, dev.params().delay,
                                                                     dev.params().record_nodes)) {}
    test_backend(test_backend&&) noexcept = default;
    test_backend& operator=(test_backend&&) noexcept = default;
    test_backend(const test_backend&) = delete;
    test_backend& operator=(const test_backend&) = delete;
    ~test_backend() = default; // runs what is queued, then joins the worker

    [[nodiscard]] std::string_view name() const noexcept { return dev_->name(); }
    [[nodiscard]] const test_device& device() const noexcept { return *dev_; }
    [[nodiscard]] const test_buffer_type& buffer_type() const noexcept { return dev_->buffer_type(); }
    [[nodiscard]] bool supports_op(const tensor& t) const { return dev_->supports_op(t); }
    [[nodiscard]] bool supports_defined_op(const tensor& t) const { return dev_->supports_defined_op(t); }
    [[nodiscard]] bool supports_buffer_type(const buffer_type_ref& bt) const noexcept {
        return dev_->supports_buffer_type(bt);
    }
    [[nodiscard]] bool offload_op(const tensor& t) const noexcept { return dev_->offload_op(t); }

    /// Checks every node of g (see the file comment), captures them and queues their
    /// computation. not_supported / invalid_argument / out_of_range name the first bad
    /// tensor, and then nothing is queued. Errors while running (a get_rows index out of
    /// range) come from synchronize() (inline mode: from here).
    status compute(graph_view g) {
        if (!stream_) return moved_from();
        const test_device* dev = dev_;
        std::string name{dev->name()};
        if (dev->params().lazy)
            return stream_->submit({[dev, g, name](detail::test_stream& s) {
                std::vector<detail::node_launch> launches;
                if (status st = capture_graph(*dev, g, launches); !st) return st;
                return detail::run_launches(launches, s, name, dev->params().fault);
            }});
        std::vector<detail::node_launch> launches;
        if (status st = capture_graph(*dev, g, launches); !st) return st;
        return stream_->submit({[launches = std::move(launches), name, fault = dev->params().fault](detail::test_stream& s) {
            return detail::run_launches(launches, s, name, fault);
        }});
    }

    /// Waits for everything queued; returns the first error since the last call.
    status synchronize() {
        if (!stream_) return moved_from();
        return stream_->synchronize();
    }

    /// Queues a write of host bytes [src, src + size) into t at byte `offset`. src must
    /// stay alive and unchanged until synchronize(). t must live in this device's buffer
    /// type (invalid_argument otherwise); range errors are out_of_range, found now.
    status set_tensor_async(tensor& t, const void* src, std::size_t offset, std::size_t size) {
        if (!stream_) return moved_from();
        if (status s = check_transfer("set_tensor_async", t, offset, size); !s) return s;
        std::byte* to = test_buffer::of(t)->storage_of(t) + offset;
        return stream_->submit({[to, src, size](detail::test_stream& s) {
            if (size != 0) std::memcpy(to, src, size);
            detail::count::set(s.counters, size);
            return status{};
        }});
    }

    /// Queues a read of t's bytes at `offset` into host memory dst, written when the
    /// work ahead of it is done; dst must not be read before synchronize().
    status get_tensor_async(const tensor& t, void* dst, std::size_t offset, std::size_t size) {
        if (!stream_) return moved_from();
        if (status s = check_transfer("get_tensor_async", t, offset, size); !s) return s;
        const std::byte* from = test_buffer::of(t)->storage_of(t) + offset;
        return stream_->submit({[from, dst, size](detail::test_stream& s) {
            if (size != 0) std::memcpy(dst, from, size);
            detail::count::get(s.counters, size);
            return status{};
        }});
    }

    /// Queues a copy of src into dst (dst in this device's buffer type), from a buffer of
    /// this device, from host memory (which must stay alive until synchronize()) or, with
    /// params.peer_copy, another test device's buffer. Layouts must match (or both be
    /// contiguous of one size). false (counted in n_copy_async_refused) otherwise: the
    /// caller then copies synchronously.
    bool copy_tensor_async(const tensor& src, tensor& dst) {
        if (!stream_) return false;
        test_buffer* db = test_buffer::of(dst);
        const auto how = detail::copy_shape_of(src, dst);
        const std::byte* from = detail::readable_source(src, dev_->buffer_type(), dev_->params().peer_copy);
        if (db == nullptr || &db->buffer_type() != &dev_->buffer_type() || how == detail::copy_shape::none ||
            from == nullptr || !dst.buffer->contains(dst.data, dst.nbytes()) ||
            (src.buffer != nullptr && !src.buffer->contains(src.data, src.nbytes()))) {
            detail::count::copy_refused(stream_->counters);
            return false;
        }
        std::byte* to = db->storage_of(dst);
        tensor layout = dst; // the launch's view of dst, fixed now
        layout.name.clear();
        const status s = stream_->submit({[how, layout = std::move(layout), to, from](detail::test_stream& st) {
            detail::copy_tensor_bytes(how, layout, to, from);
            detail::count::copy(st.counters, layout.nbytes());
            return status{};
        }});
        return s.ok();
    }

    /// A new event of this device; not_supported when params.events is false.
    result<test_event> make_event() {
        if (!dev_->params().events)
            return status(errc::not_supported, prefix() + "events are disabled (test_device_params::events)");
        auto s = std::make_shared<detail::test_event_state>();
        s->device = dev_;
        s->device_name = dev_->params().name;
        s->timeout = dev_->params().wait_timeout;
        return test_event(std::move(s));
    }

    /// Marks the current end of this stream in e (an event of this device).
    status record(test_event& e) {
        if (!stream_) return moved_from();
        if (!e.s_) return {errc::invalid_argument, prefix() + "record: the event was moved from"};
        if (e.s_->device != dev_)
            return {errc::invalid_argument,
                    prefix() + "record: the event belongs to test device '" + e.s_->device_name + "'"};
        std::uint64_t k = 0;
        {
            std::lock_guard lk(e.s_->m);
            k = ++e.s_->n_recorded;
            e.s_->pending.push_back(k);
        }
        status s = stream_->submit({[st = e.s_, k](detail::test_stream& str) {
                                        st->signal(k);
                                        detail::count::record(str.counters);
                                        return status{};
                                    },
                                    true});
        if (!s) e.s_->signal(k); // never queued: nobody may wait for it
        return s;
    }

    /// Makes this stream wait (on its own queue, not the host) until e's latest record
    /// is reached. e may belong to any test device.
    status wait(test_event& e) {
        if (!stream_) return moved_from();
        if (!e.s_) return {errc::invalid_argument, prefix() + "wait: the event was moved from"};
        std::uint64_t k = 0;
        {
            std::lock_guard lk(e.s_->m);
            k = e.s_->n_recorded;
        }
        std::string dev{name()};
        return stream_->submit({[st = e.s_, k, dev](detail::test_stream& s) {
                                    detail::count::wait(s.counters);
                                    if (st->wait_for(k)) return status{};
                                    return status(errc::device_error,
                                                  detail::device_prefix(dev) + "wait on an event of '" +
                                                      st->device_name + "' timed out after " +
                                                      std::to_string(st->timeout.count()) + " ms (a cycle of waits?)");
                                },
                                true});
    }

    /// Holds the queue: nothing queued from now on starts until resume() or
    /// synchronize(). For tests that need to see work still pending.
    void pause() {
        if (stream_) stream_->pause();
    }
    void resume() {
        if (stream_) stream_->resume();
    }

    /// What ran on this stream (see test_counters).
    [[nodiscard]] const test_counters& counters() const noexcept {
        static const test_counters none; // a moved-from backend ran nothing
        return stream_ ? stream_->counters : none;
    }
    void reset_counters() noexcept {
        if (stream_) stream_->counters.reset();
    }
    /// The graph nodes this stream computed, in order, since it was made or the last
    /// clear_computed_nodes() (only with test_device_params::record_nodes; else empty).
    [[nodiscard]] std::vector<const tensor*> computed_nodes() const {
        return stream_ ? stream_->computed_nodes() : std::vector<const tensor*>{};
    }
    void clear_computed_nodes() {
        if (stream_) stream_->clear_log();
    }
    [[nodiscard]] std::uint64_t n_computes() const noexcept { return counters().n_computes(); }
    [[nodiscard]] std::uint64_t n_nodes_computed() const noexcept { return counters().n_nodes_computed(); }
    [[nodiscard]] std::uint64_t bytes_set() const noexcept { return counters().bytes_set(); }
    [[nodiscard]] std::uint64_t bytes_get() const noexcept { return counters().bytes_get(); }
    [[nodiscard]] std::uint64_t bytes_copied() const noexcept { return counters().bytes_copied(); }
    [[nodiscard]] std::uint64_t n_copy_async_refused() const noexcept { return counters().n_copy_async_refused(); }

private:
    [[nodiscard]] std::string prefix() const { return detail::device_prefix(name()); }
    static status moved_from() { return {errc::invalid_argument, "test backend: used after being moved from"}; }

    /// Checks every node of g that computes and captures its operands (see the file
    /// comment); not_supported / invalid_argument / out_of_range name the first bad one.
    static status capture_graph(const test_device& dev, graph_view g, std::vector<detail::node_launch>& launches) {
        const auto prefix = [&] { return detail::device_prefix(dev.name()); };
        try {
            launches.reserve(g.size());
            for (tensor* node : g) {
                if (node == nullptr) return {errc::invalid_argument, prefix() + "a graph node is null"};
                if (node->op == op_kind::none || is_view_op(node->op)) continue;
                if (!dev.supports_op(*node))
                    return {errc::not_supported, prefix() + "node " + backplane::detail::describe(node) + " (op " +
                                                     std::string(to_string(node->op)) + ") is not supported"};
                detail::node_launch& l = launches.emplace_back();
                l.origin = node;
                if (status s = capture(dev, *node, *node, "output", l.dst); !s) return s;
                for (std::size_t i = 0; i < max_srcs; ++i) {
                    const tensor* src = node->src[i];
                    if (src == nullptr) continue;
                    if (status s = capture(dev, *src, *node, "source", l.src[i]); !s) return s;
                    l.has_src[i] = true;
                }
            }
        } catch (const std::bad_alloc&) {
            return {errc::alloc_failed, prefix() + "out of host memory capturing a graph"};
        }
        return {};
    }

    /// t lies in a buffer of this device's type, inside it: its launch operand.
    static status capture(const test_device& dev, const tensor& t, const tensor& node, const char* role,
                          detail::launch_operand& out) {
        const auto where = [&] {
            return detail::device_prefix(dev.name()) + role + " " + backplane::detail::describe(&t) + " of node " +
                   backplane::detail::describe(&node) + " (" + std::string(to_string(node.op)) + ")";
        };
        if (t.data == nullptr) return {errc::invalid_argument, where() + " has no data; allocate it first"};
        if (t.buffer == nullptr || !(t.buffer->type() == buffer_type_ref(dev.buffer_type())))
            return {errc::invalid_argument,
                    where() + " lives in " +
                        (t.buffer == nullptr ? std::string("host memory (no buffer)")
                                             : "a buffer of type '" + std::string(t.buffer->type().name()) + "'") +
                        ", not in this device's memory"};
        if (!t.buffer->contains(t.data, t.nbytes())) return {errc::out_of_range, where() + " reaches outside its buffer"};
        out.meta = t;
        out.at = test_buffer::of(t)->storage_of(t);
        return {};
    }

    status check_transfer(const char* what, const tensor& t, std::size_t offset, std::size_t size) const {
        if (t.data == nullptr)
            return {errc::invalid_argument, prefix() + what + ": tensor '" + t.name + "' has no data"};
        if (t.buffer == nullptr || !(t.buffer->type() == buffer_type_ref(dev_->buffer_type())))
            return {errc::invalid_argument,
                    prefix() + what + ": tensor '" + t.name + "' does not live in this device's memory"};
        const std::size_t n = t.nbytes();
        if (offset > n || size > n - offset)
            return {errc::out_of_range, prefix() + what + ": bytes [" + std::to_string(offset) + ", " +
                                            std::to_string(offset + size) + ") outside tensor '" + t.name + "' of " +
                                            std::to_string(n) + " bytes"};
        if (!t.buffer->contains(static_cast<const std::byte*>(t.data) + offset, size))
            return {errc::out_of_range, prefix() + what + ": tensor '" + t.name + "' lies outside its buffer"};
        return {};
    }

    const test_device* dev_;
    std::unique_ptr<detail::test_stream> stream_;
};

inline test_backend test_device::make_backend() const { return test_backend(*this); }

inline std::string_view test_buffer_type::device_name() const noexcept { return dev_->name(); }

static_assert(backplane::device<test_device>);
static_assert(backplane::offload_device<test_device>);
static_assert(!backplane::host_buffer_device<test_device>);
static_assert(backplane::backend<test_backend>);
static_assert(backplane::async_backend<test_backend>);
static_assert(backplane::event_backend<test_backend>);
static_assert(backplane::offload_backend<test_backend>);
static_assert(!backplane::host_backend<test_backend>);
static_assert(!backplane::plan_backend<test_backend>);

// ---------------------------------------------------------------------------------------
// capability masking

/// Owns a backend and shows only the required `backend` members: no async transfers,
/// events, offload or plans. For testing a scheduler's compile-time fallbacks
/// (`if constexpr (async_backend<B>)` ... else ...) with the same device underneath.
template <backplane::backend B>
class plain_backend {
public:
    explicit plain_backend(B inner) : inner_(std::move(inner)) {}

    [[nodiscard]] std::string_view name() const { return inner_.name(); }
    [[nodiscard]] decltype(auto) device() const { return inner_.device(); }
    [[nodiscard]] decltype(auto) buffer_type() { return inner_.buffer_type(); }
    [[nodiscard]] bool supports_op(const tensor& t) const { return inner_.supports_op(t); }
    [[nodiscard]] bool supports_buffer_type(const buffer_type_ref& bt) const { return inner_.supports_buffer_type(bt); }
    status compute(graph_view g) { return inner_.compute(g); }
    status synchronize() { return inner_.synchronize(); }

    [[nodiscard]] B& inner() noexcept { return inner_; }
    [[nodiscard]] const B& inner() const noexcept { return inner_; }

private:
    B inner_;
};

static_assert(backplane::backend<plain_backend<test_backend>>);
static_assert(!backplane::async_backend<plain_backend<test_backend>>);
static_assert(!backplane::event_backend<plain_backend<test_backend>>);
static_assert(!backplane::offload_backend<plain_backend<test_backend>>);

} // namespace backplane::test
