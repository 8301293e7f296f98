#pragma once
// A stream of work on a CUDA device (host code only; any translation unit may include
// it). The kernels are reached through the kernel table (kernel_api.hpp) that
// backplane::cuda links.
//
// Graphs. compute(g) checks every node first (supported, its tensors in this device's
// memory), sizes the stream's scratch memory for the largest need of any node, then
// queues the nodes' kernels on the stream and returns. With CUDA graphs on (the
// default), a graph is identified by its nodes' ops, types, shapes, strides, parameters
// and addresses: the second time the same graph comes (as each split of a scheduler does
// once per token), its launches are captured into a CUDA graph, which is replayed from
// then on with one launch. A few graphs are kept per stream, the least recently used goes
// first; a graph whose capture fails runs its kernels one by one from then on.
//
// Transfers. set_tensor_async copies the caller's bytes into pinned staging memory of
// the stream before it returns, then queues the upload; get_tensor_async queues the
// download straight into the caller's memory, which holds the bytes after synchronize();
// copy_tensor_async copies device-side, from this device's memory or from another CUDA
// device's (a peer copy, which the driver stages through the host when the devices
// cannot reach each other).
//
// Events are CUDA events: another stream waits for one on the device, whatever device it
// is on. Timing (set_timing) records a pair of timed events around each compute.
//
// Errors. A launch that fails names its node; a failure of the device (an illegal
// address, a lost device) shows in the next call that waits for the stream, as a
// device_error status. A get_rows or set_rows index out of range is never read or
// written through: the kernel raises
// the stream's error word (pinned host memory the device writes), and synchronize()
// reports it as errc::out_of_range naming the node (backends/detail/index_errors.hpp).
// Nothing throws and nothing aborts.

#include <backplane/backends/cuda/device.hpp>
#include <backplane/backends/detail/index_errors.hpp>
#include <backplane/backends/cuda/kernel_api.hpp>
#include <backplane/backends/cuda/memory.hpp>
#include <backplane/backends/cuda/runtime.hpp>
#include <backplane/core/concepts.hpp>
#include <backplane/core/detail/describe.hpp>
#include <backplane/core/graph.hpp>
#include <backplane/memory/tensor_io.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace backplane {

namespace cuda::detail {

/// A CUDA graph of one compute's launches, and the compute it was captured from.
struct graph_entry {
    std::vector<std::uint64_t> key; ///< the nodes (graph_key)
    cudaGraphExec_t exec = nullptr; ///< null until captured
    bool failed = false;            ///< its capture failed: launched node by node
    std::uint64_t last_used = 0;
};

/// Pinned host memory an upload reads, free again once its event is reached.
struct staging_slot {
    void* ptr = nullptr;
    std::size_t size = 0;
    cudaEvent_t done = nullptr; ///< recorded after the upload that last read it
};

/// The words identifying a compute: per node its op, types, shapes, strides, parameters
/// and the addresses of its tensors. Equal words: the same launches.
inline void graph_key(const std::vector<const tensor*>& nodes, std::vector<std::uint64_t>& key) {
    key.clear();
    const auto put_tensor = [&](const tensor& t) {
        key.push_back(static_cast<std::uint64_t>(t.type) | static_cast<std::uint64_t>(t.op) << 8);
        key.push_back(reinterpret_cast<std::uintptr_t>(t.data));
        for (std::size_t i = 0; i < max_dims; ++i) {
            key.push_back(static_cast<std::uint64_t>(t.ne[i]));
            key.push_back(static_cast<std::uint64_t>(t.nb[i]));
        }
    };
    for (const tensor* n : nodes) {
        put_tensor(*n);
        for (std::size_t i = 0; i < max_op_params; i += 2)
            key.push_back(static_cast<std::uint32_t>(n->op_params[i]) |
                          static_cast<std::uint64_t>(static_cast<std::uint32_t>(n->op_params[i + 1])) << 32);
        for (const tensor* s : n->src) {
            if (s == nullptr) {
                key.push_back(~std::uint64_t{0});
                continue;
            }
            put_tensor(*s);
        }
    }
}

struct stream_state {
    int device = 0;
    int cc = 0, sm_count = 0;
    cudaStream_t stream = nullptr;
    const kernel_table* kernels = nullptr;
    void* cublas = nullptr;
    void* cublas_workspace = nullptr;
    void* scratch = nullptr;
    std::size_t scratch_size = 0;
    bool use_graphs = true;

    static constexpr std::size_t graph_cache_size = 16;
    std::vector<graph_entry> graphs;
    std::uint64_t tick = 0;
    std::vector<std::uint64_t> key;      // reused between computes
    std::vector<const tensor*> nodes;    // reused between computes

    std::vector<staging_slot> staging;

    // index errors: a word of pinned, mapped host memory that kernels raise (its device
    // address goes to every launch), and the queued nodes that may raise it
    std::uint32_t* error_word = nullptr;
    std::uint32_t* error_word_device = nullptr;
    backplane::detail::index_checks checks;

    // timing: `origin` is recorded when timing is turned on; spans are measured from it
    bool timing = false;
    cudaEvent_t origin = nullptr, start = nullptr, end = nullptr;
    bool timed_latest = false;
    std::optional<device_span> span;

    // counters (stats())
    std::uint64_t n_computes = 0, n_launches = 0, n_captures = 0, n_replays = 0, n_capture_failures = 0;

    stream_state() = default;
    stream_state(const stream_state&) = delete;
    stream_state& operator=(const stream_state&) = delete;

    ~stream_state() {
        // waits for the stream's work, then frees everything (errors cannot be reported)
        (void)cudaSetDevice(device);
        if (stream != nullptr) (void)cudaStreamSynchronize(stream);
        drop_graphs();
        if (cublas != nullptr && kernels != nullptr) kernels->cublas_destroy(cublas);
        if (cublas_workspace != nullptr) (void)cudaFree(cublas_workspace);
        if (scratch != nullptr) (void)cudaFree(scratch);
        for (auto& s : staging) {
            if (s.done != nullptr) (void)cudaEventDestroy(s.done);
            if (s.ptr != nullptr) (void)cudaFreeHost(s.ptr);
        }
        for (cudaEvent_t e : {origin, start, end})
            if (e != nullptr) (void)cudaEventDestroy(e);
        if (error_word != nullptr) (void)cudaFreeHost(error_word);
        if (stream != nullptr) (void)cudaStreamDestroy(stream);
        (void)cudaGetLastError();
    }

    void drop_graphs() noexcept {
        for (auto& g : graphs)
            if (g.exec != nullptr) (void)cudaGraphExecDestroy(g.exec);
        graphs.clear();
    }

    [[nodiscard]] launch_context context() const noexcept {
        launch_context c;
        c.stream = stream;
        c.device = device;
        c.cc = cc;
        c.sm_count = sm_count;
        c.cublas = cublas;
        c.scratch = scratch;
        c.scratch_size = scratch_size;
        c.error_word = error_word_device;
        return c;
    }

    /// Makes the error word (stream creation; the device is current).
    status make_error_word() {
        void* p = nullptr;
        if (const cudaError_t e = cudaHostAlloc(&p, sizeof(std::uint32_t), cudaHostAllocMapped); e != cudaSuccess) {
            (void)cudaGetLastError();
            return fail("allocating the error word", e);
        }
        error_word = static_cast<std::uint32_t*>(p);
        *error_word = 0;
        void* d = nullptr;
        if (auto s = check("mapping the error word", cudaHostGetDevicePointer(&d, p, 0)); !s) return s;
        error_word_device = static_cast<std::uint32_t*>(d);
        return {};
    }

    /// Whether a kernel raised the error word since the last call (the stream is
    /// synchronized); lowers it.
    bool take_error_word() noexcept {
        volatile std::uint32_t* w = error_word; // written by the device
        const bool raised = *w != 0;
        *w = 0;
        return raised;
    }

    /// At least `bytes` of scratch memory. Growing waits for the stream (its kernels may
    /// still use the old memory) and forgets the captured graphs (they hold its address).
    status reserve_scratch(std::size_t bytes) {
        if (bytes <= scratch_size) return {};
        const std::size_t want = std::max(bytes + bytes / 4, scratch_size * 2);
        if (auto s = check("waiting for the stream", cudaStreamSynchronize(stream)); !s) return s;
        drop_graphs();
        if (scratch != nullptr) (void)cudaFree(scratch);
        scratch = nullptr;
        scratch_size = 0;
        if (const cudaError_t e = cudaMalloc(&scratch, want); e != cudaSuccess) {
            (void)cudaGetLastError();
            scratch = nullptr;
            return fail("allocating " + std::to_string(want) + " bytes of scratch memory", e);
        }
        scratch_size = want;
        return {};
    }

    /// Pinned staging memory of at least `size` bytes whose last upload is done.
    result<staging_slot*> staging_for(std::size_t size) {
        staging_slot* best = nullptr;
        for (auto& s : staging) {
            if (s.size < size) continue;
            if (cudaEventQuery(s.done) != cudaSuccess) {
                (void)cudaGetLastError(); // cudaErrorNotReady is not an error
                continue;
            }
            if (best == nullptr || s.size < best->size) best = &s;
        }
        if (best != nullptr) return best;
        // free slots too small to keep, then make one
        for (auto& s : staging)
            if (s.size < size && cudaEventQuery(s.done) == cudaSuccess) {
                (void)cudaEventDestroy(s.done);
                (void)cudaFreeHost(s.ptr);
                s = {};
            }
        (void)cudaGetLastError();
        std::erase_if(staging, [](const staging_slot& s) { return s.ptr == nullptr; });
        staging_slot slot;
        slot.size = std::max<std::size_t>(std::bit_ceil(size), std::size_t{1} << 16);
        if (const cudaError_t e = cudaMallocHost(&slot.ptr, slot.size); e != cudaSuccess) {
            (void)cudaGetLastError();
            return fail("allocating " + std::to_string(slot.size) + " bytes of pinned staging memory", e);
        }
        if (const cudaError_t e = cudaEventCreateWithFlags(&slot.done, cudaEventDisableTiming); e != cudaSuccess) {
            (void)cudaFreeHost(slot.ptr);
            return fail("making an event", e);
        }
        return &staging.emplace_back(slot);
    }

    /// The kept graph for `key`, or a new entry for it (the least recently used one's
    /// place when the cache is full).
    graph_entry& entry_for(const std::vector<std::uint64_t>& k, bool& fresh) {
        fresh = false;
        for (auto& g : graphs)
            if (g.key == k) return g;
        fresh = true;
        if (graphs.size() < graph_cache_size) {
            auto& g = graphs.emplace_back();
            g.key = k;
            return g;
        }
        graph_entry* lru = &graphs.front();
        for (auto& g : graphs)
            if (g.last_used < lru->last_used) lru = &g;
        if (lru->exec != nullptr) (void)cudaGraphExecDestroy(lru->exec); // the stream keeps a launched graph alive
        *lru = {};
        lru->key = k;
        return *lru;
    }
};

} // namespace cuda::detail

/// A point on a CUDA stream (cuda_backend::record); models backplane::event. An event
/// never recorded is already reached.
class cuda_event {
public:
    cuda_event() = default;
    cuda_event(cuda_event&& o) noexcept : ev_(std::exchange(o.ev_, nullptr)), device_(o.device_), recorded_(o.recorded_) {}
    cuda_event& operator=(cuda_event&& o) noexcept {
        if (this != &o) {
            release();
            ev_ = std::exchange(o.ev_, nullptr);
            device_ = o.device_;
            recorded_ = o.recorded_;
        }
        return *this;
    }
    cuda_event(const cuda_event&) = delete;
    cuda_event& operator=(const cuda_event&) = delete;
    ~cuda_event() { release(); }

    /// Blocks until the work recorded before this point is done.
    status synchronize() {
        if (ev_ == nullptr || !recorded_) return {};
        return cuda::detail::check("event synchronize", cudaEventSynchronize(ev_));
    }

    [[nodiscard]] cudaEvent_t native() const noexcept { return ev_; }

private:
    friend class cuda_backend;
    void release() noexcept {
        if (ev_ == nullptr) return;
        (void)cudaEventDestroy(ev_);
        ev_ = nullptr;
    }
    cudaEvent_t ev_ = nullptr;
    int device_ = 0;
    bool recorded_ = false;
};
static_assert(event<cuda_event>);

/// What a stream has done, for tests and tuning.
struct cuda_stream_stats {
    std::uint64_t computes = 0;         ///< compute() calls that queued work
    std::uint64_t launches = 0;         ///< nodes launched one by one (not from a graph)
    std::uint64_t captures = 0;         ///< CUDA graphs captured
    std::uint64_t replays = 0;          ///< computes that replayed a captured graph
    std::uint64_t capture_failures = 0; ///< captures that failed (those graphs run node by node)
};

/// A stream on a CUDA device. Models backplane::backend, async_backend, event_backend,
/// timed_backend and offload_backend. Movable; a moved-from backend reports
/// invalid_argument.
class cuda_backend {
public:
    using event_t = cuda_event;

    cuda_backend(cuda_backend&&) noexcept = default;
    cuda_backend& operator=(cuda_backend&&) noexcept = default;
    cuda_backend(const cuda_backend&) = delete;
    cuda_backend& operator=(const cuda_backend&) = delete;
    ~cuda_backend() = default; // waits for the stream's work

    /// A new stream on dev (with a cuBLAS handle when asked and built in).
    [[nodiscard]] static result<cuda_backend> make(const cuda_device& dev, const cuda_backend_params& params = {}) {
        const auto& table = cuda::detail::kernel_table_instance();
        if (table.version != cuda::detail::kernel_api_version)
            return status(errc::not_supported, "cuda backend: the linked kernels speak kernel API version " +
                                                   std::to_string(table.version) + ", this header " +
                                                   std::to_string(cuda::detail::kernel_api_version) +
                                                   " (rebuild the kernel library with these headers)");
        auto s = std::make_shared<cuda::detail::stream_state>();
        s->device = dev.index();
        s->cc = dev.properties().cc_major * 10 + dev.properties().cc_minor;
        s->sm_count = dev.properties().multiprocessors;
        s->kernels = &table;
        s->use_graphs = params.cuda_graphs;
        const std::string what = "making a stream on device " + std::to_string(s->device);
        if (auto st = cuda::detail::check(what, cudaSetDevice(s->device)); !st) return st;
        if (auto st = cuda::detail::check(what, cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking)); !st)
            return st;
        if (auto st = s->make_error_word(); !st) return st;
        if (params.cublas && table.with_cublas) {
            if (auto st = cuda::detail::check("allocating the cuBLAS workspace",
                                              cudaMalloc(&s->cublas_workspace, cublas_workspace_size));
                !st) {
                (void)cudaGetLastError();
                return st;
            }
            if (const cudaError_t e =
                    table.cublas_create(&s->cublas, s->stream, s->cublas_workspace, cublas_workspace_size);
                e != cudaSuccess) {
                s->cublas = nullptr;
                return cuda::detail::fail("making a cuBLAS handle", e);
            }
        }
        return cuda_backend(dev, std::move(s));
    }

    /// cuBLAS's workspace per stream: what it wants for Hopper's kernels.
    static constexpr std::size_t cublas_workspace_size = std::size_t{32} << 20;

    [[nodiscard]] std::string_view name() const noexcept { return dev_.name(); }
    [[nodiscard]] const cuda_device& device() const noexcept { return dev_; }
    [[nodiscard]] const cuda_buffer_type& buffer_type() const noexcept { return dev_.buffer_type(); }
    [[nodiscard]] bool supports_op(const tensor& t) const noexcept { return dev_.supports_op(t); }
    [[nodiscard]] bool supports_defined_op(const tensor& t) const noexcept { return cuda::supports_defined_op(t); }
    [[nodiscard]] bool supports_buffer_type(const buffer_type_ref& bt) const noexcept {
        return dev_.supports_buffer_type(bt);
    }
    [[nodiscard]] bool offload_op(const tensor& t) const noexcept { return dev_.offload_op(t); }
    /// Whether mul_mat goes through cuBLAS on this stream.
    [[nodiscard]] bool uses_cublas() const noexcept { return s_ && s_->cublas != nullptr; }
    [[nodiscard]] bool uses_cuda_graphs() const noexcept { return s_ && s_->use_graphs; }
    [[nodiscard]] cudaStream_t native_stream() const noexcept { return s_ ? s_->stream : nullptr; }

    /// Queues g's nodes (see the file comment); returns once queued. not_supported /
    /// invalid_argument name the first node it cannot run (then nothing is queued).
    status compute(graph_view g) {
        if (!s_) return moved_from();
        auto& st = *s_;
        st.timed_latest = false;
        st.span.reset();
        std::vector<const tensor*>& nodes = st.nodes; // kept between computes: no allocation per compute
        nodes.clear();
        for (tensor* node : g) {
            if (node == nullptr) return {errc::invalid_argument, prefix() + "a graph node is null"};
            if (node->op == op_kind::none || is_view_op(node->op)) continue;
            if (!supports_op(*node))
                return {errc::not_supported, prefix() + "node " + backplane::detail::describe(node) + " (op " +
                                                 std::string(to_string(node->op)) + ", " +
                                                 std::string(to_string(node->type)) + ") is not supported"};
            if (status s = check_memory(*node, *node); !s) return s;
            for (const tensor* src : node->src)
                if (src != nullptr)
                    if (status s = check_memory(*src, *node); !s) return s;
            nodes.push_back(node);
        }
        if (nodes.empty()) return {};
        if (status s = select(); !s) return s;

        const auto& k = *st.kernels;
        std::size_t need = 0;
        {
            const auto ctx = st.context();
            for (const tensor* n : nodes) need = std::max(need, k.scratch_bytes(*n, ctx));
        }
        if (status s = st.reserve_scratch(need); !s) return with_prefix(s);

        if (st.timing) {
            if (status s = cuda::detail::check("timing", cudaEventRecord(st.start, st.stream)); !s) return with_prefix(s);
        }
        status result = st.use_graphs ? run_graph(nodes) : launch_all(nodes);
        if (!result) return result;
        if (st.timing) {
            if (status s = cuda::detail::check("timing", cudaEventRecord(st.end, st.stream)); !s) return with_prefix(s);
            st.timed_latest = true;
        }
        for (const tensor* n : nodes) st.checks.note(*n);
        ++st.n_computes;
        return {};
    }

    /// Waits until everything queued on this stream is done. errc::out_of_range when a
    /// get_rows or set_rows node queued since the last synchronize met an index beyond
    /// the rows it indexes (see the file comment).
    status synchronize() {
        if (!s_) return moved_from();
        if (status s = select(); !s) return s;
        if (status s = cuda::detail::check("synchronize", cudaStreamSynchronize(s_->stream)); !s) return with_prefix(s);
        return s_->checks.take(s_->take_error_word(), prefix());
    }

    /// Queues a copy of `size` host bytes into t at `offset`; `src` is read before the
    /// call returns (through pinned staging memory).
    status set_tensor_async(tensor& t, const void* src, std::size_t offset, std::size_t size) {
        if (!s_) return moved_from();
        if (status s = check_transfer(t, offset, size, "set_tensor_async"); !s || size == 0) return s;
        if (status s = select(); !s) return s;
        auto slot = s_->staging_for(size);
        if (!slot) return with_prefix(slot.error());
        std::memcpy((*slot)->ptr, src, size);
        if (status s = cuda::detail::check("set_tensor_async",
                                           cudaMemcpyAsync(static_cast<std::byte*>(t.data) + offset, (*slot)->ptr,
                                                           size, cudaMemcpyHostToDevice, s_->stream));
            !s)
            return with_prefix(s);
        return with_prefix(cuda::detail::check("set_tensor_async", cudaEventRecord((*slot)->done, s_->stream)));
    }

    /// Queues a copy of t's bytes [offset, offset + size) into `dst`, which holds them
    /// after synchronize().
    status get_tensor_async(const tensor& t, void* dst, std::size_t offset, std::size_t size) {
        if (!s_) return moved_from();
        if (status s = check_transfer(t, offset, size, "get_tensor_async"); !s || size == 0) return s;
        if (status s = select(); !s) return s;
        return with_prefix(cuda::detail::check(
            "get_tensor_async", cudaMemcpyAsync(dst, static_cast<const std::byte*>(t.data) + offset, size,
                                                cudaMemcpyDeviceToHost, s_->stream)));
    }

    /// Queues dst = src when dst is in this device's memory and src in any CUDA device's
    /// (a peer copy from another device), both contiguous, of one type and size; false
    /// otherwise (the caller copies another way).
    bool copy_tensor_async(const tensor& src, tensor& dst) {
        if (!s_ || src.type != dst.type || src.nbytes() != dst.nbytes() || !src.is_contiguous() ||
            !dst.is_contiguous() || src.data == nullptr || mine(dst) == nullptr)
            return false;
        const cuda_buffer* from = src.buffer != nullptr ? src.buffer->get_if<cuda_buffer>() : nullptr;
        if (from == nullptr) return false;
        const std::size_t n = src.nbytes();
        if (n == 0) return true;
        if (!select()) return false;
        const cudaError_t e = from->device() == s_->device
                                  ? cudaMemcpyAsync(dst.data, src.data, n, cudaMemcpyDeviceToDevice, s_->stream)
                                  : cudaMemcpyPeerAsync(dst.data, s_->device, src.data, from->device(), n, s_->stream);
        if (e != cudaSuccess) {
            (void)cudaGetLastError();
            return false;
        }
        return true;
    }

    /// An event of this stream's device.
    [[nodiscard]] result<cuda_event> make_event() {
        if (!s_) return moved_from();
        if (status s = select(); !s) return s;
        cuda_event e;
        if (status s = cuda::detail::check("making an event", cudaEventCreateWithFlags(&e.ev_, cudaEventDisableTiming));
            !s)
            return with_prefix(s);
        e.device_ = s_->device;
        return result<cuda_event>(std::move(e));
    }

    /// Marks the current end of the stream.
    status record(cuda_event& e) {
        if (!s_) return moved_from();
        if (e.ev_ == nullptr) return {errc::invalid_argument, prefix() + "record: an event not made by make_event()"};
        if (e.device_ != s_->device)
            return {errc::invalid_argument, prefix() + "record: the event belongs to device " + std::to_string(e.device_)};
        if (status s = select(); !s) return s;
        if (status s = cuda::detail::check("record", cudaEventRecord(e.ev_, s_->stream)); !s) return with_prefix(s);
        e.recorded_ = true;
        return {};
    }

    /// Makes the work queued after this call wait for e, on the device (e may belong to
    /// a stream of any CUDA device).
    status wait(cuda_event& e) {
        if (!s_) return moved_from();
        if (e.ev_ == nullptr || !e.recorded_) return {};
        if (status s = select(); !s) return s;
        return with_prefix(cuda::detail::check("wait", cudaStreamWaitEvent(s_->stream, e.ev_, 0)));
    }

    /// Times each following compute() on the device with a pair of CUDA events, or
    /// stops. Turning it on forgets earlier spans; spans count from when it was turned on.
    void set_timing(bool on) noexcept {
        if (!s_ || on == s_->timing) return;
        auto& st = *s_;
        st.timed_latest = false;
        st.span.reset();
        if (!on) {
            st.timing = false;
            return;
        }
        if (!select()) return;
        for (cudaEvent_t* e : {&st.origin, &st.start, &st.end})
            if (*e == nullptr && cudaEventCreate(e) != cudaSuccess) {
                (void)cudaGetLastError();
                *e = nullptr;
                return; // computes stay untimed
            }
        if (cudaEventRecord(st.origin, st.stream) != cudaSuccess) {
            (void)cudaGetLastError();
            return;
        }
        st.timing = true;
    }

    /// When the latest compute() ran on the device, in nanoseconds since timing was
    /// turned on, once it is done; nothing when timing is off, the compute queued nothing
    /// or it is not done.
    [[nodiscard]] std::optional<device_span> last_compute_time() const noexcept {
        if (!s_ || !s_->timing || !s_->timed_latest) return std::nullopt;
        auto& st = *s_;
        if (st.span) return st.span;
        if (cudaEventQuery(st.end) != cudaSuccess) {
            (void)cudaGetLastError();
            return std::nullopt;
        }
        float a = 0, b = 0;
        if (cudaEventElapsedTime(&a, st.origin, st.start) != cudaSuccess ||
            cudaEventElapsedTime(&b, st.origin, st.end) != cudaSuccess) {
            (void)cudaGetLastError();
            return std::nullopt;
        }
        const auto ns = [](float ms) { return static_cast<std::uint64_t>(static_cast<double>(ms) * 1e6); };
        st.span = device_span{ns(a), std::max(ns(a), ns(b))};
        return st.span;
    }

    [[nodiscard]] cuda_stream_stats stats() const noexcept {
        if (!s_) return {};
        return {s_->n_computes, s_->n_launches, s_->n_captures, s_->n_replays, s_->n_capture_failures};
    }

private:
    cuda_backend(const cuda_device& dev, std::shared_ptr<cuda::detail::stream_state> s) : dev_(dev), s_(std::move(s)) {}

    [[nodiscard]] std::string prefix() const { return "cuda backend '" + std::string(dev_.name()) + "': "; }
    [[nodiscard]] status with_prefix(status s) const {
        if (s) return s;
        return {s.code(), prefix() + std::string(s.message()), s.native()};
    }
    static status moved_from() { return {errc::invalid_argument, "cuda backend: used after being moved from"}; }

    /// Makes this stream's device the calling thread's current one.
    status select() const {
        return with_prefix(cuda::detail::check("selecting the device", cudaSetDevice(s_->device)));
    }

    /// t's buffer when t is memory of this backend's device.
    [[nodiscard]] const cuda_buffer* mine(const tensor& t) const noexcept {
        const cuda_buffer* b = t.buffer != nullptr ? t.buffer->get_if<cuda_buffer>() : nullptr;
        return b != nullptr && b->device() == s_->device && t.data != nullptr ? b : nullptr;
    }

    status check_memory(const tensor& t, const tensor& node) const {
        if (mine(t) != nullptr) return {};
        return {errc::invalid_argument, prefix() + "tensor " + backplane::detail::describe(&t) + " of node " +
                                            backplane::detail::describe(&node) + " is not in this device's memory"};
    }

    status check_transfer(const tensor& t, std::size_t offset, std::size_t size, const char* what) const {
        if (mine(t) == nullptr)
            return {errc::invalid_argument, prefix() + what + ": tensor " + backplane::detail::describe(&t) +
                                                " is not in this device's memory"};
        return with_prefix(backplane::detail::host_range_check(what, t, offset, size));
    }

    /// Launches every node's kernels on the stream.
    status launch_all(const std::vector<const tensor*>& nodes) {
        auto& st = *s_;
        const auto ctx = st.context();
        for (const tensor* n : nodes) {
            if (const cudaError_t e = st.kernels->launch(*n, ctx); e != cudaSuccess) {
                (void)cudaGetLastError();
                return with_prefix(cuda::detail::fail(
                    "launching node " + backplane::detail::describe(n) + " (op " + std::string(to_string(n->op)) + ")", e));
            }
        }
        st.n_launches += nodes.size();
        return {};
    }

    /// The graph's launches, from a kept CUDA graph when this graph came before (file
    /// comment).
    status run_graph(const std::vector<const tensor*>& nodes) {
        auto& st = *s_;
        cuda::detail::graph_key(nodes, st.key);
        bool fresh = false;
        auto& entry = st.entry_for(st.key, fresh);
        entry.last_used = ++st.tick;
        if (fresh || entry.failed) return launch_all(nodes); // first sight: not worth a capture yet
        if (entry.exec == nullptr) {
            if (!capture(nodes, entry)) return launch_all(nodes);
        } else {
            ++st.n_replays;
        }
        if (const cudaError_t e = cudaGraphLaunch(entry.exec, st.stream); e != cudaSuccess) {
            (void)cudaGetLastError();
            return with_prefix(cuda::detail::fail("launching a CUDA graph", e));
        }
        return {};
    }

    /// Captures the nodes' launches into entry.exec; false (entry marked failed, the
    /// stream usable) when the capture fails.
    bool capture(const std::vector<const tensor*>& nodes, cuda::detail::graph_entry& entry) {
        auto& st = *s_;
        const auto give_up = [&] {
            (void)cudaGetLastError();
            entry.failed = true;
            ++st.n_capture_failures;
            return false;
        };
        if (cudaStreamBeginCapture(st.stream, cudaStreamCaptureModeThreadLocal) != cudaSuccess) return give_up();
        const auto ctx = st.context();
        cudaError_t launch_error = cudaSuccess;
        for (const tensor* n : nodes)
            if ((launch_error = st.kernels->launch(*n, ctx)) != cudaSuccess) break;
        cudaGraph_t g = nullptr;
        const cudaError_t end_error = cudaStreamEndCapture(st.stream, &g); // always ends the capture
        if (launch_error != cudaSuccess || end_error != cudaSuccess || g == nullptr) {
            if (g != nullptr) (void)cudaGraphDestroy(g);
            return give_up();
        }
        const cudaError_t inst = cudaGraphInstantiate(&entry.exec, g, 0);
        (void)cudaGraphDestroy(g);
        if (inst != cudaSuccess) {
            entry.exec = nullptr;
            return give_up();
        }
        ++st.n_captures;
        return true;
    }

    cuda_device dev_;
    std::shared_ptr<cuda::detail::stream_state> s_;
};
static_assert(backend<cuda_backend>);
static_assert(async_backend<cuda_backend>);
static_assert(event_backend<cuda_backend>);
static_assert(timed_backend<cuda_backend>);

inline result<cuda_backend> cuda_device::make_backend(const cuda_backend_params& params) const {
    return cuda_backend::make(*this, params);
}

inline std::vector<feature> cuda_device::features() const {
    const auto& p = info_->phys;
    return {{"compute_capability", std::to_string(p.cc_major) + "." + std::to_string(p.cc_minor)},
            {"multiprocessors", std::to_string(p.multiprocessors)},
            {"memory", std::to_string(p.total_memory)},
            {"pci_bus", std::to_string(p.pci_bus)},
            {"runtime", cuda::runtime_version()},
            {"driver", cuda::driver_version()},
            {"cublas", cuda::detail::kernel_table_instance().with_cublas ? "1" : "0"},
            {"cuda_graphs", "1"}};
}

} // namespace backplane
