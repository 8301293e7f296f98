#pragma once
// compute_forward: one node on the host, dispatched by op to the kernel family that
// computes it (backends/cpu/kernels/, one family per header). The caller has checked
// supports_op and that every tensor has host data; each kernel computes only the share
// of rows that p assigns to this thread, so the same call serves one thread or a pool.

#include <backplane/backends/cpu/compute_params.hpp>
#include <backplane/backends/cpu/kernels/binary.hpp>
#include <backplane/backends/cpu/kernels/concat.hpp>
#include <backplane/backends/cpu/kernels/copy.hpp>
#include <backplane/backends/cpu/kernels/matmul.hpp>
#include <backplane/backends/cpu/kernels/rope.hpp>
#include <backplane/backends/cpu/kernels/rows.hpp>
#include <backplane/backends/cpu/kernels/unary.hpp>
#include <backplane/core/error.hpp>
#include <backplane/core/tensor.hpp>

namespace backplane::cpu {

/// Computes `node` from its sources (thread p.ith of p.nth). View ops and leafs compute
/// nothing; an op without a kernel leaves the node untouched (supports_op says false).
/// Returns errc::ok, or errc::out_of_range when the data asks for a read outside a
/// tensor (a get_rows index beyond the rows): such reads are never made.
[[nodiscard]] inline errc compute_forward(const compute_params& p, tensor& node) noexcept {
    switch (node.op) {
    case op_kind::none:
    case op_kind::view:
    case op_kind::reshape:
    case op_kind::permute:
    case op_kind::transpose:
        return errc::ok;
    case op_kind::dup:
    case op_kind::cont:
    case op_kind::cpy:
        kernels::copy(p, node);
        return errc::ok;
    case op_kind::add:
    case op_kind::sub:
    case op_kind::mul:
    case op_kind::div:
        kernels::binary(p, node);
        return errc::ok;
    case op_kind::scale:
    case op_kind::sqr:
    case op_kind::sqrt:
    case op_kind::silu:
    case op_kind::gelu:
    case op_kind::relu:
        kernels::unary(p, node);
        return errc::ok;
    case op_kind::sum_rows:
        kernels::sum_rows(p, node);
        return errc::ok;
    case op_kind::argmax:
        kernels::argmax(p, node);
        return errc::ok;
    case op_kind::norm:
    case op_kind::rms_norm:
        kernels::norm(p, node);
        return errc::ok;
    case op_kind::soft_max:
        kernels::soft_max(p, node);
        return errc::ok;
    case op_kind::mul_mat:
        kernels::mul_mat(p, node);
        return errc::ok;
    case op_kind::get_rows:
        return kernels::get_rows(p, node) ? errc::ok : errc::out_of_range;
    case op_kind::rope:
        kernels::rope(p, node);
        return errc::ok;
    case op_kind::concat:
        kernels::concat(p, node);
        return errc::ok;
    }
    return errc::ok;
}

} // namespace backplane::cpu
