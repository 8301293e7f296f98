#pragma once
// What a caller asks of a backend it makes through the erased face
// (any_device::make_backend, the registry's init_* functions), and what an erased backend
// says it can do (any_backend::caps()): plain values in a header of their own, light
// enough for the backend table (erased/backend_ref.hpp) to take abort_function from here.

#include <backplane/core/fusion_set.hpp>

#include <functional>

namespace backplane {

/// What any_backend::set_abort_callback takes (see abortable_backend): returns true to
/// abort the compute in progress.
using abort_function = std::function<bool()>;

/// How any_device::make_backend starts a backend. Every field applies where the backend
/// has the capability and is ignored where it does not (see any_backend::caps()).
struct backend_options {
    /// Threads of backends with a thread count (CPU, BLAS); 0: the backend's default.
    int n_threads = 0;
    /// Abort callback of backends that take one (CPU); empty: none.
    abort_function abort_callback = {};
    /// The fused groups of backends that fuse (CPU, Vulkan; core/fusion.hpp): all by
    /// default, fusion_set::none() for every node on its own.
    fusion_set fusions = {};
};

/// What a backend can do beyond the required minimum, known from its concept model.
struct backend_caps {
    bool async = false;          ///< set / get / copy tensors asynchronously
    bool events = false;         ///< events (device-side waits between streams)
    bool plans = false;          ///< graph plans (prepare once, compute many times)
    bool timing = false;         ///< device timestamps of computes
    bool offload = false;        ///< asks for ops on weights held elsewhere
    bool n_threads = false;      ///< a thread count (set_n_threads)
    bool abort_callback = false; ///< an abort callback (set_abort_callback)
    bool fusions = false;        ///< fused groups it can turn off (set_fusions)
};

} // namespace backplane
