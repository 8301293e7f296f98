#pragma once
// meta_device: one device made of N devices of any backends (the same or mixed).
//
//     std::vector<any_device> parts = {any_device::borrow(cpu_device::instance()),
//                                      any_device::borrow(cpu_device::instance())};
//     auto meta = meta_device::make(parts, {.split = my_split}).value();
//     auto weights = alloc_tensors(wctx, meta.buffer_type(), buffer_usage::weights);
//     auto be = meta.make_backend().value();
//     graph_allocator ga(be.buffer_type());
//     ga.alloc_graph(g);  ...write inputs...  be.compute(g);  ...read outputs...
//
// It models the device concept from its parts: memory is the sum, ops are supported
// when every part supports them, its buffer type is the meta buffer type (memory.hpp),
// and its backend (backend.hpp) computes a graph on all parts at once. A part may appear
// twice (two backends on one CPU: two "devices" for tests and for splitting a CPU's
// cores). Copies of a meta_device share their state.

#include <backplane/backends/meta/memory.hpp>
#include <backplane/core/concepts.hpp>
#include <backplane/erased/any.hpp>

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace backplane {

class meta_backend;

class meta_device {
public:
    /// A meta device over `parts` (1 to meta::max_devices). Fails (invalid_argument) for
    /// an empty or too long list.
    [[nodiscard]] static result<meta_device> make(std::vector<any_device> parts, meta::meta_params params = {}) {
        if (parts.empty() || parts.size() > static_cast<std::size_t>(meta::max_devices))
            return status(errc::invalid_argument, "meta_device: " + std::to_string(parts.size()) +
                                                      " devices (1 to " + std::to_string(meta::max_devices) + ")");
        auto sh = std::make_shared<meta::detail::shared>();
        sh->name = params.name.empty() ? "Meta" : params.name;
        sh->description = sh->name + "(";
        for (std::size_t i = 0; i < parts.size(); ++i) {
            if (i) sh->description += ", ";
            sh->description += parts[i].name();
            sh->part_types.push_back(parts[i].buffer_type());
        }
        sh->description += ")";
        sh->parts = std::move(parts);
        sh->params = std::move(params);
        return meta_device(std::move(sh));
    }

    [[nodiscard]] std::string_view name() const noexcept { return sh_->name; }
    /// "Meta(CPU, Vulkan0)".
    [[nodiscard]] std::string_view description() const noexcept { return sh_->description; }
    /// The first part's kind.
    [[nodiscard]] device_kind kind() const { return sh_->parts.front().kind(); }
    /// The parts' memory added up (a part listed twice counts twice).
    [[nodiscard]] memory_info memory() const {
        memory_info m;
        for (const auto& p : sh_->parts) {
            const memory_info pm = p.memory();
            m.free += pm.free;
            m.total += pm.total;
        }
        return m;
    }
    /// Nothing beyond the minimum: transfers go through the meta buffer, not a stream.
    [[nodiscard]] device_caps caps() const noexcept { return {}; }
    [[nodiscard]] const meta_buffer_type& buffer_type() const noexcept { return sh_->buft; }
    /// Every part supports t (shapes as on one device; the plan checks each device's piece).
    [[nodiscard]] bool supports_op(const tensor& t) const {
        for (const auto& p : sh_->parts)
            if (!p.supports_op(t)) return false;
        return true;
    }
    [[nodiscard]] bool supports_buffer_type(const buffer_type_ref& bt) const noexcept {
        return bt == buffer_type_ref(sh_->buft);
    }
    /// A backend over new backends of every part.
    [[nodiscard]] result<meta_backend> make_backend() const;

    [[nodiscard]] int n_devices() const noexcept { return static_cast<int>(sh_->parts.size()); }
    [[nodiscard]] const any_device& part(int d) const { return sh_->parts.at(static_cast<std::size_t>(d)); }
    [[nodiscard]] const meta::meta_params& params() const noexcept { return sh_->params; }
    [[nodiscard]] const std::shared_ptr<meta::detail::shared>& state() const noexcept { return sh_; }

private:
    explicit meta_device(std::shared_ptr<meta::detail::shared> sh) noexcept : sh_(std::move(sh)) {}
    std::shared_ptr<meta::detail::shared> sh_;
};

} // namespace backplane
