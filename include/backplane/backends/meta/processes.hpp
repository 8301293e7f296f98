#pragma once
// meta::process_group: the processes one meta device spans (tensor parallelism across
// processes, docs/distributed.md).
//
// Every process runs the same program (SPMD) and makes a meta device over its own parts,
// with the same split callback and the same process_group. The device then stands for
// all parts of all processes: process r holds global devices [r L, (r + 1) L) of the
// n L (L parts each). Split states are made for n L devices; each process places,
// plans and computes only its own devices' pieces; partial sums are summed over its own
// parts, then over the processes (all_reduce_sum); split graph outputs are gathered from
// all processes after a compute, so every process reads the whole value.
//
// backplane::mpi implements it over MPI (mpi/process_group.hpp); this header has no MPI
// in it. Every call is collective: all processes make it, in the same order.

#include <backplane/core/error.hpp>

#include <cstddef>
#include <span>

namespace backplane::meta {

class process_group {
public:
    virtual ~process_group() = default;
    /// This process's number, 0 to size() - 1.
    [[nodiscard]] virtual int rank() const noexcept = 0;
    [[nodiscard]] virtual int size() const noexcept = 0;
    /// Sums `data` over the processes in place; every process gets the same bits.
    virtual status all_reduce_sum(std::span<float> data) = 0;
    /// Every process's `mine` (the same size in each) into `all`, in rank order.
    virtual status all_gather(std::span<const std::byte> mine, std::span<std::byte> all) = 0;
};

} // namespace backplane::meta
