#pragma once
// A Vulkan device: one logical VkDevice on a physical device, its queue, its memory
// (a device-local buffer type and a host-visible one) and its compute pipelines.
//
// vulkan_device is a cheap handle on shared state: buffers and backends keep the state
// alive, so they may outlive the handle they came from. Two vulkan_device objects opened
// on the same physical device are two logical devices (lavapipe allows it): separate
// memory, separate queues, copies between them go through the host.

#include <backplane/backends/vulkan/detail/vk.hpp>
#include <backplane/backends/vulkan/instance.hpp>
#include <backplane/backends/vulkan/ops/common.hpp>
#include <backplane/core/concepts.hpp>
#include <backplane/core/detail/describe.hpp>
#include <backplane/memory/buffer.hpp>

#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

namespace backplane {

class vulkan_backend;
class vulkan_buffer;
class vulkan_device;

/// How a vulkan_device is opened.
struct vulkan_device_params {
    std::size_t index = 0;      ///< physical device (vulkan::physical_devices())
    bool force_staging = false; ///< never map device memory: every transfer goes through a staging buffer
    std::string name = {};      ///< "Vulkan<index>" when empty
};

namespace vulkan::detail {

struct device_state;

/// A buffer type of one device: its device-local memory, or its host-visible memory.
class buffer_type_impl {
public:
    using buffer_t = vulkan_buffer;
    buffer_type_impl(device_state* dev, bool host) : dev_(dev), host_(host) {}
    [[nodiscard]] inline std::string_view name() const noexcept;
    /// The vulkan_device's name (for both of its buffer types).
    [[nodiscard]] std::string_view device_name() const noexcept;
    [[nodiscard]] inline std::size_t alignment() const noexcept;
    [[nodiscard]] inline std::size_t max_size() const noexcept;
    [[nodiscard]] std::size_t alloc_size(const tensor& t) const noexcept { return t.nbytes(); }
    [[nodiscard]] bool is_host() const noexcept { return host_; }
    [[nodiscard]] inline result<vulkan_buffer> allocate(std::size_t size) const;
    [[nodiscard]] device_state& device() const noexcept { return *dev_; }

private:
    device_state* dev_;
    bool host_;
};

struct pipeline {
    vk::Pipeline handle;
    vk::ShaderModule module;
};

/// Everything a device owns. Lives behind a shared_ptr (buffers, backends and the
/// vulkan_device handle share it).
struct device_state : std::enable_shared_from_this<device_state> {
    std::shared_ptr<instance_state> inst = instance_ptr(); // destroyed last: the device needs it
    vulkan_device_params params;
    std::string name, description;
    vk::PhysicalDevice physical;
    vk::PhysicalDeviceProperties props;
    vk::PhysicalDeviceMemoryProperties mem_props;
    features feats; // what op plans may use (ops/common.hpp)
    std::uint32_t queue_family = 0;
    vk::Device device;
    vk::Queue queue;
    std::mutex queue_mutex; // vkQueueSubmit needs external synchronisation

    // device-local memory type, and a host-visible one (for the host buffer type and staging)
    std::uint32_t local_type = 0, host_type = 0;
    bool local_mappable = false; // the device-local type is also host-visible and coherent
    buffer_type_impl local_bt{this, false};
    buffer_type_impl host_bt{this, true};
    std::string local_bt_name, host_bt_name;

    vk::DescriptorSetLayout set_layout;
    vk::PipelineLayout pipeline_layout;
    std::mutex pipelines_mutex;
    std::map<std::string, pipeline, std::less<>> pipelines;

    // synchronous transfers (buffer set / get / memset / copy): one command buffer, one
    // fence, one staging buffer, under transfer_mutex
    std::mutex transfer_mutex;
    vk::CommandPool transfer_pool;
    vk::CommandBuffer transfer_cmd;
    vk::Fence transfer_fence;
    vk::Buffer staging;
    vk::DeviceMemory staging_mem;
    std::byte* staging_ptr = nullptr;
    std::size_t staging_size = 0;

    std::atomic<std::size_t> live_bytes{0};

    device_state() = default;
    device_state(const device_state&) = delete;
    device_state& operator=(const device_state&) = delete;

    ~device_state() {
        if (!device) return;
        (void)device.waitIdle();
        for (auto& [n, p] : pipelines) {
            device.destroyPipeline(p.handle);
            device.destroyShaderModule(p.module);
        }
        free_staging();
        if (transfer_fence) device.destroyFence(transfer_fence);
        if (transfer_pool) device.destroyCommandPool(transfer_pool);
        if (pipeline_layout) device.destroyPipelineLayout(pipeline_layout);
        if (set_layout) device.destroyDescriptorSetLayout(set_layout);
        device.destroy();
    }

    [[nodiscard]] std::string prefix() const { return "vulkan device '" + name + "': "; }

    void free_staging() noexcept {
        if (staging_ptr != nullptr) device.unmapMemory(staging_mem);
        if (staging) device.destroyBuffer(staging);
        if (staging_mem) device.freeMemory(staging_mem);
        staging = nullptr;
        staging_mem = nullptr;
        staging_ptr = nullptr;
        staging_size = 0;
    }

    [[nodiscard]] std::size_t max_storage_range() const noexcept { return props.limits.maxStorageBufferRange; }
    [[nodiscard]] std::size_t storage_alignment() const noexcept {
        return static_cast<std::size_t>(props.limits.minStorageBufferOffsetAlignment);
    }

    /// A VkBuffer of `size` bytes bound to new memory of type `type`.
    void make_buffer(std::size_t size, std::uint32_t type, vk::Buffer& buf, vk::DeviceMemory& mem) {
        using u = vk::BufferUsageFlagBits;
        buf = device.createBuffer(vk::BufferCreateInfo({}, size, u::eStorageBuffer | u::eTransferSrc | u::eTransferDst));
        try {
            const auto req = device.getBufferMemoryRequirements(buf);
            mem = device.allocateMemory(vk::MemoryAllocateInfo(req.size, type));
            device.bindBufferMemory(buf, mem, 0);
        } catch (...) {
            if (mem) device.freeMemory(mem);
            device.destroyBuffer(buf);
            buf = nullptr;
            mem = nullptr;
            throw;
        }
    }

    /// Runs `record(cmd)` on the queue and waits for it (transfer_mutex held by the caller).
    template <class F>
    void run_now(F&& record) {
        transfer_cmd.reset();
        transfer_cmd.begin(vk::CommandBufferBeginInfo(vk::CommandBufferUsageFlagBits::eOneTimeSubmit));
        record(transfer_cmd);
        transfer_cmd.end();
        {
            std::lock_guard lk(queue_mutex);
            queue.submit(vk::SubmitInfo({}, {}, transfer_cmd), transfer_fence);
        }
        const vk::Result r = device.waitForFences(transfer_fence, VK_TRUE, UINT64_MAX);
        device.resetFences(transfer_fence);
        if (r != vk::Result::eSuccess) throw vk::SystemError(vk::make_error_code(r), "waiting for a transfer");
    }

    /// Ensures a staging buffer of at least min(want, 64 MiB) bytes; returns its size.
    std::size_t ensure_staging(std::size_t want) {
        constexpr std::size_t chunk = std::size_t{64} << 20;
        const std::size_t need = std::min(std::max<std::size_t>(want, 1), chunk);
        if (staging_size >= need) return staging_size;
        free_staging();
        std::size_t size = std::size_t{1} << 16;
        while (size < need) size *= 2;
        make_buffer(size, host_type, staging, staging_mem);
        staging_ptr = static_cast<std::byte*>(device.mapMemory(staging_mem, 0, VK_WHOLE_SIZE));
        staging_size = size;
        return size;
    }

    /// Host bytes into buf at `offset`, through the staging buffer.
    void upload(vk::Buffer buf, std::size_t offset, const std::byte* src, std::size_t size) {
        std::lock_guard lk(transfer_mutex);
        const std::size_t chunk = ensure_staging(size);
        for (std::size_t done = 0; done < size;) {
            const std::size_t n = std::min(chunk, size - done);
            std::memcpy(staging_ptr, src + done, n);
            run_now([&](vk::CommandBuffer cmd) { cmd.copyBuffer(staging, buf, vk::BufferCopy(0, offset + done, n)); });
            done += n;
        }
    }

    /// buf's bytes at `offset` into host memory, through the staging buffer.
    void download(vk::Buffer buf, std::size_t offset, std::byte* dst, std::size_t size) {
        std::lock_guard lk(transfer_mutex);
        const std::size_t chunk = ensure_staging(size);
        for (std::size_t done = 0; done < size;) {
            const std::size_t n = std::min(chunk, size - done);
            run_now([&](vk::CommandBuffer cmd) { cmd.copyBuffer(buf, staging, vk::BufferCopy(offset + done, 0, n)); });
            std::memcpy(dst + done, staging_ptr, n);
            done += n;
        }
    }

    /// A device-side copy between two buffers of this device.
    void copy(vk::Buffer from, std::size_t from_offset, vk::Buffer to, std::size_t to_offset, std::size_t size) {
        std::lock_guard lk(transfer_mutex);
        run_now([&](vk::CommandBuffer cmd) { cmd.copyBuffer(from, to, vk::BufferCopy(from_offset, to_offset, size)); });
    }

    /// The compute pipeline of a SPIR-V blob, made on first use.
    vk::Pipeline pipeline_for(std::string_view variant, std::span<const std::uint32_t> words) {
        std::lock_guard lk(pipelines_mutex);
        if (auto it = pipelines.find(variant); it != pipelines.end()) return it->second.handle;
        pipeline p;
        p.module = device.createShaderModule(vk::ShaderModuleCreateInfo({}, words.size_bytes(), words.data()));
        try {
            vk::PipelineShaderStageCreateInfo stage({}, vk::ShaderStageFlagBits::eCompute, p.module, "main");
            auto r = device.createComputePipeline(nullptr, vk::ComputePipelineCreateInfo({}, stage, pipeline_layout));
            if (r.result != vk::Result::eSuccess)
                throw vk::SystemError(vk::make_error_code(r.result), "creating a compute pipeline");
            p.handle = r.value;
        } catch (...) {
            device.destroyShaderModule(p.module);
            throw;
        }
        pipelines.emplace(std::string(variant), p);
        return p.handle;
    }
};

/// The source of vulkan_buffer::id().
inline std::atomic<std::uint64_t>& vulkan_buffer_ids() noexcept {
    static std::atomic<std::uint64_t> next{1};
    return next;
}

inline std::optional<std::uint32_t> find_memory_type(const vk::PhysicalDeviceMemoryProperties& mp,
                                                     vk::MemoryPropertyFlags want, vk::MemoryPropertyFlags prefer = {}) {
    std::optional<std::uint32_t> found;
    for (std::uint32_t i = 0; i < mp.memoryTypeCount; ++i) {
        const auto f = mp.memoryTypes[i].propertyFlags;
        if ((f & want) != want) continue;
        if ((f & prefer) == prefer) return i;
        if (!found) found = i;
    }
    return found;
}

/// Opens the logical device (throws vk::SystemError; the caller turns it into a status).
inline status open_device(device_state& s, const vulkan_device_params& params) {
    instance_state& inst = instance();
    if (!inst.error) return inst.error;
    if (params.index >= inst.physical.size())
        return {errc::not_supported, "vulkan: no physical device " + std::to_string(params.index) + " (the instance has " +
                                         std::to_string(inst.physical.size()) + ")"};
    s.params = params;
    s.name = params.name.empty() ? "Vulkan" + std::to_string(params.index) : params.name;
    s.physical = inst.physical[params.index];
    s.props = s.physical.getProperties();
    s.mem_props = s.physical.getMemoryProperties();

    // features this backend uses when present
    auto chain = s.physical.getFeatures2<vk::PhysicalDeviceFeatures2, vk::PhysicalDeviceVulkan11Features,
                                         vk::PhysicalDeviceVulkan12Features>();
    const auto& f11 = chain.get<vk::PhysicalDeviceVulkan11Features>();
    const auto& f12 = chain.get<vk::PhysicalDeviceVulkan12Features>();
    auto& ft = s.feats;
    ft.fp16 = f12.shaderFloat16 == VK_TRUE;
    ft.int8 = f12.shaderInt8 == VK_TRUE;
    ft.storage16 = f11.storageBuffer16BitAccess == VK_TRUE;
    ft.storage8 = f12.storageBuffer8BitAccess == VK_TRUE;
    auto props2 = s.physical.getProperties2<vk::PhysicalDeviceProperties2, vk::PhysicalDeviceSubgroupProperties>();
    ft.subgroup_size = std::max<std::uint32_t>(1, props2.get<vk::PhysicalDeviceSubgroupProperties>().subgroupSize);
    ft.shared_memory = s.props.limits.maxComputeSharedMemorySize;
    ft.max_invocations = s.props.limits.maxComputeWorkGroupInvocations;
    ft.max_binding = s.props.limits.maxStorageBufferRange;
    if (f12.scalarBlockLayout != VK_TRUE) return {errc::not_supported, s.prefix() + "scalar block layout is not supported"};
    // every launch binds its sources, destination, error word and grid as storage buffers
    // at once
    constexpr std::uint32_t bound = vulkan::detail::launch_slots + 2;
    if (s.props.limits.maxPerStageDescriptorStorageBuffers < bound)
        return {errc::not_supported, s.prefix() + "a compute stage may bind " +
                                         std::to_string(s.props.limits.maxPerStageDescriptorStorageBuffers) +
                                         " storage buffers, " + std::to_string(bound) + " are needed"};

    const auto families = s.physical.getQueueFamilyProperties();
    bool found = false;
    for (std::uint32_t i = 0; i < families.size() && !found; ++i)
        if (families[i].queueFlags & vk::QueueFlagBits::eCompute) {
            s.queue_family = i;
            found = true;
        }
    if (!found) return {errc::not_supported, s.prefix() + "no queue family supports compute"};

    using mf = vk::MemoryPropertyFlagBits;
    const auto local = find_memory_type(s.mem_props, mf::eDeviceLocal);
    const auto host = find_memory_type(s.mem_props, mf::eHostVisible | mf::eHostCoherent, mf::eHostCached);
    if (!local || !host) return {errc::not_supported, s.prefix() + "no device-local or no host-visible memory type"};
    s.local_type = *local;
    s.host_type = *host;
    const auto lf = s.mem_props.memoryTypes[s.local_type].propertyFlags;
    s.local_mappable = !params.force_staging && (lf & (mf::eHostVisible | mf::eHostCoherent)) == (mf::eHostVisible | mf::eHostCoherent);

    // enable what exists of what the shaders may use
    vk::PhysicalDeviceVulkan12Features e12;
    e12.shaderFloat16 = f12.shaderFloat16;
    e12.shaderInt8 = f12.shaderInt8;
    e12.storageBuffer8BitAccess = f12.storageBuffer8BitAccess;
    e12.uniformAndStorageBuffer8BitAccess = f12.uniformAndStorageBuffer8BitAccess;
    e12.timelineSemaphore = f12.timelineSemaphore;
    e12.scalarBlockLayout = f12.scalarBlockLayout;
    vk::PhysicalDeviceVulkan11Features e11;
    e11.storageBuffer16BitAccess = f11.storageBuffer16BitAccess;
    e11.uniformAndStorageBuffer16BitAccess = f11.uniformAndStorageBuffer16BitAccess;
    e11.pNext = &e12;
    if (f12.timelineSemaphore != VK_TRUE) return {errc::not_supported, s.prefix() + "timeline semaphores are not supported"};
    const float priority = 1.0f;
    vk::DeviceQueueCreateInfo qi({}, s.queue_family, 1, &priority);
    vk::DeviceCreateInfo di({}, qi);
    di.pNext = &e11;
    s.device = s.physical.createDevice(di);
    s.queue = s.device.getQueue(s.queue_family, 0);

    // sources 0 and 1, destination, the stream's error word (backends/detail/index_errors.hpp),
    // sources 2 to 6 (ops/common.hpp's launch slots), the stream's lattice grid (binding 9)
    std::array<vk::DescriptorSetLayoutBinding, vulkan::detail::launch_slots + 2> bindings;
    for (std::uint32_t b = 0; b < bindings.size(); ++b)
        bindings[b] = vk::DescriptorSetLayoutBinding(b, vk::DescriptorType::eStorageBuffer, 1, vk::ShaderStageFlagBits::eCompute);
    s.set_layout = s.device.createDescriptorSetLayout(vk::DescriptorSetLayoutCreateInfo({}, bindings));
    vk::PushConstantRange pc(vk::ShaderStageFlagBits::eCompute, 0, 128);
    s.pipeline_layout = s.device.createPipelineLayout(vk::PipelineLayoutCreateInfo({}, s.set_layout, pc));

    s.transfer_pool = s.device.createCommandPool(
        vk::CommandPoolCreateInfo(vk::CommandPoolCreateFlagBits::eResetCommandBuffer, s.queue_family));
    s.transfer_cmd = s.device.allocateCommandBuffers(
        vk::CommandBufferAllocateInfo(s.transfer_pool, vk::CommandBufferLevel::ePrimary, 1))[0];
    s.transfer_fence = s.device.createFence({});

    s.local_bt_name = s.name;
    s.host_bt_name = s.name + "_Host";
    const char* kind = "GPU";
    switch (kind_of(s.props.deviceType)) {
    case device_kind::cpu: kind = "CPU (software)"; break;
    case device_kind::igpu: kind = "integrated GPU"; break;
    default: break;
    }
    s.description = std::string(s.props.deviceName.data()) + " (" + kind + ", Vulkan " +
                    std::to_string(VK_API_VERSION_MAJOR(s.props.apiVersion)) + "." +
                    std::to_string(VK_API_VERSION_MINOR(s.props.apiVersion)) + ")";
    return {};
}

} // namespace vulkan::detail

// ---------------------------------------------------------------------------------------
// buffer

namespace vulkan::detail {

/// The memory of one vulkan_buffer: its VkBuffer, VkDeviceMemory and address range.
/// Shared: the buffer holds it, and so does each stream's work that reads or writes it
/// until that work is done (stream_state::keep), so freeing a buffer while a compute or
/// a transfer using it is still queued never frees memory the device is using; the
/// memory goes when the last of them lets go.
struct buffer_memory {
    std::shared_ptr<device_state> dev;
    vk::Buffer buf;
    vk::DeviceMemory mem;
    std::byte* mapped = nullptr; // host address of the memory, or null (staged transfers)
    void* base = nullptr;        // tensors' addresses start here
    std::size_t reserved = 0;    // bytes of the address reservation (device-local buffers)
    std::size_t size = 0;
    std::uint64_t id = 0;

    explicit buffer_memory(std::shared_ptr<device_state> d) : dev(std::move(d)) {}
    buffer_memory(const buffer_memory&) = delete;
    buffer_memory& operator=(const buffer_memory&) = delete;
    ~buffer_memory() {
        if (mapped != nullptr) dev->device.unmapMemory(mem);
        if (buf) dev->device.destroyBuffer(buf);
        if (mem) dev->device.freeMemory(mem);
        if (reserved != 0) ::munmap(base, reserved);
        dev->live_bytes.fetch_sub(size);
    }
};

} // namespace vulkan::detail

/// Memory of a Vulkan device: a VkBuffer and its VkDeviceMemory. Tensors in device-local
/// memory have addresses in a reserved, inaccessible range (never dereferenced); tensors
/// in the host-visible buffer type have real, mapped addresses. Destroying a buffer
/// never waits: work queued on a stream keeps the memory alive until it is done
/// (vulkan::detail::buffer_memory).
class vulkan_buffer {
public:
    vulkan_buffer(vulkan_buffer&&) noexcept = default;
    vulkan_buffer& operator=(vulkan_buffer&&) = delete;
    vulkan_buffer(const vulkan_buffer&) = delete;
    vulkan_buffer& operator=(const vulkan_buffer&) = delete;
    ~vulkan_buffer() = default;

    [[nodiscard]] void* base() const noexcept { return m_->base; }
    [[nodiscard]] std::size_t size() const noexcept { return m_->size; }

    /// Byte offset of t's element 0 in the VkBuffer (t in this buffer).
    [[nodiscard]] std::size_t offset_of(const tensor& t) const noexcept {
        return static_cast<std::size_t>(static_cast<const std::byte*>(t.data) - static_cast<const std::byte*>(m_->base));
    }
    [[nodiscard]] vk::Buffer handle() const noexcept { return m_->buf; }
    /// A number no other buffer of this process's Vulkan devices has had (handles are
    /// reused after a buffer is freed; recorded work is keyed by ids instead).
    [[nodiscard]] std::uint64_t id() const noexcept { return m_->id; }
    [[nodiscard]] const vulkan::detail::device_state& device_state() const noexcept { return *m_->dev; }
    /// Mapped host address of the memory, or null (staged transfers).
    [[nodiscard]] std::byte* mapped() const noexcept { return m_->mapped; }
    /// The memory itself, for work that must keep it alive until it is done.
    [[nodiscard]] const std::shared_ptr<vulkan::detail::buffer_memory>& memory() const noexcept { return m_; }

    status set_tensor(tensor& t, const void* src, std::size_t offset, std::size_t size) {
        if (size == 0) return {};
        const std::size_t at = offset_of(t) + offset;
        if (m_->mapped != nullptr) {
            std::memcpy(m_->mapped + at, src, size);
            return {};
        }
        return vulkan::detail::guarded(m_->dev->prefix(), "set_tensor", [&]() -> status {
            m_->dev->upload(m_->buf, at, static_cast<const std::byte*>(src), size);
            return {};
        });
    }
    status get_tensor(const tensor& t, void* dst, std::size_t offset, std::size_t size) {
        if (size == 0) return {};
        const std::size_t at = offset_of(t) + offset;
        if (m_->mapped != nullptr) {
            std::memcpy(dst, m_->mapped + at, size);
            return {};
        }
        return vulkan::detail::guarded(m_->dev->prefix(), "get_tensor", [&]() -> status {
            m_->dev->download(m_->buf, at, static_cast<std::byte*>(dst), size);
            return {};
        });
    }
    status memset_tensor(tensor& t, std::uint8_t value, std::size_t offset, std::size_t size) {
        return fill(offset_of(t) + offset, value, size);
    }
    status clear(std::uint8_t value) { return fill(0, value, m_->size); }

    /// dst (in this buffer) from src: a device-side copy when src is in a buffer of the
    /// same device, a direct upload when src is host memory; layouts must match (both
    /// contiguous, same bytes). false otherwise: the caller stages the copy.
    bool copy_tensor(const tensor& src, tensor& dst) {
        if (src.type != dst.type || src.nbytes() != dst.nbytes() || !src.is_contiguous() || !dst.is_contiguous())
            return false;
        const std::size_t n = dst.nbytes();
        if (n == 0) return true;
        vulkan_buffer* from = src.buffer != nullptr ? src.buffer->get_if<vulkan_buffer>() : nullptr;
        if (from != nullptr && from->m_->dev == m_->dev && from->m_->buf) {
            const status s = vulkan::detail::guarded(m_->dev->prefix(), "copy_tensor", [&]() -> status {
                m_->dev->copy(from->m_->buf, from->offset_of(src), m_->buf, offset_of(dst), n);
                return {};
            });
            return s.ok();
        }
        if (from != nullptr && from->m_->dev != m_->dev && from->m_->buf) { // another Vulkan device: through the host
            const status s = vulkan::detail::guarded(m_->dev->prefix(), "copy_tensor from another device", [&]() -> status {
                if (m_->mapped != nullptr) return from->get_tensor(src, m_->mapped + offset_of(dst), 0, n);
                if (from->m_->mapped != nullptr) return set_tensor(dst, from->m_->mapped + from->offset_of(src), 0, n);
                std::vector<std::byte> bounce(n);
                if (status g = from->get_tensor(src, bounce.data(), 0, n); !g) return g;
                return set_tensor(dst, bounce.data(), 0, n);
            });
            return s.ok();
        }
        if (src.data == nullptr || (src.buffer != nullptr && !src.buffer->is_host())) return false; // not host memory
        return set_tensor(dst, src.data, 0, n).ok();
    }

private:
    friend class vulkan::detail::buffer_type_impl;
    explicit vulkan_buffer(std::shared_ptr<vulkan::detail::buffer_memory> m) noexcept : m_(std::move(m)) {}

    status fill(std::size_t at, std::uint8_t value, std::size_t size) {
        if (size == 0) return {};
        if (m_->mapped != nullptr) {
            std::memset(m_->mapped + at, value, size);
            return {};
        }
        return vulkan::detail::guarded(m_->dev->prefix(), "memset", [&]() -> status {
            if (at % 4 == 0 && size % 4 == 0) { // on the device
                const std::uint32_t word = 0x01010101u * value;
                std::lock_guard lk(m_->dev->transfer_mutex);
                m_->dev->run_now([&](vk::CommandBuffer cmd) { cmd.fillBuffer(m_->buf, at, size, word); });
                return {};
            }
            const std::vector<std::byte> bytes(size, static_cast<std::byte>(value));
            m_->dev->upload(m_->buf, at, bytes.data(), size);
            return {};
        });
    }

    std::shared_ptr<vulkan::detail::buffer_memory> m_; // never null but in a moved-from buffer
};
static_assert(buffer<vulkan_buffer>);
static_assert(copy_buffer<vulkan_buffer>);

namespace vulkan::detail {

inline std::string_view buffer_type_impl::name() const noexcept { return host_ ? dev_->host_bt_name : dev_->local_bt_name; }
inline std::string_view buffer_type_impl::device_name() const noexcept { return dev_->name; }
inline std::size_t buffer_type_impl::alignment() const noexcept {
    return std::max<std::size_t>(64, dev_->storage_alignment());
}
inline std::size_t buffer_type_impl::max_size() const noexcept {
    vk::DeviceSize heap = 0;
    const auto& mp = dev_->mem_props;
    const std::uint32_t type = host_ ? dev_->host_type : dev_->local_type;
    heap = mp.memoryHeaps[mp.memoryTypes[type].heapIndex].size;
    return static_cast<std::size_t>(heap);
}

inline result<vulkan_buffer> buffer_type_impl::allocate(std::size_t size) const {
    if (size == 0) size = alignment(); // a usable, empty buffer
    if (size > max_size())
        return status(errc::alloc_failed, dev_->prefix() + "a buffer of " + std::to_string(size) +
                                               " bytes is larger than the memory heap (" + std::to_string(max_size()) + ")");
    auto m = std::make_shared<buffer_memory>(dev_->shared_from_this());
    const status s = guarded(dev_->prefix(), "allocating " + std::to_string(size) + " bytes", [&]() -> status {
        dev_->make_buffer(size, host_ ? dev_->host_type : dev_->local_type, m->buf, m->mem);
        m->size = size;
        m->id = vulkan_buffer_ids().fetch_add(1);
        dev_->live_bytes.fetch_add(size);
        if (host_ || dev_->local_mappable)
            m->mapped = static_cast<std::byte*>(dev_->device.mapMemory(m->mem, 0, VK_WHOLE_SIZE));
        if (host_) {
            m->base = m->mapped;
        } else {
            // an address range nothing can touch, for the tensors' data pointers
            void* r = ::mmap(nullptr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
            if (r == MAP_FAILED)
                return {errc::alloc_failed, dev_->prefix() + "cannot reserve " + std::to_string(size) + " bytes of addresses"};
            m->base = r;
            m->reserved = size;
        }
        return {};
    });
    if (!s) return s; // m's destructor frees what was made
    return vulkan_buffer(std::move(m));
}

} // namespace vulkan::detail

/// The device-local memory of a Vulkan device (what its backends compute in).
using vulkan_buffer_type = vulkan::detail::buffer_type_impl;
static_assert(buffer_type<vulkan_buffer_type>);
static_assert(device_buffer_type<vulkan_buffer_type>);

// ---------------------------------------------------------------------------------------
// device

/// A Vulkan device (see the file comment). Models backplane::device and host_buffer_device.
class vulkan_device {
public:
    /// Opens physical device params.index as a new logical device; a status (never an
    /// abort) when there is no Vulkan, no such device, or the device cannot be made.
    [[nodiscard]] static result<vulkan_device> open(const vulkan_device_params& params = {}) {
        auto state = std::make_shared<vulkan::detail::device_state>();
        const status s = vulkan::detail::guarded("vulkan: ", "opening device " + std::to_string(params.index),
                                                 [&] { return vulkan::detail::open_device(*state, params); });
        if (!s) return s;
        return vulkan_device(std::move(state));
    }

    [[nodiscard]] std::string_view name() const noexcept { return s_->name; }
    [[nodiscard]] std::string_view description() const noexcept { return s_->description; }
    [[nodiscard]] device_kind kind() const noexcept { return vulkan::detail::kind_of(s_->props.deviceType); }
    [[nodiscard]] memory_info memory() const noexcept {
        const std::size_t total = s_->local_bt.max_size();
        const std::size_t used = std::min(total, s_->live_bytes.load());
        return {total - used, total};
    }
    [[nodiscard]] device_caps caps() const noexcept {
        return {.async = true, .host_buffer = true, .buffer_from_host_ptr = false, .events = true};
    }
    [[nodiscard]] const vulkan_buffer_type& buffer_type() const noexcept { return s_->local_bt; }
    /// Host-visible memory of this device: the CPU reads and writes it in place, and
    /// this device's backends read it too (staging without a copy).
    [[nodiscard]] const vulkan_buffer_type& host_buffer_type() const noexcept { return s_->host_bt; }
    [[nodiscard]] inline bool supports_op(const tensor& t) const;
    /// Its own two buffer types.
    [[nodiscard]] bool supports_buffer_type(const buffer_type_ref& bt) const noexcept {
        return bt == buffer_type_ref(s_->local_bt) || bt == buffer_type_ref(s_->host_bt);
    }

    /// Half floats, 8-bit integers and 16/8-bit storage in shaders; the subgroup size.
    [[nodiscard]] bool has_fp16() const noexcept { return s_->feats.fp16 && s_->feats.storage16; }
    [[nodiscard]] bool has_int8() const noexcept { return s_->feats.int8 && s_->feats.storage8; }
    [[nodiscard]] std::uint32_t subgroup_size() const noexcept { return s_->feats.subgroup_size; }
    /// Everything op plans depend on (ops/common.hpp).
    [[nodiscard]] const vulkan::detail::features& op_features() const noexcept { return s_->feats; }
    /// What the device offers, as the registry lists it: fp16, int8, 16/8-bit storage,
    /// subgroup size, shared memory and invocations per workgroup, largest storage
    /// binding, whether device memory is mapped, the driver's API version.
    [[nodiscard]] std::vector<feature> features() const {
        const auto& f = s_->feats;
        auto flag = [](bool b) { return std::string(b ? "1" : "0"); };
        return {{"fp16", flag(f.fp16)},
                {"int8", flag(f.int8)},
                {"storage16", flag(f.storage16)},
                {"storage8", flag(f.storage8)},
                {"subgroup_size", std::to_string(f.subgroup_size)},
                {"shared_memory", std::to_string(f.shared_memory)},
                {"max_invocations", std::to_string(f.max_invocations)},
                {"max_storage_buffer_range", std::to_string(f.max_binding)},
                {"maps_device_memory", flag(s_->local_mappable)},
                {"api_version", std::to_string(VK_API_VERSION_MAJOR(s_->props.apiVersion)) + "." +
                                    std::to_string(VK_API_VERSION_MINOR(s_->props.apiVersion)) + "." +
                                    std::to_string(VK_API_VERSION_PATCH(s_->props.apiVersion))}};
    }
    [[nodiscard]] std::size_t max_storage_buffer_range() const noexcept { return s_->max_storage_range(); }
    [[nodiscard]] bool staging_forced() const noexcept { return s_->params.force_staging; }
    /// Whether set / get map device memory directly (else they go through staging).
    [[nodiscard]] bool maps_device_memory() const noexcept { return s_->local_mappable; }

    /// A new stream on this device (defined in backends/vulkan/backend.hpp).
    [[nodiscard]] inline result<vulkan_backend> make_backend() const;

    [[nodiscard]] const std::shared_ptr<vulkan::detail::device_state>& state() const noexcept { return s_; }

private:
    explicit vulkan_device(std::shared_ptr<vulkan::detail::device_state> s) : s_(std::move(s)) {}
    std::shared_ptr<vulkan::detail::device_state> s_;
};

} // namespace backplane
