#pragma once
// Fast mul_mat for quantized weights (a q8_0 / q4_0, b f32: quantized to q8_0 on the fly).
// STUB: the contract below is final; the kernels replace the bodies.
//
// Contract (shared with gemm.hpp, used by fast/mul_mat.hpp):
//  * quant_applies(dst): true when gemm() handles this node (types and layouts). Must be a
//    pure function of the node, so every thread of the node takes the same path.
//  * quant_work_size(dst, nth): bytes of the work buffer shared by the node's nth threads.
//  * quant_mul_mat(p, dst): computes thread p.ith's share; may fill p.wdata cooperatively and call
//    p.barrier() (every thread of the node must then call it the same number of times).

#include <backplane/backends/cpu/compute_params.hpp>
#include <backplane/core/error.hpp>
#include <backplane/core/tensor.hpp>

#include <cstddef>

namespace backplane::cpu::fast {

inline bool quant_applies(const tensor&) noexcept { return false; }
inline std::size_t quant_work_size(const tensor&, int) noexcept { return 0; }
inline errc quant_mul_mat(const compute_params&, tensor&) noexcept { return errc::not_supported; }

} // namespace backplane::cpu::fast
