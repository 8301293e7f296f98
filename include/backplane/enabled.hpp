#pragma once
// enabled_backends: the backend types compiled into this program, as a std::tuple type,
// so code can be written once for whatever a build has:
//
//     using sched_t = backplane::with_enabled_backends<backplane::scheduler>; // scheduler<..., cpu_backend>
//     backplane::for_each_enabled_backend([]<class B>(std::type_identity<B>) { ... });
//
// CUDA, Vulkan and BLAS come first, each when its CMake target
// (backplane::blas, backplane::vulkan, backplane::cuda) is linked, which defines
// BACKPLANE_WITH_<NAME>=1; the CPU backend is always there, last (the order of a
// scheduler's backends: the host last). This header includes those backends' headers, so it costs
// what they cost to compile (the Vulkan and CUDA headers among them): it is not part of
// <backplane/backplane.hpp>.

#include <backplane/backends/cpu.hpp>

#if defined(BACKPLANE_WITH_BLAS) && BACKPLANE_WITH_BLAS
#include <backplane/backends/blas.hpp>
#endif
#if defined(BACKPLANE_WITH_VULKAN) && BACKPLANE_WITH_VULKAN
#include <backplane/backends/vulkan.hpp>
#endif
#if defined(BACKPLANE_WITH_CUDA) && BACKPLANE_WITH_CUDA
#include <backplane/backends/cuda.hpp>
#endif

#include <cstddef>
#include <string_view>
#include <tuple>
#include <type_traits>

namespace backplane {

// In the scheduler's priority order (as the registry lists them): CUDA, Vulkan, BLAS,
// then the CPU, always last, the host backend a scheduler ends with.
using enabled_backends = std::tuple<
#if defined(BACKPLANE_WITH_CUDA) && BACKPLANE_WITH_CUDA
    cuda_backend,
#endif
#if defined(BACKPLANE_WITH_VULKAN) && BACKPLANE_WITH_VULKAN
    vulkan_backend,
#endif
#if defined(BACKPLANE_WITH_BLAS) && BACKPLANE_WITH_BLAS
    blas_backend,
#endif
    cpu_backend>;

/// The names of enabled_backends' members, in order ("CUDA", "Vulkan", "BLAS", "CPU").
inline constexpr std::string_view enabled_backend_names[] = {
#if defined(BACKPLANE_WITH_CUDA) && BACKPLANE_WITH_CUDA
    "CUDA",
#endif
#if defined(BACKPLANE_WITH_VULKAN) && BACKPLANE_WITH_VULKAN
    "Vulkan",
#endif
#if defined(BACKPLANE_WITH_BLAS) && BACKPLANE_WITH_BLAS
    "BLAS",
#endif
    "CPU"};
static_assert(std::size(enabled_backend_names) == std::tuple_size_v<enabled_backends>);

namespace detail {
template <template <class...> class T, class Tuple>
struct apply_tuple;
template <template <class...> class T, class... Bs>
struct apply_tuple<T, std::tuple<Bs...>> {
    using type = T<Bs...>;
};
} // namespace detail

/// T<the enabled backends...>: with_enabled_backends<scheduler> is a scheduler over
/// every backend of this build, the CPU last.
template <template <class...> class T>
using with_enabled_backends = typename detail::apply_tuple<T, enabled_backends>::type;

/// True when B is one of the enabled backends.
template <class B>
inline constexpr bool is_enabled_backend = []<class... Bs>(std::type_identity<std::tuple<Bs...>>) {
    return (std::is_same_v<B, Bs> || ...);
}(std::type_identity<enabled_backends>{});

/// Calls f(std::type_identity<B>{}) for each enabled backend type B, in order.
template <class F>
constexpr void for_each_enabled_backend(F&& f) {
    [&]<class... Bs>(std::type_identity<std::tuple<Bs...>>) {
        (f(std::type_identity<Bs>{}), ...);
    }(std::type_identity<enabled_backends>{});
}

} // namespace backplane
