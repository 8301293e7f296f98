#pragma once
// The devices of examples/llama: the device to offload to (--device NAME, else the best
// GPU-like device of the registry) and, when the user named neither a device nor a layer
// count, whether it is worth it on this machine. That is decided from measured speeds,
// not from "a device exists": the device's and the CPU's calibrated profiles (the cost
// policy's calibration, cached on disk for the scheduler that follows) weighed over a
// prompt step and a generation step of the model (sched/offload_estimate.hpp). A device
// estimated slower than the CPU alone at either is skipped, with the figures.

#include "graph.hpp"

#include "../common/devices.hpp"

#include <backplane/runtime.hpp>
#include <backplane/sched/calibrate.hpp>
#include <backplane/sched/offload_estimate.hpp>

#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace llama {

/// Whether to offload, and the line that says why.
struct offload_advice {
    bool offload = false;
    std::string why;
};

/// The steps an offload is weighed over.
struct offload_question {
    std::filesystem::path model;
    int prompt_batch = 64; ///< tokens of a prompt step
    int n_ctx = 96;        ///< positions of the KV cache
    elem_type cache_type = elem_type::f32;
    bool flash_attn = false;
    int kv_pad = 32;
};

namespace detail {

/// The speeds of set's backend `dev` and host backend `host` from the cost model at `cache`
/// (measured and written back where missing). A link the calibration does not measure
/// (the device reads host memory in place) costs nothing.
template <class Set>
offload_profiles measured_profiles(Set& set, std::size_t dev, std::size_t host, const std::string& cache) {
    cost_model m;
    if (!cache.empty())
        (void)m.load(cache);
    if (calibrate(m, set) && !cache.empty())
        (void)m.save(cache); // a read-only home only costs a recalibration next time
    const auto profile = [&](std::size_t i) {
        const backend_profile* p = m.find(backend_key(set.name(i), set.description(i)));
        return p != nullptr ? *p : backend_profile{};
    };
    const auto link = [&](std::size_t from, std::size_t to) {
        if (const link_profile* l = m.find_link(set.buffer_type(from).name(), set.buffer_type(to).name()))
            return *l;
        link_profile free_link;
        if (set.supports_buffer_type(to, set.buffer_type(from))) {
            free_link.latency = 0;
            free_link.bandwidth = 1e30;
        }
        return free_link;
    };
    return {profile(dev), profile(host), link(host, dev), link(dev, host)};
}

inline std::string ms(double seconds) {
    char b[32];
    std::snprintf(b, sizeof b, "%.3g ms", 1e3 * seconds);
    return b;
}

} // namespace detail

/// Weighs offloading q.model to `device` against the CPU alone (see the header comment):
/// a prompt step of q.prompt_batch tokens and a generation step, each estimated with
/// every node the device computes on it and with every node on `cpu`.
inline result<offload_advice> advise_offload(any_backend& device, any_backend& cpu, const offload_question& q) {
    std::vector<backend_ref> refs{static_cast<backend_ref>(device), static_cast<backend_ref>(cpu)};
    dynamic_backend_set set(std::move(refs));
    const std::string cache = cost_model::default_path();
    const offload_profiles speeds = detail::measured_profiles(set, 0, 1, cache);

    auto m = model::load(q.model, placement{}); // over the file's mapping: nothing copied
    if (!m)
        return m.error();
    const int batch = std::max(1, std::min(q.prompt_batch, q.n_ctx - 1));
    auto c = kv_cache::make(**m, q.n_ctx, q.cache_type, q.flash_attn);
    if (!c)
        return c.error();
    offload_estimate prompt, gen;
    try {
        const auto supports = [&device](const tensor& t) { return device.supports_op(t); };
        prompt = estimate_offload(build_step(**m, **c, 0, batch, false, q.kv_pad)->g, speeds, supports);
        gen = estimate_offload(build_step(**m, **c, batch, 1, false, q.kv_pad)->g, speeds, supports);
    } catch (const error& e) {
        return status(e.code(), e.what());
    }
    offload_advice a;
    a.offload = prompt.offload_wins() && gen.offload_wins();
    const std::string name(device.name());
    a.why = name + " (" + std::string(device.device().description()) + ") " +
            (a.offload ? "used: estimated faster" : "skipped: estimated slower") + " than the CPU alone: a prompt step of " +
            std::to_string(batch) + " tokens " + detail::ms(prompt.offload_seconds) + " with it, " +
            detail::ms(prompt.host_seconds) + " without; a generated token " + detail::ms(gen.offload_seconds) +
            " with it, " + detail::ms(gen.host_seconds) + " without (calibrated speeds" +
            (cache.empty() ? "" : ", cached in " + cache) + ")" +
            (a.offload ? "" : "; --device " + name + " offloads anyway");
    return a;
}

} // namespace llama
