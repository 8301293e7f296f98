#pragma once
// Routes a mul_mat node to the fast kernel family for its weight type, or reports that
// none applies (the caller then runs the reference kernel): K-quants (q2_K ... q6_K) to
// kquant.hpp through the table of kquant_entry.hpp (when the program has included
// <backplane/backends/cpu/weight_kernels.hpp>), the other quantized types to quant.hpp (q8_0,
// q4_0; q4_1, q5_0, q5_1, iq4_nl and mxfp4 when the program has included that header
// too), float weights to gemm.hpp.

#include <backplane/backends/cpu/compute_params.hpp>
#include <backplane/backends/cpu/fast/gemm.hpp>
#include <backplane/backends/cpu/fast/kquant_entry.hpp>
#include <backplane/backends/cpu/fast/quant.hpp>
#include <backplane/core/error.hpp>
#include <backplane/core/tensor.hpp>

#include <cstddef>

namespace backplane::cpu::fast {

/// True when a fast kernel computes this mul_mat node.
inline bool mul_mat_applies(const tensor& dst) noexcept {
    if (kquant::is_kquant(dst.src[0]->type)) {
        const kquant_entry_points* k = kquant_entry();
        return k != nullptr && k->applies(dst);
    }
    return is_quantized(dst.src[0]->type) ? quant_applies(dst) : gemm_applies(dst);
}

/// Work buffer bytes the node needs with nth threads (0 when no fast kernel applies).
inline std::size_t mul_mat_work_size(const tensor& dst, int nth) noexcept {
    if (!mul_mat_applies(dst)) return 0;
    if (kquant::is_kquant(dst.src[0]->type)) return kquant_entry()->work_size(dst, nth);
    return is_quantized(dst.src[0]->type) ? quant_work_size(dst, nth) : gemm_work_size(dst, nth);
}

/// Thread p.ith's share of the node. Call only when mul_mat_applies(dst).
template <class = void>
inline errc mul_mat(const compute_params& p, tensor& dst) noexcept {
    if (kquant::is_kquant(dst.src[0]->type)) {
        const kquant_entry_points* k = kquant_entry();
        return k != nullptr ? k->mul_mat(p, dst) : errc::not_supported;
    }
    return is_quantized(dst.src[0]->type) ? quant_mul_mat(p, dst) : gemm(p, dst);
}

} // namespace backplane::cpu::fast
