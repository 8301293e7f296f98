#pragma once
// Fast mul_mat for float weights (a f32 / f16 / bf16, b f32 / f16 / bf16).
// STUB: the contract below is final; the kernels replace the bodies.
//
// Contract (shared with quant.hpp, used by fast/mul_mat.hpp):
//  * gemm_applies(dst): true when gemm() handles this node (types and layouts). Must be a
//    pure function of the node, so every thread of the node takes the same path.
//  * gemm_work_size(dst, nth): bytes of the work buffer shared by the node's nth threads.
//  * gemm(p, dst): computes thread p.ith's share; may fill p.wdata cooperatively and call
//    p.barrier() (every thread of the node must then call it the same number of times).

#include <backplane/backends/cpu/compute_params.hpp>
#include <backplane/core/error.hpp>
#include <backplane/core/tensor.hpp>

#include <cstddef>

namespace backplane::cpu::fast {

inline bool gemm_applies(const tensor&) noexcept { return false; }
inline std::size_t gemm_work_size(const tensor&, int) noexcept { return 0; }
inline errc gemm(const compute_params&, tensor&) noexcept { return errc::not_supported; }

} // namespace backplane::cpu::fast
