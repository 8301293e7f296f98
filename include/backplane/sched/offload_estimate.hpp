#pragma once
// Whether a device is worth offloading a graph to, decided from measured speeds: the
// graph's time with the nodes the device computes on the device (their weights and state
// already in its memory) and the rest on the host, against the whole graph on the host,
// both from a cost model's calibrated profiles (sched/cost_model.hpp, sched/calibrate.hpp).
//
//     cost_model m;  calibrate(m, set);     // the device's and the host's profiles
//     offload_estimate e = estimate_offload(g, {.device = *m.find(dev_key), .host = *m.find(cpu_key),
//                                               .to_device = ..., .to_host = ...}, supports);
//     if (e.offload_wins()) ...             // load the layers onto the device
//
// The estimate walks the graph in order. Each node costs its side's profile (view ops cost
// nothing and live with their source); each change of side starts a split (that side's
// split latency); a tensor made on one side and read on the other is copied once per run
// over the link; graph inputs (leafs flagged input) live on the host, other leafs (weights,
// caches) with the node that reads them; outputs made on the device are read back. It
// answers "device or not" before anything is loaded; the scheduler still places every
// node itself (docs/scheduler.md).

#include <backplane/core/graph.hpp>
#include <backplane/core/op_traits.hpp>
#include <backplane/core/tensor.hpp>
#include <backplane/sched/cost_model.hpp>

#include <cstddef>
#include <functional>
#include <unordered_map>
#include <unordered_set>
#include <utility>

namespace backplane {

/// The speeds an offload estimate weighs.
struct offload_profiles {
    backend_profile device;
    backend_profile host;
    link_profile to_device; ///< host memory to the device's
    link_profile to_host;   ///< the device's memory to the host's
};

/// A graph's estimated time on the host alone and with a device (see the header comment).
struct offload_estimate {
    double host_seconds = 0;      ///< every node on the host
    double offload_seconds = 0;   ///< the device's nodes there, the rest on the host, the copies
    std::size_t device_nodes = 0; ///< nodes the device computes
    std::size_t host_nodes = 0;   ///< nodes left on the host (what the device refuses)
    std::size_t copies = 0;       ///< tensors copied between the two per run

    /// True when the device is estimated strictly faster.
    [[nodiscard]] bool offload_wins() const noexcept { return offload_seconds < host_seconds; }
};

namespace detail {

/// The tensor whose memory t is (a view's source, followed to the end).
inline const tensor* memory_root(const tensor* t) noexcept {
    while (t->view_src != nullptr) t = t->view_src;
    return t;
}

} // namespace detail

/// Estimates g's time on the host alone and with the nodes `device_supports` accepts on the
/// device (see the header comment).
inline offload_estimate estimate_offload(const graph& g, const offload_profiles& p,
                                         const std::function<bool(const tensor&)>& device_supports) {
    offload_estimate e;
    std::unordered_map<const tensor*, bool> made_on_device; // per computed node
    std::unordered_set<const tensor*> copied[2];            // [to the host, to the device]
    int side = -1;                                          // 0 host, 1 device
    const auto copy = [&](const tensor& t, bool to_device) {
        if (!copied[to_device].insert(detail::memory_root(&t)).second) return;
        ++e.copies;
        e.offload_seconds += (to_device ? p.to_device : p.to_host).seconds(static_cast<double>(t.nbytes()));
    };
    for (const tensor* n : g.nodes()) {
        if (is_view_op(n->op)) continue; // computes nothing; readers follow it to its memory
        const bool dev = device_supports(*n);
        e.host_seconds += p.host.seconds(*n);
        e.offload_seconds += (dev ? p.device : p.host).seconds(*n);
        ++(dev ? e.device_nodes : e.host_nodes);
        if (side != static_cast<int>(dev)) {
            e.offload_seconds += (dev ? p.device : p.host).split_latency;
            side = dev;
        }
        for (const tensor* s : n->src) {
            if (s == nullptr) continue;
            const tensor* root = detail::memory_root(s);
            const auto made = made_on_device.find(root);
            const bool there = made != made_on_device.end() ? made->second
                               : root->has_flag(tensor_flag::input) ? false
                                                                     : dev; // weights and caches
            if (there != dev) copy(*s, dev);
        }
        made_on_device[n] = dev;
    }
    e.host_seconds += e.host_nodes + e.device_nodes > 0 ? p.host.split_latency : 0.0;
    for (const tensor* n : g.nodes())
        if (n->has_flag(tensor_flag::output)) {
            const auto made = made_on_device.find(detail::memory_root(n));
            if (made != made_on_device.end() && made->second) copy(*n, false);
        }
    return e;
}

} // namespace backplane
