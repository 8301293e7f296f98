#pragma once
// The quantized mul_mat kernels (fast/quant.hpp) of q4_1, q5_0, q5_1, iq4_nl and mxfp4
// weights: instantiated here and handed to the CPU backend through quant_more_jobs when
// the program starts. <backplane/backends/cpu/weight_kernels.hpp> includes this header, so that
// the programs that ask for the K-quants' kernels get these too, and <backplane/backplane.hpp>
// parses neither (every weight type's kernels cost about 0.04 s of each translation
// unit's compile time).

#include <backplane/backends/cpu/compute_params.hpp>
#include <backplane/backends/cpu/fast/quant.hpp>
#include <backplane/backends/cpu/isa.hpp>
#include <backplane/core/tensor.hpp>

#include <atomic>
#include <cstddef>

namespace backplane::cpu::fast {

namespace quant {

/// Step 2 for the five types (quant_jobs_fn).
inline void more_type_jobs(const compute_params& p, const plan& pl, const tensor& a, tensor& dst, std::byte* qb,
                           std::byte* panels, isa level) noexcept {
    with_weight_type(pl.wtype, [&](auto type) {
        quant_type_jobs<decltype(type)::value>(p, pl, a, dst, qb, panels, level);
    });
}

/// Set before main, in every program that includes this header (one initialisation for
/// the program: an inline variable).
inline const bool more_types_registered =
    (quant_more_jobs.store(&more_type_jobs, std::memory_order_release), true);

} // namespace quant

} // namespace backplane::cpu::fast
