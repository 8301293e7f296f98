#pragma once
// The calls generic code makes on a backend for an optional capability, each with the
// fallback that is correct where the backend lacks it (a backend that cannot offload
// never asks; one without a device-side copy reports false; one without device timing
// reports nothing). Written once, read both by backend_vtable_for<B> (erased/backend_ref.hpp)
// and by the scheduler's tuple_backend_set (sched/backend_set.hpp), so the two faces of
// a backend cannot disagree about a fallback.

#include <backplane/core/concepts.hpp>
#include <backplane/core/tensor.hpp>

#include <optional>
#include <string_view>
#include <type_traits>

namespace backplane::detail {

template <class B>
bool offload_of(const B& b, const tensor& t) {
    if constexpr (offload_backend<B>)
        return static_cast<bool>(b.offload_op(t));
    else
        return false;
}

/// supports_op(t) for a node t that its op defines (narrowing_backend), without judging
/// the op's rule again where B says what it narrows.
template <class B>
bool supports_defined_of(const B& b, const tensor& t) {
    if constexpr (narrowing_backend<B>)
        return static_cast<bool>(b.supports_defined_op(t));
    else
        return static_cast<bool>(b.supports_op(t));
}

template <class B>
bool copy_async_of(B& b, const tensor& src, tensor& dst) {
    if constexpr (async_backend<B>)
        return b.copy_tensor_async(src, dst);
    else
        return false;
}

/// The description of b's device; its name when device() returns a temporary (whose
/// description would not outlive the call).
template <class B>
std::string_view description_of(const B& b) {
    if constexpr (std::is_lvalue_reference_v<decltype(b.device())>)
        return b.device().description();
    else
        return b.name();
}

/// Turns device timing on or off; false when B cannot time on the device.
template <class B>
bool set_timing_of(B& b, bool on) {
    if constexpr (timed_backend<B>) {
        b.set_timing(on);
        return true;
    } else {
        return (void)b, (void)on, false;
    }
}

template <class B>
std::optional<device_span> last_compute_time_of(const B& b) {
    if constexpr (timed_backend<B>)
        return b.last_compute_time();
    else
        return (void)b, std::nullopt;
}

} // namespace backplane::detail
