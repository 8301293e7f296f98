#pragma once
// What the CUDA backend computes: every node its op defines (core/op_traits.hpp, whose
// header lists the rules), in any layout, except flash_attn_ext with heads longer than
// its kernel holds in shared memory (D_k + D_v above flash_attn_max_head_floats), and
// quantization into q8_K (the activation type, which it has no quantizer for: a copy or
// set_rows into it from another type) and into iq4_xs, tq1_0, tq2_0 and the lattice
// i-quants (the scheduler places those nodes on the CPU). Every quantized type is read
// (get_rows, mul_mat, mul_mat_id, copies to a float type); every type is copied or
// concatenated as it is. The
// kernels (kernels/*.cuh) read every tensor through its byte strides, so views,
// permutations, broadcasting and strided rows need no copies on the host side; the fast
// paths (contiguous rows, tensor cores, cuBLAS) are chosen per node inside the kernels.

#include <backplane/backends/cuda/kernels/quants.hpp>
#include <backplane/core/op_traits.hpp>
#include <backplane/core/tensor.hpp>

#include <cstdint>

namespace backplane::cuda {

/// The most floats of a q row and a value row together (D_k + D_v) that flash_attn_ext's
/// kernel (kernels/flash_attn.cuh) holds in shared memory, beside a block of weights:
/// 32 KiB in all.
inline constexpr std::int64_t flash_attn_max_head_floats = 8192 - 128;

/// The quantized types the CUDA kernels quantize into (copy.cuh, set_rows.cuh): q8_0,
/// q4_0, and quant::quantizable's q4_1 ... q6_K; not q8_K, iq4_xs, tq1_0, tq2_0 and the
/// lattice i-quants, whose result is computed only as its source's bits (a copy of a
/// type to itself, concat).
constexpr bool quantizes_into(elem_type t) noexcept {
    return t == elem_type::q8_0 || t == elem_type::q4_0 || quant::quantizable(t);
}

/// The types the CUDA kernels read as values: the non-quantized ones, q8_0, q4_0 and
/// quant::extended's (every other quantized type).
constexpr bool reads(elem_type t) noexcept {
    return !is_quantized(t) || t == elem_type::q8_0 || t == elem_type::q4_0 || quant::extended(t);
}

/// What the CUDA kernels narrow from a node its op defines: flash_attn_ext's longest
/// heads and quantization into the types above (the scheduler places those on another
/// backend).
constexpr bool supports_defined_op(const tensor& t) noexcept {
    if (t.op == op_kind::none || is_view_op(t.op)) return true; // computes nothing
    const bool as_bits = t.op == op_kind::concat || (is_copy(t.op) && t.src[0]->type == t.type);
    if (!as_bits) {
        if (is_quantized(t.type) && !quantizes_into(t.type)) return false;
        for (const tensor* s : t.src)
            if (s != nullptr && !reads(s->type)) return false;
    }
    return t.op != op_kind::flash_attn_ext || t.src[0]->ne[0] + t.src[2]->ne[0] <= flash_attn_max_head_floats;
}

/// Whether the CUDA kernels compute t (views and leafs compute nothing).
inline bool supports_op(const tensor& t) noexcept { return is_defined(t) && supports_defined_op(t); }

} // namespace backplane::cuda
