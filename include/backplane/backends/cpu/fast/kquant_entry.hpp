#pragma once
// How the CPU backend reaches the K-quant kernels (weights q2_K ... q6_K, fast/kquant.hpp):
// through one table of entry points, filled when a translation unit of the program
// includes <backplane/backends/cpu/weight_kernels.hpp>. The kernels' code is then parsed only by
// the programs that ask for it, and <backplane/backplane.hpp> stays as cheap to include as
// it was before the K-quants. Until the table is filled, fast::mul_mat and
// fast::mul_mat_id report that no fast kernel applies to a node with K-quant weights, and
// the reference kernel computes it (the same results, within the quantization of b, at a
// fraction of the speed).
//
// The table is filled during static initialisation, before main, and never changes after:
// a plan that decided a node's kernel keeps that decision valid.

#include <backplane/backends/cpu/compute_params.hpp>
#include <backplane/backends/cpu/isa.hpp>
#include <backplane/core/error.hpp>
#include <backplane/core/tensor.hpp>
#include <backplane/core/types.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace backplane::cpu::fast {

namespace kquant {

using i64 = std::int64_t;

constexpr bool is_kquant(elem_type t) noexcept {
    return t == elem_type::q2_K || t == elem_type::q3_K || t == elem_type::q4_K || t == elem_type::q5_K ||
           t == elem_type::q6_K;
}

inline constexpr i64 rec_bytes = 384; ///< one super-block of b quantized for the kernels (kquant/plan.hpp)

} // namespace kquant

/// The K-quant kernels' entry points (fast/kquant.hpp defines them).
struct kquant_entry_points {
    /// mul_mat: whether the kernels take the node, their work buffer, thread p.ith's share.
    bool (*applies)(const tensor& dst) noexcept;
    std::size_t (*work_size)(const tensor& dst, int nth) noexcept;
    errc (*mul_mat)(const compute_params& p, tensor& dst) noexcept;

    /// mul_mat_id's experts (fast/mul_mat_id.hpp): the per-thread work that products of
    /// up to n_max gathered columns need with nth threads; `blocks` super-blocks of f32
    /// values at x quantized into the records at out, as the kernels of `level` read them
    /// for weights of type wtype; thread p.ith's share of dst = a x b with b's columns
    /// quantized so at qb, the threads' work at work.
    std::size_t (*expert_work_size)(const tensor& dst, int nth) noexcept;
    void (*quantize_records)(elem_type wtype, isa level, const float* x, kquant::i64 blocks,
                             std::byte* out) noexcept;
    errc (*multiply)(const compute_params& p, const tensor& a, tensor& dst, const std::byte* qb, std::byte* work,
                     isa level) noexcept;
};

/// The table; null until <backplane/backends/cpu/weight_kernels.hpp> is part of the program.
inline std::atomic<const kquant_entry_points*> kquant_kernels{nullptr};

/// The K-quant kernels when the program has them, else null.
inline const kquant_entry_points* kquant_entry() noexcept { return kquant_kernels.load(std::memory_order_acquire); }

} // namespace backplane::cpu::fast
