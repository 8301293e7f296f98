#pragma once
// The cost placement policy (docs/scheduler.md, "Placement policies"):
//
//     cpu_backend cpu;  vulkan_backend gpu(dev);
//     cost_scheduler sched(cost_policy{}, {}, gpu, cpu);   // calibrates once, cached on disk
//     sched.alloc_graph(g);  sched.compute(g);
//     std::puts(sched.describe(2).c_str());               // each node's estimate per backend
//
// When the scheduler is constructed, the policy finds each backend's profile in its cost
// model (given, else read from the cache file, else measured by calibrate() and written
// back to the cache). Each graph is then first placed by the greedy passes, and the
// optimiser (sched/placement_search.hpp) searches for a cheaper assignment of every node
// those passes did not pin (user assignments, memory the node already has, graph inputs
// stay). The estimate of the plan it returns is never above the greedy plan's.

#include <backplane/sched/backend_set.hpp>
#include <backplane/sched/calibrate.hpp>
#include <backplane/sched/cost_model.hpp>
#include <backplane/sched/placement.hpp>
#include <backplane/sched/placement_search.hpp>
#include <backplane/sched/scheduler.hpp>

#include <span>
#include <string>
#include <utility>
#include <vector>

namespace backplane {

struct cost_policy_params {
    /// The calibration cache: read when the scheduler starts, written when something was
    /// measured. Empty: no file.
    std::string cache_path = cost_model::default_path();
    /// Measure backends and links the model (with the cache) lacks; false: they get the
    /// default profile.
    bool calibrate = true;
    calibration_options calibration = {};
};

class cost_policy {
public:
    static constexpr bool uses_costs = true;

    cost_policy() : cost_policy(cost_model{}, cost_policy_params{}) {}
    explicit cost_policy(cost_policy_params p) : cost_policy(cost_model{}, std::move(p)) {}
    /// Profiles and links in `m` take precedence over the cache file's.
    explicit cost_policy(cost_model m, cost_policy_params p = {}) : model_(std::move(m)), params_(std::move(p)) {}

    [[nodiscard]] const cost_model& model() const noexcept { return model_; }

    /// Resolves the profile of every backend of `set` and the links between their buffer
    /// types (see the header comment). A cache that cannot be read or written is not an
    /// error (the figures are then measured, or defaults); a malformed cache file is
    /// ignored and rewritten.
    template <backend_set Set>
    status attach(Set& set) {
        if (!params_.cache_path.empty()) {
            cost_model cached;
            if (cached.load(params_.cache_path)) {
                for (const auto& p : cached.profiles())
                    if (model_.find(p.key) == nullptr) model_.set(p);
                for (const auto& l : cached.links())
                    if (model_.find_link(l.from, l.to) == nullptr) model_.set_link(l);
            }
        }
        if (params_.calibrate && calibrate(model_, set, params_.calibration) && !params_.cache_path.empty())
            (void)model_.save(params_.cache_path); // a read-only home only costs a recalibration
        profiles_.clear();
        type_names_.clear();
        for (std::size_t i = 0; i < set.size(); ++i) {
            const std::string key = backend_key(set.name(i), set.description(i));
            const backend_profile* p = model_.find(key);
            backend_profile q = p != nullptr ? *p : backend_profile{};
            q.key = key;
            profiles_.push_back(std::move(q));
            type_names_.emplace_back(set.buffer_type(i).name());
        }
        return {};
    }

    /// Backend b's profile (after attach).
    [[nodiscard]] const backend_profile& profile(std::size_t b) const { return profiles_.at(b); }
    [[nodiscard]] double node_seconds(std::size_t b, const tensor& t) const { return profiles_[b].seconds(t); }
    [[nodiscard]] double split_seconds(std::size_t b) const { return profiles_[b].split_latency; }
    /// The link from memory of buffer type `from` (named; host memory or not) to backend
    /// b's memory: the model's, else the one from the host backend's memory when `from`
    /// is host memory, else the default.
    [[nodiscard]] link_profile link(std::string_view from, bool from_host, std::size_t b) const {
        if (const link_profile* l = model_.find_link(from, type_names_[b])) return *l;
        if (from_host && !type_names_.empty())
            if (const link_profile* l = model_.find_link(type_names_.back(), type_names_[b])) return *l;
        link_profile d;
        d.from = std::string(from);
        d.to = type_names_[b];
        return d;
    }

    [[nodiscard]] detail::placement_result optimize(const detail::placement_problem& p,
                                                    std::span<const std::int32_t> greedy) const {
        detail::placement_search search(p);
        return search.run(greedy);
    }
    /// The estimate of an assignment (per node) of problem p.
    [[nodiscard]] double evaluate(const detail::placement_problem& p, std::span<const std::int32_t> assign) const {
        detail::placement_search search(p);
        return search.evaluate(assign);
    }

private:
    cost_model model_;
    cost_policy_params params_;
    std::vector<backend_profile> profiles_;
    std::vector<std::string> type_names_;
};

/// A scheduler over backends Bs... with the cost policy.
template <backend... Bs>
using cost_scheduler = policy_scheduler<cost_policy, Bs...>;

} // namespace backplane
