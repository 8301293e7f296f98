#pragma once
// A stream of work on a Vulkan device: graphs recorded into a command buffer, one
// compute dispatch per node, submitted to the device's queue and signalling a timeline
// semaphore that synchronize() waits on.

#include <backplane/backends/vulkan/device.hpp>
#include <backplane/backends/vulkan/ops.hpp>
#include <backplane/backends/vulkan/spirv.hpp>
#include <backplane/core/detail/describe.hpp>

#include <memory>
#include <string>
#include <vector>

namespace backplane {

namespace vulkan::detail {

struct stream_state {
    std::shared_ptr<device_state> dev;
    vk::CommandPool pool;
    vk::CommandBuffer cmd;
    vk::DescriptorPool dpool;
    std::size_t dpool_sets = 0;
    vk::Semaphore timeline;
    std::uint64_t submitted = 0; // the semaphore's value once everything queued is done

    ~stream_state() {
        if (!dev || !dev->device) return;
        if (timeline) {
            if (submitted != 0) (void)dev->device.waitSemaphores(vk::SemaphoreWaitInfo({}, timeline, submitted), UINT64_MAX);
            dev->device.destroySemaphore(timeline);
        }
        if (dpool) dev->device.destroyDescriptorPool(dpool);
        if (pool) dev->device.destroyCommandPool(pool);
    }

    void wait_idle() {
        if (submitted == 0) return;
        const vk::Result r = dev->device.waitSemaphores(vk::SemaphoreWaitInfo({}, timeline, submitted), UINT64_MAX);
        if (r != vk::Result::eSuccess) throw vk::SystemError(vk::make_error_code(r), "waiting for the stream");
    }

    /// A descriptor pool for at least n sets (three storage buffers each), reset.
    void ready_descriptors(std::size_t n) {
        if (dpool && dpool_sets >= n) {
            dev->device.resetDescriptorPool(dpool);
            return;
        }
        if (dpool) dev->device.destroyDescriptorPool(dpool);
        dpool = nullptr;
        std::size_t sets = std::max<std::size_t>(64, dpool_sets);
        while (sets < n) sets *= 2;
        vk::DescriptorPoolSize size(vk::DescriptorType::eStorageBuffer, static_cast<std::uint32_t>(3 * sets));
        dpool = dev->device.createDescriptorPool(vk::DescriptorPoolCreateInfo({}, static_cast<std::uint32_t>(sets), size));
        dpool_sets = sets;
    }
};

/// One node's dispatch.
struct launch {
    const spirv::blob* shader;
    push_constants pc;
    std::array<vk::DescriptorBufferInfo, 3> bind;
    std::array<std::uint32_t, 3> groups;
};

} // namespace vulkan::detail

/// A stream on a Vulkan device. Models backplane::backend. Movable; a moved-from backend
/// reports invalid_argument.
class vulkan_backend {
public:
    vulkan_backend(vulkan_backend&&) noexcept = default;
    vulkan_backend& operator=(vulkan_backend&&) noexcept = default;
    vulkan_backend(const vulkan_backend&) = delete;
    vulkan_backend& operator=(const vulkan_backend&) = delete;
    ~vulkan_backend() = default; // waits for its work

    /// A new stream on dev; a status when the device cannot make one.
    [[nodiscard]] static result<vulkan_backend> make(const vulkan_device& dev) {
        auto s = std::make_unique<vulkan::detail::stream_state>();
        s->dev = dev.state();
        const status st = vulkan::detail::guarded(dev.state()->prefix(), "making a backend", [&]() -> status {
            auto& d = s->dev->device;
            s->pool = d.createCommandPool(
                vk::CommandPoolCreateInfo(vk::CommandPoolCreateFlagBits::eResetCommandBuffer, s->dev->queue_family));
            s->cmd = d.allocateCommandBuffers(vk::CommandBufferAllocateInfo(s->pool, vk::CommandBufferLevel::ePrimary, 1))[0];
            vk::SemaphoreTypeCreateInfo type(vk::SemaphoreType::eTimeline, 0);
            vk::SemaphoreCreateInfo info;
            info.pNext = &type;
            s->timeline = d.createSemaphore(info);
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

    /// Records g's nodes (see the file comment) and submits them; returns once queued.
    /// not_supported / invalid_argument name the first node it cannot run (then nothing
    /// is queued). Waits first for the previous graph of this stream.
    status compute(graph_view g) {
        if (!s_) return moved_from();
        return vulkan::detail::guarded(prefix(), "compute", [&]() -> status { return run(g); });
    }

    /// Waits until everything queued on this stream is done.
    status synchronize() {
        if (!s_) return moved_from();
        return vulkan::detail::guarded(prefix(), "synchronize", [&]() -> status {
            s_->wait_idle();
            return {};
        });
    }

private:
    vulkan_backend(const vulkan_device& dev, std::unique_ptr<vulkan::detail::stream_state> s)
        : dev_(dev), s_(std::move(s)) {}

    [[nodiscard]] std::string prefix() const { return "vulkan backend '" + std::string(dev_.name()) + "': "; }
    static status moved_from() { return {errc::invalid_argument, "vulkan backend: used after being moved from"}; }

    /// The binding of t (in this device's memory): an aligned offset at or before t and
    /// t's element offset from it.
    status bind(const tensor& t, const tensor& node, vk::DescriptorBufferInfo& info, std::uint32_t& elem) const {
        const vulkan_buffer* b = t.buffer != nullptr ? t.buffer->get_if<vulkan_buffer>() : nullptr;
        if (b == nullptr || &b->device_state() != s_->dev.get() || t.data == nullptr)
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
        info = vk::DescriptorBufferInfo(b->handle(), aligned, range);
        elem = static_cast<std::uint32_t>((off - aligned) / unit);
        return {};
    }

    status run(graph_view g) {
        auto& st = *s_;
        auto& dev = *st.dev;
        std::vector<vulkan::detail::launch> launches;
        launches.reserve(g.size());
        for (tensor* node : g) {
            if (node == nullptr) return {errc::invalid_argument, prefix() + "a graph node is null"};
            if (node->op == op_kind::none || is_view_op(node->op)) continue;
            if (!supports_op(*node))
                return {errc::not_supported, prefix() + "node " + backplane::detail::describe(node) + " (op " +
                                                 std::string(to_string(node->op)) + ", " +
                                                 std::string(to_string(node->type)) + ") is not supported"};
            vulkan::detail::dispatch d;
            if (!vulkan::detail::plan(*node, dev.feats, d))
                return {errc::not_supported, prefix() + "node " + backplane::detail::describe(node) + " has no dispatch"};
            const auto* blob = vulkan::spirv::find(d.shader);
            if (blob == nullptr) return {errc::not_supported, prefix() + "no shader '" + std::string(d.shader) + "'"};
            auto& l = launches.emplace_back();
            l.shader = blob;
            l.pc = d.pc;
            l.groups = d.groups;
            if (status s = bind(*node, *node, l.bind[2], l.pc.offs[2]); !s) return s;
            l.bind[0] = l.bind[1] = l.bind[2];
            for (std::size_t j = 0; j < 2; ++j)
                if (const tensor* src = node->src[j])
                    if (status s = bind(*src, *node, l.bind[j], l.pc.offs[j]); !s) return s;
        }
        if (launches.empty()) return {};

        st.wait_idle(); // the command buffer and the descriptor sets of the last graph are free again
        st.ready_descriptors(launches.size());
        std::vector<vk::DescriptorSetLayout> layouts(launches.size(), dev.set_layout);
        const auto sets = dev.device.allocateDescriptorSets(vk::DescriptorSetAllocateInfo(st.dpool, layouts));
        std::vector<vk::WriteDescriptorSet> writes;
        writes.reserve(3 * launches.size());
        for (std::size_t k = 0; k < launches.size(); ++k)
            for (std::uint32_t b = 0; b < 3; ++b)
                writes.emplace_back(sets[k], b, 0, vk::DescriptorType::eStorageBuffer, nullptr, launches[k].bind[b]);
        dev.device.updateDescriptorSets(writes, {});

        vk::CommandBuffer cmd = st.cmd;
        cmd.reset();
        cmd.begin(vk::CommandBufferBeginInfo(vk::CommandBufferUsageFlagBits::eOneTimeSubmit));
        // what the host or earlier transfers wrote is visible to the shaders
        const vk::MemoryBarrier in(vk::AccessFlagBits::eHostWrite | vk::AccessFlagBits::eTransferWrite,
                                   vk::AccessFlagBits::eShaderRead | vk::AccessFlagBits::eShaderWrite);
        cmd.pipelineBarrier(vk::PipelineStageFlagBits::eHost | vk::PipelineStageFlagBits::eTransfer,
                            vk::PipelineStageFlagBits::eComputeShader, {}, in, {}, {});
        const vulkan::spirv::blob* bound = nullptr; // runs of one shader bind its pipeline once
        for (std::size_t k = 0; k < launches.size(); ++k) {
            const auto& l = launches[k];
            if (l.shader != bound) {
                cmd.bindPipeline(vk::PipelineBindPoint::eCompute,
                                 dev.pipeline_for(l.shader->name, {l.shader->words, l.shader->n_words}));
                bound = l.shader;
            }
            cmd.bindDescriptorSets(vk::PipelineBindPoint::eCompute, dev.pipeline_layout, 0, sets[k], {});
            cmd.pushConstants(dev.pipeline_layout, vk::ShaderStageFlagBits::eCompute, 0, sizeof(l.pc), &l.pc);
            cmd.dispatch(l.groups[0], l.groups[1], l.groups[2]);
            // the next dispatch may read what this one wrote
            const vk::MemoryBarrier mb(vk::AccessFlagBits::eShaderWrite, vk::AccessFlagBits::eShaderRead | vk::AccessFlagBits::eShaderWrite);
            cmd.pipelineBarrier(vk::PipelineStageFlagBits::eComputeShader, vk::PipelineStageFlagBits::eComputeShader, {}, mb, {}, {});
        }
        // results visible to the host and to transfers
        const vk::MemoryBarrier out(vk::AccessFlagBits::eShaderWrite,
                                    vk::AccessFlagBits::eHostRead | vk::AccessFlagBits::eTransferRead);
        cmd.pipelineBarrier(vk::PipelineStageFlagBits::eComputeShader,
                            vk::PipelineStageFlagBits::eHost | vk::PipelineStageFlagBits::eTransfer, {}, out, {}, {});
        cmd.end();

        const std::uint64_t value = st.submitted + 1;
        vk::TimelineSemaphoreSubmitInfo ts(0, nullptr, 1, &value);
        vk::SubmitInfo si({}, {}, cmd, st.timeline);
        si.pNext = &ts;
        {
            std::lock_guard lk(dev.queue_mutex);
            dev.queue.submit(si);
        }
        st.submitted = value;
        return {};
    }

    vulkan_device dev_;
    std::unique_ptr<vulkan::detail::stream_state> s_;
};
static_assert(backend<vulkan_backend>);

inline bool vulkan_device::supports_op(const tensor& t) const {
    return vulkan::detail::supports(t, s_->feats);
}

inline result<vulkan_backend> vulkan_device::make_backend() const { return vulkan_backend::make(*this); }

} // namespace backplane
