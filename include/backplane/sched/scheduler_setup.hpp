#pragma once
// What the scheduler's constructors check and make before any graph (sched/scheduler.hpp):
// the parameters, one compute buffer type per backend, the weight copy batches, and the
// errors they throw (backplane::error and no other exception, docs/scheduler.md).

#include <backplane/core/concepts.hpp>
#include <backplane/core/error.hpp>
#include <backplane/memory/buffer.hpp>
#include <backplane/memory/graph_alloc.hpp>
#include <backplane/sched/backend_set.hpp>
#include <backplane/sched/scheduler_params.hpp>

#include <algorithm>
#include <cstddef>
#include <exception>
#include <new>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

namespace backplane::detail {

/// Throws backplane::error for n_copies outside [1, max_copies] or more memory caps than
/// backends.
inline void check_scheduler_params(const scheduler_params& p, std::size_t n_backends) {
    if (p.n_copies < 1 || p.n_copies > scheduler_params::max_copies)
        throw error("scheduler: n_copies must be between 1 and " + std::to_string(scheduler_params::max_copies) +
                        " (scheduler_params::max_copies), got " + std::to_string(p.n_copies),
                    errc::invalid_argument);
    if (p.memory_caps.size() > n_backends)
        throw error("scheduler: memory_caps has " + std::to_string(p.memory_caps.size()) + " entries for " +
                        std::to_string(n_backends) + " backends",
                    errc::invalid_argument);
}

/// One compute buffer per backend, of its override's type (scheduler_params::buffer_types)
/// or its default one. Throws for an empty set, more overrides than backends, or an
/// override its backend does not support.
template <backend_set Set>
graph_allocator make_compute_allocator(const Set& s, const scheduler_params& p) {
    if (s.size() == 0) throw error("scheduler: needs at least one backend", errc::invalid_argument);
    if (p.buffer_types.size() > s.size())
        throw error("scheduler: " + std::to_string(p.buffer_types.size()) + " buffer type overrides for " +
                        std::to_string(s.size()) + " backend(s)",
                    errc::invalid_argument);
    std::vector<buffer_type_ref> types;
    types.reserve(s.size());
    for (std::size_t i = 0; i < s.size(); ++i) {
        const bool given = i < p.buffer_types.size() && p.buffer_types[i].has_value();
        if (given && !s.supports_buffer_type(i, *p.buffer_types[i]))
            throw error("scheduler: backend " + std::to_string(i) + " ('" + std::string(s.name(i)) +
                            "') does not support buffer type '" + std::string(p.buffer_types[i]->name()) +
                            "' given for its compute buffers (scheduler_params::buffer_types)",
                        errc::invalid_argument);
        types.push_back(given ? *p.buffer_types[i] : s.buffer_type(i));
    }
    return graph_allocator(std::move(types));
}

/// Appends each backend's compute buffer type (fixed for the scheduler's life) and name;
/// throws when the last backend's type is not host memory.
template <backend_set Set>
void read_compute_types(const Set& s, const graph_allocator& galloc, std::vector<buffer_type_ref>& types,
                        std::vector<std::string_view>& names) {
    const std::size_t nb = s.size();
    for (std::size_t b = 0; b < nb; ++b) {
        types.push_back(galloc.buffer_type(static_cast<int>(b)));
        names.push_back(s.name(b));
    }
    if (!types[nb - 1].is_host())
        throw error("scheduler: the last backend ('" + std::string(s.name(nb - 1)) +
                        "') must use host memory (it runs graph inputs and whatever no other backend supports)",
                    errc::invalid_argument);
}

/// Readies the backends of a scheduler with parameters `p`: their events (one per
/// pipeline slot), then the cost policy's profiles of them, then device timing for a
/// trace. Throws backplane::error with the status of what failed.
template <class Policy, backend_set Set>
void start_backends(Set& s, Policy& policy, const scheduler_params& p) {
    if (status st = s.init_events(p.n_copies); !st) throw error(st.message(), st.code());
    if constexpr (Policy::uses_costs)
        if (status st = policy.attach(s); !st) throw error(st.message(), st.code());
    if (p.trace)
        for (std::size_t b = 0; b < s.size(); ++b) (void)s.set_timing(b, true);
}

/// Per backend: scheduler_params::weight_copy_batch with policy_default resolved (0 under
/// the greedy policy; under the cost policy an eighth of the device's memory, at least
/// 64 MiB).
template <backend_set Set>
std::vector<std::size_t> weight_copy_batches(const Set& s, std::size_t batch, bool uses_costs) {
    std::vector<std::size_t> out(s.size(), batch);
    if (batch == scheduler_params::policy_default)
        for (std::size_t b = 0; b < s.size(); ++b)
            out[b] = uses_costs ? std::max(std::size_t{64} << 20, s.memory(b).total / 8) : 0;
    return out;
}

/// Called in a constructor's handler: rethrows a backplane::error as it is, and any other
/// standard exception as one (errc::alloc_failed for no memory, else errc::failed).
[[noreturn]] inline void rethrow_as_scheduler_error() {
    try {
        throw;
    } catch (const error&) {
        throw;
    } catch (const std::bad_alloc&) {
        throw error("scheduler: out of host memory constructing the scheduler", errc::alloc_failed);
    } catch (const std::exception& e) {
        throw error(std::string("scheduler: constructing the scheduler failed: ") + e.what(), errc::failed);
    }
}

/// The backends of a scheduler known at compile time: at least one, the last a host
/// backend. `ok` names the checks, so that a class can require them.
template <class... Bs>
struct static_backends {
    static_assert(sizeof...(Bs) > 0, "a scheduler needs at least one backend");
    static_assert(host_backend<std::tuple_element_t<sizeof...(Bs) - 1, std::tuple<Bs...>>>,
                  "the last backend of a scheduler must be a host backend (its buffer type is host memory): it "
                  "runs graph inputs and every op no other backend supports");
    static constexpr bool ok = true;
};

} // namespace backplane::detail
