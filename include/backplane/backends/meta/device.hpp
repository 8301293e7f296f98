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

#include <cstdint>
#include <memory>
#include <span>
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
        sh->total = static_cast<int>(sh->parts.size());
        if (sh->params.processes)
            if (status s = span_processes(*sh); !s) return s;
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

    /// Devices in this process (its parts).
    [[nodiscard]] int n_devices() const noexcept { return static_cast<int>(sh_->parts.size()); }
    /// Devices of all processes (n_devices() without meta_params::processes): the n the
    /// split callback and the split states see.
    [[nodiscard]] int n_total_devices() const noexcept { return sh_->total; }
    /// The global number of part(0) (processes.hpp).
    [[nodiscard]] int first_device() const noexcept { return sh_->first; }
    [[nodiscard]] const any_device& part(int d) const { return sh_->parts.at(static_cast<std::size_t>(d)); }
    [[nodiscard]] const meta::meta_params& params() const noexcept { return sh_->params; }
    [[nodiscard]] const std::shared_ptr<meta::detail::shared>& state() const noexcept { return sh_; }

private:
    explicit meta_device(std::shared_ptr<meta::detail::shared> sh) noexcept : sh_(std::move(sh)) {}

    // Every process holds as many parts; this one's are global devices [rank L, rank L + L).
    static status span_processes(meta::detail::shared& sh) {
        meta::process_group& pg = *sh.params.processes;
        const std::int32_t mine = static_cast<std::int32_t>(sh.parts.size());
        std::vector<std::int32_t> counts(static_cast<std::size_t>(pg.size()));
        if (status s = pg.all_gather(std::as_bytes(std::span(&mine, 1)), std::as_writable_bytes(std::span(counts))); !s)
            return {s.code(), "meta_device: exchanging the part counts of the processes: " + s.message(), s.native()};
        for (std::size_t r = 0; r < counts.size(); ++r)
            if (counts[r] != mine)
                return {errc::invalid_argument, "meta_device: process " + std::to_string(r) + " has " +
                                                    std::to_string(counts[r]) + " parts, process " +
                                                    std::to_string(pg.rank()) + " has " + std::to_string(mine) +
                                                    ": every process must have as many"};
        sh.total = mine * pg.size();
        if (sh.total > meta::max_devices)
            return {errc::invalid_argument, "meta_device: " + std::to_string(sh.total) + " devices over " +
                                                std::to_string(pg.size()) + " processes (at most " +
                                                std::to_string(meta::max_devices) + ")"};
        sh.first = mine * pg.rank();
        sh.description += " devices " + std::to_string(sh.first) + "-" + std::to_string(sh.first + mine - 1) + " of " +
                          std::to_string(sh.total) + " (process " + std::to_string(pg.rank()) + " of " +
                          std::to_string(pg.size()) + ")";
        return {};
    }
    std::shared_ptr<meta::detail::shared> sh_;
};

} // namespace backplane
