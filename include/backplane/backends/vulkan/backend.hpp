#pragma once
// A stream of work on a Vulkan device, signalling one timeline semaphore.
//
// Graphs. compute(g) turns each node into a dispatch (ops.hpp), records them into a
// command buffer with a pipeline barrier only where a dispatch touches memory that an
// earlier one since the last barrier wrote (or writes memory one of them read), and
// submits it. The recording is kept: when the same dispatches (same shaders, shapes,
// memory) come again, as they do each time a scheduler runs a split, the command buffer
// is submitted again without recording anything. A few recordings are kept per stream,
// the least recently used goes first.
//
// Transfers. set/get/copy_tensor_async record copies through host-visible staging memory
// into a command buffer that is submitted before the next graph, event or synchronize;
// get_tensor_async's bytes reach the caller's memory in synchronize().
//
// Events are points on the stream's timeline semaphore: another stream of the same
// device waits for one on the device; a stream of another device, or the host, waits on
// the host.
//
// Timing. With set_timing(true), a compute's submission is [start stamp, the graph's
// command buffer, end stamp]: two small command buffers that write GPU timestamps into a
// query pair of the stream's ring (stream_timer), so the kept recordings stay as they
// are and one may be queued again while earlier runs are pending. A pair is reset and
// written only by its own two command buffers, and is taken again only once the
// submission that last used it is done: runs queued back to back never overwrite each
// other's stamps. With timing off, a compute submits the graph alone.

#include <backplane/backends/detail/index_errors.hpp>
#include <backplane/backends/vulkan/device.hpp>
#include <backplane/backends/vulkan/ops.hpp>
#include <backplane/backends/vulkan/ops/fused.hpp>
#include <backplane/backends/vulkan/spirv.hpp>
#include <backplane/core/detail/describe.hpp>

#include <algorithm>
#include <array>
#include <bit>
#include <chrono>
#include <cstring>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace backplane {

namespace vulkan::detail {

/// Bytes [begin, end) of one buffer, for dependency tracking.
struct mem_range {
    std::uint64_t buffer = 0;
    std::size_t begin = 0, end = 0;
    [[nodiscard]] bool overlaps(const mem_range& o) const noexcept {
        return buffer == o.buffer && begin < o.end && o.begin < end;
    }
};

/// One node's dispatch with its memory.
struct launch {
    const spirv::blob* shader = nullptr;
    push_constants pc;
    std::array<std::uint32_t, 3> groups{};
    // by launch slot (ops/common.hpp): sources 0 and 1, the destination, sources 2 to 6
    std::array<vk::DescriptorBufferInfo, launch_slots> bind;
    std::array<std::uint64_t, launch_slots> ids{};   // the bound buffers' ids
    std::array<mem_range, launch_slots - 1> reads; // the sources' bytes (empty when absent)
    mem_range write;
    elem_type grid = elem_type::f32; // whose lattice grid binding 9 holds (source 0's type)

    [[nodiscard]] bool same_work(const launch& o) const noexcept {
        return shader == o.shader && groups == o.groups && ids == o.ids && bind == o.bind &&
               std::memcmp(&pc, &o.pc, sizeof pc) == 0;
    }
};

/// A recorded graph: its dispatches, command buffer and descriptor sets.
struct recording {
    std::vector<launch> launches;
    vk::CommandBuffer cmd;
    vk::DescriptorPool pool;
    std::uint64_t done_at = 0;   // the timeline value of its last submission
    std::uint64_t last_used = 0; // for eviction
    std::size_t barriers = 0;    // between its dispatches
};

/// Host-visible memory that a queued transfer reads or writes.
struct staging_slot {
    vk::Buffer buf;
    vk::DeviceMemory mem;
    std::byte* ptr = nullptr;
    std::size_t size = 0;
    std::uint64_t done_at = 0; // free once the timeline reaches it; pending: UINT64_MAX
};

/// One query pair of a stream_timer: the command buffer that resets the pair and writes
/// the start stamp, the one that writes the end stamp, and the timeline value of the
/// submission that last used them (they are not reused before it is done).
struct timer_slot {
    vk::CommandBuffer start, end;
    std::uint64_t done_at = 0;
};

/// GPU timestamps of a stream's computes (the file comment): a query pool of `ring`
/// pairs, made when timing is first turned on, and the latest timed compute.
struct stream_timer {
    static constexpr std::uint32_t ring = 32; // pairs: computes in flight before one waits for a pair

    bool on = false;
    bool probed = false;     // whether the queue's timestamp support was looked up
    std::uint64_t mask = 0;  // the bits of a stamp that count (0: the queue cannot time)
    double period = 1.0;     // nanoseconds per tick
    vk::QueryPool pool;
    std::array<timer_slot, ring> slots{};
    std::uint32_t next = 0;

    // the latest compute while timing was on: its pair (none when it was not timed), the
    // timeline value of its submission, and its span once read
    std::optional<std::uint32_t> latest;
    std::uint64_t latest_at = 0;
    std::optional<device_span> span;

    [[nodiscard]] bool can_time() const noexcept { return mask != 0; }

    /// Device nanoseconds of a [start, end] pair of raw stamps. A counter narrower than 64
    /// bits may wrap between the two: the span's length is taken modulo its width.
    [[nodiscard]] device_span to_span(std::uint64_t start, std::uint64_t end) const noexcept {
        const auto ns = [&](std::uint64_t ticks) {
            return period == 1.0 ? ticks
                                 : static_cast<std::uint64_t>(static_cast<long double>(ticks) *
                                                              static_cast<long double>(period));
        };
        start &= mask;
        const std::uint64_t start_ns = ns(start);
        return {start_ns, start_ns + ns((end - start) & mask)};
    }
};

/// A device-to-host copy finished in synchronize().
struct deferred_read {
    const std::byte* from;
    std::byte* to;
    std::size_t size;
};

struct stream_state {
    std::shared_ptr<device_state> dev;
    vk::CommandPool pool;
    vk::Semaphore timeline;
    std::uint64_t submitted = 0; // the semaphore's value once everything queued is done
    std::uint64_t tick = 0;

    std::vector<recording> cache;
    static constexpr std::size_t cache_size = 16;

    // transfers being recorded, and those submitted (reusable once done)
    vk::CommandBuffer xfer;
    std::vector<std::pair<vk::CommandBuffer, std::uint64_t>> xfer_done;
    std::vector<staging_slot> staging;
    std::vector<deferred_read> reads;
    // semaphores the next submission waits for (events of other streams of this device)
    std::vector<std::pair<vk::Semaphore, std::uint64_t>> waits;

    // the memory that queued work reads or writes, kept alive until the work is done
    // (buffer_memory): that of the transfers being recorded, and that of each submission
    // (until the timeline reaches its value)
    using memory_list = std::vector<std::shared_ptr<buffer_memory>>;
    memory_list xfer_memory;
    std::vector<std::pair<std::uint64_t, memory_list>> kept;

    // index errors (backends/detail/index_errors.hpp): a host-visible word that shaders
    // raise (binding 3 of every dispatch), and the queued nodes that may raise it
    vk::Buffer error_buf;
    vk::DeviceMemory error_mem;
    std::uint32_t* error_word = nullptr;

    // the lattice i-quants' grids (ops/common.hpp's lattice_grids: binding 9 of every
    // dispatch), written once
    vk::Buffer grid_buf;
    vk::DeviceMemory grid_mem;
    backplane::detail::index_checks checks;

    stream_timer timer;

    // counters (stats())
    std::uint64_t n_computes = 0, n_recorded = 0, n_dispatches = 0, n_barriers = 0, n_timed = 0;

    stream_state() = default;
    stream_state(const stream_state&) = delete;
    stream_state& operator=(const stream_state&) = delete;

    ~stream_state() {
        if (!dev || !dev->device) return;
        auto& d = dev->device;
        if (timeline) { // transfers recorded but never submitted are dropped with the pool
            if (submitted != 0) (void)d.waitSemaphores(vk::SemaphoreWaitInfo({}, timeline, submitted), UINT64_MAX);
            d.destroySemaphore(timeline);
        }
        if (timer.pool) d.destroyQueryPool(timer.pool);
        for (auto& r : cache)
            if (r.pool) d.destroyDescriptorPool(r.pool);
        for (auto& s : staging) free_slot(s);
        if (error_word != nullptr) d.unmapMemory(error_mem);
        if (error_buf) d.destroyBuffer(error_buf);
        if (error_mem) d.freeMemory(error_mem);
        if (grid_buf) d.destroyBuffer(grid_buf);
        if (grid_mem) d.freeMemory(grid_mem);
        if (pool) d.destroyCommandPool(pool); // frees every command buffer
    }

    /// Makes the error word (stream creation).
    void make_error_word() {
        dev->make_buffer(64, dev->host_type, error_buf, error_mem);
        error_word = static_cast<std::uint32_t*>(dev->device.mapMemory(error_mem, 0, VK_WHOLE_SIZE));
        *error_word = 0;
    }

    /// Makes the grid buffer (stream creation): host-visible memory, as the error word's.
    void make_grids() {
        using namespace vulkan::detail;
        dev->make_buffer(grid_buffer_bytes, dev->host_type, grid_buf, grid_mem);
        auto* p = static_cast<std::byte*>(dev->device.mapMemory(grid_mem, 0, VK_WHOLE_SIZE));
        for (std::size_t i = 0; i < n_lattice_grids; ++i)
            std::memcpy(p + grid_offset(i), lattice_grids[i].data, lattice_grids[i].bytes);
        dev->device.unmapMemory(grid_mem);
    }

    /// Adds m to `into` unless it is there.
    static void hold(memory_list& into, const std::shared_ptr<buffer_memory>& m) {
        for (const auto& x : into)
            if (x == m) return;
        into.push_back(m);
    }

    /// Keeps `memory` until the timeline reaches `value`, and lets go of what is done.
    void keep_until(std::uint64_t value, memory_list&& memory) {
        if (!kept.empty()) {
            const std::uint64_t done = completed();
            std::erase_if(kept, [&](const auto& k) { return k.first <= done; });
        }
        if (!memory.empty()) kept.emplace_back(value, std::move(memory));
    }

    void free_slot(staging_slot& s) noexcept {
        auto& d = dev->device;
        if (s.ptr != nullptr) d.unmapMemory(s.mem);
        if (s.buf) d.destroyBuffer(s.buf);
        if (s.mem) d.freeMemory(s.mem);
        s = {};
    }

    [[nodiscard]] std::uint64_t completed() const { return dev->device.getSemaphoreCounterValue(timeline); }

    static constexpr int spin_us = 100;

    void wait_for(std::uint64_t value) const {
        if (value == 0) return;
        // short work finishes within microseconds: poll briefly before sleeping in the
        // driver, which costs a thread wake-up on each side
        const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(spin_us);
        do {
            if (completed() >= value) return;
        } while (std::chrono::steady_clock::now() < until);
        const vk::Result r = dev->device.waitSemaphores(vk::SemaphoreWaitInfo({}, timeline, value), UINT64_MAX);
        if (r != vk::Result::eSuccess) throw vk::SystemError(vk::make_error_code(r), "waiting for the stream");
    }

    vk::CommandBuffer new_command_buffer() {
        return dev->device.allocateCommandBuffers(vk::CommandBufferAllocateInfo(pool, vk::CommandBufferLevel::ePrimary, 1))[0];
    }

    /// Submits cmds (in order) after everything queued before; returns the value it signals.
    std::uint64_t submit(vk::ArrayProxyNoTemporaries<const vk::CommandBuffer> cmds) {
        const std::uint64_t value = submitted + 1;
        std::vector<vk::Semaphore> wait_sems;
        std::vector<std::uint64_t> wait_values;
        std::vector<vk::PipelineStageFlags> wait_stages;
        for (const auto& [sem, v] : waits) {
            wait_sems.push_back(sem);
            wait_values.push_back(v);
            wait_stages.emplace_back(vk::PipelineStageFlagBits::eAllCommands);
        }
        vk::TimelineSemaphoreSubmitInfo ts(wait_values, value);
        vk::SubmitInfo si(wait_sems, wait_stages, cmds, timeline);
        si.pNext = &ts;
        {
            std::lock_guard lk(dev->queue_mutex);
            dev->queue.submit(si);
        }
        waits.clear();
        submitted = value;
        return value;
    }

    /// The transfer command buffer being recorded, begun when there is none.
    vk::CommandBuffer transfers() {
        if (xfer) return xfer;
        const std::uint64_t done = completed();
        for (std::size_t i = 0; i < xfer_done.size(); ++i)
            if (xfer_done[i].second <= done) {
                xfer = xfer_done[i].first;
                xfer_done.erase(xfer_done.begin() + static_cast<std::ptrdiff_t>(i));
                break;
            }
        if (!xfer) xfer = new_command_buffer();
        xfer.reset();
        xfer.begin(vk::CommandBufferBeginInfo(vk::CommandBufferUsageFlagBits::eOneTimeSubmit));
        // earlier work on the queue (shaders, transfers, host writes) before these copies
        const vk::MemoryBarrier in(vk::AccessFlagBits::eShaderWrite | vk::AccessFlagBits::eTransferWrite |
                                       vk::AccessFlagBits::eHostWrite,
                                   vk::AccessFlagBits::eTransferRead | vk::AccessFlagBits::eTransferWrite);
        xfer.pipelineBarrier(vk::PipelineStageFlagBits::eComputeShader | vk::PipelineStageFlagBits::eTransfer |
                                 vk::PipelineStageFlagBits::eHost,
                             vk::PipelineStageFlagBits::eTransfer, {}, in, {}, {});
        return xfer;
    }

    /// Submits the transfers recorded since the last flush.
    void flush() {
        if (!xfer) return;
        const vk::MemoryBarrier out(vk::AccessFlagBits::eTransferWrite,
                                    vk::AccessFlagBits::eHostRead | vk::AccessFlagBits::eShaderRead |
                                        vk::AccessFlagBits::eShaderWrite | vk::AccessFlagBits::eTransferRead);
        xfer.pipelineBarrier(vk::PipelineStageFlagBits::eTransfer,
                             vk::PipelineStageFlagBits::eHost | vk::PipelineStageFlagBits::eComputeShader |
                                 vk::PipelineStageFlagBits::eTransfer,
                             {}, out, {}, {});
        xfer.end();
        vk::CommandBuffer cmd = xfer;
        xfer = nullptr;
        const std::uint64_t value = submit(cmd);
        xfer_done.emplace_back(cmd, value);
        keep_until(value, std::exchange(xfer_memory, {}));
        for (auto& s : staging)
            if (s.done_at == UINT64_MAX) s.done_at = value;
    }

    /// Host-visible memory of at least `size` bytes for a transfer being recorded.
    staging_slot& staging_for(std::size_t size) {
        const std::uint64_t done = completed();
        staging_slot* best = nullptr;
        for (auto& s : staging)
            if (s.done_at <= done && s.size >= size && (best == nullptr || s.size < best->size)) best = &s;
        if (best == nullptr) {
            // drop free slots that are too small, then make one
            for (auto& s : staging)
                if (s.done_at <= done && s.size < size) free_slot(s);
            std::erase_if(staging, [](const staging_slot& s) { return !s.buf; });
            staging_slot s;
            s.size = std::max<std::size_t>(std::bit_ceil(size), std::size_t{1} << 16);
            dev->make_buffer(s.size, dev->host_type, s.buf, s.mem);
            s.ptr = static_cast<std::byte*>(dev->device.mapMemory(s.mem, 0, VK_WHOLE_SIZE));
            best = &staging.emplace_back(s);
        }
        best->done_at = UINT64_MAX;
        return *best;
    }

    /// Turns timing on or off. Turning it on forgets the span of any earlier compute and,
    /// the first time, looks up whether the queue can time and makes the query pool.
    void set_timing(bool on) {
        auto& t = timer;
        if (on == t.on) return;
        t.on = on;
        t.latest.reset();
        t.span.reset();
        if (!on || t.pool) return;
        if (!t.probed) {
            t.probed = true;
            const auto families = dev->physical.getQueueFamilyProperties();
            const std::uint32_t bits =
                dev->queue_family < families.size() ? families[dev->queue_family].timestampValidBits : 0;
            t.mask = bits >= 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << bits) - 1;
            t.period = dev->props.limits.timestampPeriod;
            if (!(t.period > 0.0)) t.mask = 0; // no usable clock
        }
        if (t.can_time())
            t.pool = dev->device.createQueryPool(vk::QueryPoolCreateInfo({}, vk::QueryType::eTimestamp, 2 * stream_timer::ring));
    }

    /// The next pair of the ring, once the submission that used it last is done; its two
    /// command buffers are recorded on first use and never change after.
    std::uint32_t take_timer_slot() {
        auto& t = timer;
        const std::uint32_t i = t.next;
        auto& slot = t.slots[i];
        wait_for(slot.done_at); // only when `ring` timed computes are already in flight
        if (!slot.start) {
            const auto cmds =
                dev->device.allocateCommandBuffers(vk::CommandBufferAllocateInfo(pool, vk::CommandBufferLevel::ePrimary, 2));
            try {
                // stamps at the bottom of the pipe: written once everything queued before
                // them is done, so the start is when the graph's work may begin (its
                // leading barrier waits for that same work) and the end when it is over
                cmds[0].begin(vk::CommandBufferBeginInfo());
                cmds[0].resetQueryPool(t.pool, 2 * i, 2);
                cmds[0].writeTimestamp(vk::PipelineStageFlagBits::eBottomOfPipe, t.pool, 2 * i);
                cmds[0].end();
                cmds[1].begin(vk::CommandBufferBeginInfo());
                cmds[1].writeTimestamp(vk::PipelineStageFlagBits::eBottomOfPipe, t.pool, 2 * i + 1);
                cmds[1].end();
            } catch (...) {
                dev->device.freeCommandBuffers(pool, cmds);
                throw;
            }
            slot.start = cmds[0];
            slot.end = cmds[1];
        }
        t.next = (i + 1) % stream_timer::ring;
        return i;
    }

    /// Submits a graph's command buffer, between the stamps of a pair of the ring when
    /// timing is on; returns the value it signals.
    std::uint64_t submit_compute(vk::CommandBuffer cmd) {
        auto& t = timer;
        if (!t.on || !t.pool) return submit(cmd); // off, or nothing to time with
        const std::uint32_t i = take_timer_slot();
        auto& slot = t.slots[i];
        const std::array<vk::CommandBuffer, 3> cmds{slot.start, cmd, slot.end};
        const std::uint64_t value = submit(cmds);
        slot.done_at = value;
        t.latest = i;
        t.latest_at = value;
        ++n_timed;
        return value;
    }

    /// The latest compute's span when timing is on and it is done (read once, then kept).
    [[nodiscard]] std::optional<device_span> last_compute_time() noexcept {
        auto& t = timer;
        if (!t.on || !t.latest) return std::nullopt;
        if (t.span) return t.span;
        try {
            if (completed() < t.latest_at) return std::nullopt; // not synchronized yet
        } catch (...) {
            return std::nullopt;
        }
        std::array<std::uint64_t, 2> stamps{};
        const vk::Result r = dev->device.getQueryPoolResults(t.pool, 2 * *t.latest, 2, sizeof stamps, stamps.data(),
                                                             sizeof(std::uint64_t), vk::QueryResultFlagBits::e64);
        if (r != vk::Result::eSuccess) return std::nullopt;
        t.span = t.to_span(stamps[0], stamps[1]);
        return t.span;
    }

    /// Waits for everything queued, then finishes the deferred reads and lets go of the
    /// memory the work kept. Returns whether a shader raised the error word (and lowers it).
    bool synchronize() {
        flush();
        wait_for(submitted);
        for (const auto& r : reads) std::memcpy(r.to, r.from, r.size);
        reads.clear();
        kept.clear();
        const bool raised = *error_word != 0;
        *error_word = 0;
        return raised;
    }
};

} // namespace vulkan::detail

class vulkan_backend;

/// A point on a Vulkan stream (vulkan_backend::record); models backplane::event. An event
/// never recorded is already reached.
class vulkan_event {
public:
    vulkan_event() = default;

    /// Blocks until the work recorded before this point is done.
    status synchronize() {
        if (!s_ || value_ == 0) return {};
        return vulkan::detail::guarded(s_->dev->prefix(), "event synchronize", [&]() -> status {
            s_->wait_for(value_);
            return {};
        });
    }

private:
    friend class vulkan_backend;
    std::shared_ptr<vulkan::detail::stream_state> s_;
    std::uint64_t value_ = 0;
};
static_assert(event<vulkan_event>);

/// What a stream has done, for tests and tuning.
struct vulkan_stream_stats {
    std::uint64_t computes = 0;   ///< compute() calls that queued work
    std::uint64_t recorded = 0;   ///< of which were recorded (the others reused a recording)
    std::uint64_t dispatches = 0; ///< dispatches recorded
    std::uint64_t barriers = 0;   ///< barriers recorded between dispatches
    std::uint64_t timed = 0;      ///< computes timed on the device (set_timing)
};

/// A stream on a Vulkan device. Models backplane::backend, async_backend, event_backend
/// and timed_backend. Movable; a moved-from backend reports invalid_argument.
class vulkan_backend {
public:
    using event_t = vulkan_event;

    vulkan_backend(vulkan_backend&&) noexcept = default;
    vulkan_backend& operator=(vulkan_backend&&) noexcept = default;
    vulkan_backend(const vulkan_backend&) = delete;
    vulkan_backend& operator=(const vulkan_backend&) = delete;
    ~vulkan_backend() = default; // waits for its work (the stream's state, once no event holds it)

    /// A new stream on dev; a status when the device cannot make one.
    [[nodiscard]] static result<vulkan_backend> make(const vulkan_device& dev) {
        auto s = std::make_shared<vulkan::detail::stream_state>();
        s->dev = dev.state();
        const status st = vulkan::detail::guarded(dev.state()->prefix(), "making a backend", [&]() -> status {
            auto& d = s->dev->device;
            s->pool = d.createCommandPool(
                vk::CommandPoolCreateInfo(vk::CommandPoolCreateFlagBits::eResetCommandBuffer, s->dev->queue_family));
            vk::SemaphoreTypeCreateInfo type(vk::SemaphoreType::eTimeline, 0);
            vk::SemaphoreCreateInfo info;
            info.pNext = &type;
            s->timeline = d.createSemaphore(info);
            s->make_error_word();
            s->make_grids();
            return {};
        });
        if (!st) return st;
        return vulkan_backend(dev, std::move(s));
    }

    [[nodiscard]] std::string_view name() const noexcept { return dev_.name(); }
    [[nodiscard]] const vulkan_device& device() const noexcept { return dev_; }
    [[nodiscard]] const vulkan_buffer_type& buffer_type() const noexcept { return dev_.buffer_type(); }
    [[nodiscard]] bool supports_op(const tensor& t) const { return dev_.supports_op(t); }
    [[nodiscard]] bool supports_buffer_type(const buffer_type_ref& bt) const noexcept {
        return dev_.supports_buffer_type(bt);
    }

    /// Queues g's nodes (see the file comment); returns once queued. not_supported /
    /// invalid_argument name the first node it cannot run (then nothing is queued).
    status compute(graph_view g) {
        if (!s_) return moved_from();
        return vulkan::detail::guarded(prefix(), "compute", [&]() -> status { return run(g); });
    }

    /// Waits until everything queued on this stream is done, and finishes the reads of
    /// get_tensor_async. errc::out_of_range when a get_rows or set_rows node queued since
    /// the last synchronize met an index beyond the rows it indexes
    /// (backends/detail/index_errors.hpp).
    status synchronize() {
        if (!s_) return moved_from();
        return vulkan::detail::guarded(prefix(), "synchronize", [&]() -> status {
            const bool raised = s_->synchronize();
            return s_->checks.take(raised, prefix());
        });
    }

    /// Queues a copy of `size` host bytes into t at `offset`. `src` is read before the
    /// call returns.
    status set_tensor_async(tensor& t, const void* src, std::size_t offset, std::size_t size) {
        if (!s_) return moved_from();
        vulkan_buffer* b = nullptr;
        if (status s = check_transfer(t, offset, size, "set_tensor_async", b); !s || size == 0) return s;
        return vulkan::detail::guarded(prefix(), "set_tensor_async", [&]() -> status {
            auto& slot = s_->staging_for(size);
            std::memcpy(slot.ptr, src, size);
            s_->transfers().copyBuffer(slot.buf, b->handle(), vk::BufferCopy(0, b->offset_of(t) + offset, size));
            s_->hold(s_->xfer_memory, b->memory());
            return {};
        });
    }

    /// Queues a copy of t's bytes [offset, offset + size) into `dst`, which holds them
    /// after synchronize().
    status get_tensor_async(const tensor& t, void* dst, std::size_t offset, std::size_t size) {
        if (!s_) return moved_from();
        vulkan_buffer* b = nullptr;
        if (status s = check_transfer(t, offset, size, "get_tensor_async", b); !s || size == 0) return s;
        return vulkan::detail::guarded(prefix(), "get_tensor_async", [&]() -> status {
            auto& slot = s_->staging_for(size);
            s_->transfers().copyBuffer(b->handle(), slot.buf, vk::BufferCopy(b->offset_of(t) + offset, 0, size));
            s_->reads.push_back({slot.ptr, static_cast<std::byte*>(dst), size});
            s_->hold(s_->xfer_memory, b->memory());
            return {};
        });
    }

    /// Queues dst = src when both are in this device's memory, contiguous, of one type
    /// and size; false otherwise (the caller copies another way).
    bool copy_tensor_async(const tensor& src, tensor& dst) {
        if (!s_ || src.type != dst.type || src.nbytes() != dst.nbytes() || !src.is_contiguous() ||
            !dst.is_contiguous())
            return false;
        vulkan_buffer* from = mine(src);
        vulkan_buffer* to = mine(dst);
        if (from == nullptr || to == nullptr) return false;
        if (src.nbytes() == 0) return true;
        return vulkan::detail::guarded(prefix(), "copy_tensor_async", [&]() -> status {
                   s_->transfers().copyBuffer(from->handle(), to->handle(),
                                              vk::BufferCopy(from->offset_of(src), to->offset_of(dst), src.nbytes()));
                   s_->hold(s_->xfer_memory, from->memory());
                   s_->hold(s_->xfer_memory, to->memory());
                   return {};
               })
            .ok();
    }

    /// An event of this stream.
    [[nodiscard]] result<vulkan_event> make_event() {
        if (!s_) return moved_from();
        return vulkan_event{};
    }

    /// Marks the current end of the stream (queued transfers included).
    status record(vulkan_event& e) {
        if (!s_) return moved_from();
        return vulkan::detail::guarded(prefix(), "record", [&]() -> status {
            s_->flush();
            e.s_ = s_;
            e.value_ = s_->submitted;
            return {};
        });
    }

    /// Makes the work queued after this call wait for e: on the device when e belongs to a
    /// stream of the same device, on the host otherwise.
    status wait(vulkan_event& e) {
        if (!s_) return moved_from();
        if (!e.s_ || e.value_ == 0 || e.s_ == s_) return {};
        if (e.s_->dev != s_->dev) return e.synchronize();
        return vulkan::detail::guarded(prefix(), "wait", [&]() -> status {
            s_->flush(); // what was queued before the wait does not wait
            s_->waits.emplace_back(e.s_->timeline, e.value_);
            return {};
        });
    }

    /// Times each following compute() on the device (GPU timestamps, see the file
    /// comment), or stops. Costs nothing while off. Turning it on forgets earlier spans;
    /// when the queue cannot time, or the query pool cannot be made, computes run untimed
    /// and last_compute_time() stays empty.
    void set_timing(bool on) noexcept {
        if (!s_) return;
        (void)vulkan::detail::guarded(prefix(), "set_timing", [&]() -> status {
            s_->set_timing(on);
            return {};
        });
    }

    /// Whether this stream's queue writes timestamps (looked up on the first
    /// set_timing(true); false before).
    [[nodiscard]] bool timing_supported() const noexcept { return s_ && s_->timer.can_time(); }

    /// When the latest compute() ran on the device, in device nanoseconds (the tick count
    /// masked to the queue's timestampValidBits, times timestampPeriod), once it is done
    /// (after synchronize(), or an event recorded after it). Nothing when timing is off,
    /// the queue cannot time, the latest compute was not timed, queued nothing or is not
    /// done, or its stamps cannot be read.
    [[nodiscard]] std::optional<device_span> last_compute_time() const noexcept {
        if (!s_) return std::nullopt;
        return s_->last_compute_time();
    }

    /// The fused groups the next computes may make (core/fusion.hpp; all by default).
    void set_fusions(fusion_set f) noexcept { fusions_ = f; }
    [[nodiscard]] fusion_set fusions() const noexcept { return fusions_; }

    [[nodiscard]] vulkan_stream_stats stats() const noexcept {
        if (!s_) return {};
        return {s_->n_computes, s_->n_recorded, s_->n_dispatches, s_->n_barriers, s_->n_timed};
    }

private:
    vulkan_backend(const vulkan_device& dev, std::shared_ptr<vulkan::detail::stream_state> s)
        : dev_(dev), s_(std::move(s)) {}

    [[nodiscard]] std::string prefix() const { return "vulkan backend '" + std::string(dev_.name()) + "': "; }
    static status moved_from() { return {errc::invalid_argument, "vulkan backend: used after being moved from"}; }

    /// t's buffer when it is memory of this backend's device.
    [[nodiscard]] vulkan_buffer* mine(const tensor& t) const noexcept {
        vulkan_buffer* b = t.buffer != nullptr ? t.buffer->get_if<vulkan_buffer>() : nullptr;
        return b != nullptr && &b->device_state() == s_->dev.get() && t.data != nullptr ? b : nullptr;
    }

    status check_transfer(const tensor& t, std::size_t offset, std::size_t size, const char* what,
                          vulkan_buffer*& b) const {
        b = nullptr;
        if (status s = backplane::detail::check_buffer_alive((prefix() + what).c_str(), t); !s) return s;
        b = mine(t);
        if (b == nullptr)
            return {errc::invalid_argument, prefix() + what + ": tensor " + backplane::detail::describe(&t) +
                                                " is not in this device's memory"};
        return backplane::detail::check_tensor_range((prefix() + what).c_str(), t, offset, size);
    }

    /// The binding of t (in this device's memory): an aligned offset at or before t and
    /// t's offset from it in binding units (ops/common.hpp).
    status bind(const tensor& t, const tensor& node, vulkan::detail::launch& l, std::size_t slot,
                vulkan::detail::stream_state::memory_list& memory) const {
        const vulkan_buffer* b = mine(t);
        if (b == nullptr)
            return {errc::invalid_argument, prefix() + "tensor " + backplane::detail::describe(&t) + " of node " +
                                                backplane::detail::describe(&node) + " is not in this device's memory"};
        const auto& dev = *s_->dev;
        const std::size_t off = b->offset_of(t);
        const std::size_t aligned = off - off % dev.storage_alignment();
        const std::size_t range = std::min(b->size() - aligned, dev.max_storage_range());
        if (off - aligned + t.nbytes() > range)
            return {errc::not_supported, prefix() + "tensor " + backplane::detail::describe(&t) +
                                             " does not fit one storage-buffer binding (" + std::to_string(range) +
                                             " bytes)"};
        const std::size_t unit = vulkan::detail::binding_unit(t.type);
        if ((off - aligned) % unit != 0)
            return {errc::not_supported, prefix() + "tensor " + backplane::detail::describe(&t) + " is at byte offset " +
                                             std::to_string(off) + ", not a multiple of " + std::to_string(unit)};
        l.bind[slot] = vk::DescriptorBufferInfo(b->handle(), aligned, range);
        l.ids[slot] = b->id();
        vulkan::detail::stream_state::hold(memory, b->memory());
        vulkan::detail::offset_word(l.pc, slot) = static_cast<std::uint32_t>((off - aligned) / unit);
        const vulkan::detail::mem_range r{b->id(), off, off + t.nbytes()};
        if (slot == 2)
            l.write = r;
        else
            l.reads[slot < 2 ? slot : slot - 1] = r;
        return {};
    }

    /// A graph's dispatches, the memory they use, and the nodes that check indices.
    struct planned {
        std::vector<vulkan::detail::launch> launches;
        vulkan::detail::stream_state::memory_list memory;
        std::vector<const tensor*> index_nodes;
        std::deque<tensor> stand_ins; // the fused groups' (ops/fused.hpp), while planning
    };

    /// The dispatches of g, or the first node that cannot run. A fused group the device
    /// takes is one dispatch of its stand-in (two for glu_pair), else its nodes one by one.
    status plan(graph_view g, planned& out) const {
        const auto& feats = s_->dev->feats;
        out.launches.reserve(g.size());
        for (const tensor* node : g)
            if (node == nullptr) return {errc::invalid_argument, prefix() + "a graph node is null"};
        const std::vector<fused_group> groups =
            find_fusions(g, fusions_, [&](const fused_group& grp) { return vulkan::detail::accepts(grp, feats); });
        std::size_t next = 0;
        for (std::size_t i = 0; i < g.size(); ++i) {
            tensor* node = g[i];
            if (node->op == op_kind::none || is_view_op(node->op)) continue;
            if (next < groups.size() && groups[next].first == i) {
                const fused_group& grp = groups[next++];
                i = grp.last;
                if (status s = add_group(grp, out); !s) return s;
                continue;
            }
            if (status s = add_node(*node, out); !s) return s;
        }
        return {};
    }

    /// Group grp's dispatches: its stand-in's when it can be planned and bound, else its
    /// nodes'.
    status add_group(const fused_group& grp, planned& out) const {
        const auto& feats = s_->dev->feats;
        tensor& t = out.stand_ins.emplace_back();
        vulkan::detail::stand_in(grp, t);
        vulkan::detail::dispatch d;
        bool fits = vulkan::detail::plan_fused(grp, t, feats, d) && vulkan::detail::bindable(t, feats);
        for (const tensor* src : t.src) fits = fits && (src == nullptr || vulkan::detail::bindable(*src, feats));
        if (!fits) {
            for (tensor* part : grp.parts)
                if (part != nullptr)
                    if (status s = add_node(*part, out); !s) return s;
            return {};
        }
        if (grp.kind == fusion::glu_pair) // the gate product, which the stand-in reads
            if (status s = add_node(*grp.parts[0], out); !s) return s;
        if (status s = add_launch(t, d, out); !s) return s;
        if (grp.kind == fusion::rope_set_rows) out.index_nodes.push_back(grp.parts[1]);
        return {};
    }

    /// The dispatch of one node.
    status add_node(tensor& node, planned& out) const {
        const auto& dev = *s_->dev;
        vulkan::detail::dispatch d;
        switch (vulkan::detail::check(node, dev.feats, d)) {
        case vulkan::detail::refusal::none: break;
        case vulkan::detail::refusal::op:
            return {errc::not_supported, prefix() + "node " + backplane::detail::describe(&node) + " (op " +
                                             std::string(to_string(node.op)) + ", " +
                                             std::string(to_string(node.type)) + ") is not supported"};
        case vulkan::detail::refusal::binding:
            return {errc::not_supported, prefix() + "node " + backplane::detail::describe(&node) +
                                             ": a tensor does not fit one storage-buffer binding (" +
                                             std::to_string(dev.max_storage_range()) + " bytes) or 32-bit indices"};
        }
        if (status s = add_launch(node, d, out); !s) return s;
        if (backplane::detail::reads_by_index(node.op)) out.index_nodes.push_back(&node);
        return {};
    }

    /// Dispatch d of node (planned), its tensors bound.
    status add_launch(const tensor& node, const vulkan::detail::dispatch& d, planned& out) const {
        const auto* blob = vulkan::spirv::find(d.shader);
        if (blob == nullptr) return {errc::not_supported, prefix() + "no shader '" + std::string(d.shader) + "'"};
        auto& l = out.launches.emplace_back();
        l.shader = blob;
        l.pc = d.pc;
        l.groups = d.groups;
        l.grid = node.src[0] != nullptr ? node.src[0]->type : node.type;
        if (status s = bind(node, node, l, 2, out.memory); !s) return s;
        for (std::size_t j = 0; j < static_cast<std::size_t>(max_srcs); ++j) {
            const std::size_t slot = vulkan::detail::slot_of_source(j);
            if (const tensor* src = node.src[j]) {
                if (status s = bind(*src, node, l, slot, out.memory); !s) return s;
            } else { // an unused binding still needs a buffer: the node's
                l.bind[slot] = l.bind[2];
                l.ids[slot] = l.ids[2];
            }
        }
        return {};
    }

    /// Records `launches` into a new command buffer (with its descriptor sets).
    void record(vulkan::detail::recording& rec) {
        auto& st = *s_;
        auto& dev = *st.dev;
        const auto& ls = rec.launches;
        const auto n = static_cast<std::uint32_t>(ls.size());
        constexpr std::uint32_t per_set = vulkan::detail::launch_slots + 2; // and the error word, the grid
        vk::DescriptorPoolSize size(vk::DescriptorType::eStorageBuffer, per_set * n);
        rec.pool = dev.device.createDescriptorPool(vk::DescriptorPoolCreateInfo({}, n, size));
        std::vector<vk::DescriptorSetLayout> layouts(ls.size(), dev.set_layout);
        const auto sets = dev.device.allocateDescriptorSets(vk::DescriptorSetAllocateInfo(rec.pool, layouts));
        std::vector<vk::WriteDescriptorSet> writes;
        writes.reserve(per_set * ls.size());
        const vk::DescriptorBufferInfo error_word(st.error_buf, 0, VK_WHOLE_SIZE); // binding 3
        std::vector<vk::DescriptorBufferInfo> grids; // binding 9: each launch's type's grid
        grids.reserve(ls.size());
        for (const auto& l : ls) {
            const std::size_t g = vulkan::detail::grid_index(l.grid);
            grids.emplace_back(st.grid_buf, vulkan::detail::grid_offset(g), vulkan::detail::lattice_grids[g].bytes);
        }
        for (std::size_t k = 0; k < ls.size(); ++k) {
            for (std::size_t slot = 0; slot < vulkan::detail::launch_slots; ++slot)
                writes.emplace_back(sets[k], vulkan::detail::binding_of_slot(slot), 0, vk::DescriptorType::eStorageBuffer,
                                    nullptr, ls[k].bind[slot]);
            writes.emplace_back(sets[k], 3, 0, vk::DescriptorType::eStorageBuffer, nullptr, error_word);
            writes.emplace_back(sets[k], 9, 0, vk::DescriptorType::eStorageBuffer, nullptr, grids[k]);
        }
        dev.device.updateDescriptorSets(writes, {});

        rec.cmd = st.new_command_buffer();
        vk::CommandBuffer cmd = rec.cmd;
        // may be pending when the same graph is queued again (compute without synchronize):
        // its leading barrier orders the runs, so they need not wait on the host
        cmd.begin(vk::CommandBufferBeginInfo(vk::CommandBufferUsageFlagBits::eSimultaneousUse));
        // what earlier work on the queue (shaders, transfers) or the host wrote is visible
        const vk::MemoryBarrier in(vk::AccessFlagBits::eHostWrite | vk::AccessFlagBits::eTransferWrite |
                                       vk::AccessFlagBits::eShaderWrite,
                                   vk::AccessFlagBits::eShaderRead | vk::AccessFlagBits::eShaderWrite);
        cmd.pipelineBarrier(vk::PipelineStageFlagBits::eHost | vk::PipelineStageFlagBits::eTransfer |
                                vk::PipelineStageFlagBits::eComputeShader,
                            vk::PipelineStageFlagBits::eComputeShader, {}, in, {}, {});
        // a barrier only where a dispatch reads what one since the last barrier wrote, or
        // writes what one of them read or wrote
        std::vector<vulkan::detail::mem_range> written, read;
        const auto hits = [](const std::vector<vulkan::detail::mem_range>& set, const vulkan::detail::mem_range& r) {
            if (r.buffer == 0) return false;
            for (const auto& x : set)
                if (x.overlaps(r)) return true;
            return false;
        };
        const vulkan::spirv::blob* bound = nullptr; // runs of one shader bind its pipeline once
        for (std::size_t k = 0; k < ls.size(); ++k) {
            const auto& l = ls[k];
            const bool dep = std::any_of(l.reads.begin(), l.reads.end(), [&](const auto& r) { return hits(written, r); }) ||
                             hits(written, l.write) || hits(read, l.write);
            if (dep) {
                const vk::MemoryBarrier mb(vk::AccessFlagBits::eShaderWrite | vk::AccessFlagBits::eShaderRead,
                                           vk::AccessFlagBits::eShaderRead | vk::AccessFlagBits::eShaderWrite);
                cmd.pipelineBarrier(vk::PipelineStageFlagBits::eComputeShader, vk::PipelineStageFlagBits::eComputeShader,
                                    {}, mb, {}, {});
                ++rec.barriers;
                written.clear();
                read.clear();
            }
            written.push_back(l.write);
            for (const auto& r : l.reads)
                if (r.buffer != 0) read.push_back(r);
            if (l.shader != bound) {
                cmd.bindPipeline(vk::PipelineBindPoint::eCompute,
                                 dev.pipeline_for(l.shader->name, {l.shader->words, l.shader->n_words}));
                bound = l.shader;
            }
            cmd.bindDescriptorSets(vk::PipelineBindPoint::eCompute, dev.pipeline_layout, 0, sets[k], {});
            cmd.pushConstants(dev.pipeline_layout, vk::ShaderStageFlagBits::eCompute, 0, sizeof(l.pc), &l.pc);
            cmd.dispatch(l.groups[0], l.groups[1], l.groups[2]);
        }
        // results visible to the host and to later work on the queue
        const vk::MemoryBarrier out(vk::AccessFlagBits::eShaderWrite, vk::AccessFlagBits::eHostRead |
                                                                          vk::AccessFlagBits::eTransferRead |
                                                                          vk::AccessFlagBits::eShaderRead);
        cmd.pipelineBarrier(vk::PipelineStageFlagBits::eComputeShader,
                            vk::PipelineStageFlagBits::eHost | vk::PipelineStageFlagBits::eTransfer |
                                vk::PipelineStageFlagBits::eComputeShader,
                            {}, out, {}, {});
        cmd.end();
    }

    /// The recording for `launches`: a kept one doing the same work, or a new one (which
    /// takes the place of the least recently used when the cache is full).
    vulkan::detail::recording& recording_for(std::vector<vulkan::detail::launch>&& launches) {
        auto& st = *s_;
        for (auto& r : st.cache) {
            if (r.launches.size() != launches.size()) continue;
            bool same = true;
            for (std::size_t k = 0; k < launches.size() && same; ++k) same = r.launches[k].same_work(launches[k]);
            if (same) return r;
        }
        vulkan::detail::recording* slot = nullptr;
        if (st.cache.size() < vulkan::detail::stream_state::cache_size) {
            slot = &st.cache.emplace_back();
        } else {
            slot = &st.cache.front();
            for (auto& r : st.cache)
                if (r.last_used < slot->last_used) slot = &r;
            st.wait_for(slot->done_at);
            st.dev->device.destroyDescriptorPool(slot->pool);
            st.dev->device.freeCommandBuffers(st.pool, slot->cmd);
            *slot = {};
        }
        slot->launches = std::move(launches);
        try {
            record(*slot);
        } catch (...) {
            if (slot->pool) st.dev->device.destroyDescriptorPool(slot->pool);
            if (slot->cmd) st.dev->device.freeCommandBuffers(st.pool, slot->cmd);
            *slot = {};
            std::erase_if(st.cache, [](const vulkan::detail::recording& r) { return !r.cmd; });
            throw;
        }
        ++st.n_recorded;
        st.n_dispatches += slot->launches.size();
        st.n_barriers += slot->barriers;
        return *slot;
    }

    status run(graph_view g) {
        s_->timer.latest.reset(); // a compute that queues nothing has no span
        s_->timer.span.reset();
        planned p;
        if (status s = plan(g, p); !s) return s;
        if (p.launches.empty()) return {};
        auto& st = *s_;
        auto& rec = recording_for(std::move(p.launches));
        st.flush();               // transfers queued before the graph run before it
        rec.done_at = st.submit_compute(rec.cmd);
        st.keep_until(rec.done_at, std::move(p.memory));
        for (const tensor* n : p.index_nodes) st.checks.note(*n);
        rec.last_used = ++st.tick;
        ++st.n_computes;
        return {};
    }

    vulkan_device dev_;
    std::shared_ptr<vulkan::detail::stream_state> s_;
    fusion_set fusions_;
};
static_assert(backend<vulkan_backend>);
static_assert(async_backend<vulkan_backend>);
static_assert(event_backend<vulkan_backend>);
static_assert(timed_backend<vulkan_backend>);

inline bool vulkan_device::supports_op(const tensor& t) const {
    return vulkan::detail::supports(t, s_->feats);
}

inline result<vulkan_backend> vulkan_device::make_backend() const { return vulkan_backend::make(*this); }

} // namespace backplane
