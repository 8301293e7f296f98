#pragma once
// NCCL across processes: the collective of a meta device over several processes whose
// parts are all CUDA devices (docs/distributed.md, "NCCL").
//
//     auto procs = mpi::process_group::world().value();
//     auto meta = meta_device::make(cuda_parts, {.split = split, .make_collective = mpi::nccl_factory(procs),
//                                                .processes = procs});
//
// make_backend() then makes one NCCL communicator per part over all devices of all
// processes: process 0 makes the NCCL unique id, the communicator broadcasts it, and part
// d of process r joins as NCCL rank r L + d (the meta device's global device number).
// Partial sums are then all-reduced on the GPUs' streams, with nothing through host
// memory. The processes agree before and after: when one of them has a part that is not
// a CUDA device, or NCCL fails to start on one of them, every process falls back to the
// generic collective and the all-reduce through host memory.
//
// NCCL has no deadline of its own: a process that dies in the middle of an NCCL
// all-reduce leaves the others waiting in it (the MPI path fails with errc::timed_out).
// Needs backplane::cuda with NCCL (BACKPLANE_CUDA_NCCL) and backplane::mpi.

#include <backplane/backends/cuda/nccl.hpp>
#include <backplane/mpi/process_group.hpp>

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace backplane::mpi {

namespace detail {

// Whether every process says yes (a sum of flags).
inline bool all_agree(process_group& procs, bool yes) {
    std::int32_t flag = yes ? 1 : 0;
    if (!procs.comm().all_reduce_sum(std::span(&flag, 1))) return false;
    return flag == procs.size();
}

// Process 0's unique id on every process; false when process 0 could not make one.
inline bool shared_unique_id(process_group& procs, ncclUniqueId& id) {
    struct message {
        ncclUniqueId id;
        std::int32_t ok;
    } m{};
    if (procs.rank() == 0) m.ok = ncclGetUniqueId(&m.id) == ncclSuccess ? 1 : 0;
    if (!procs.comm().broadcast(std::as_writable_bytes(std::span(&m, 1)), 0) || m.ok != 1) return false;
    id = m.id;
    return true;
}

// This process's communicators, NCCL ranks first .. first + n - 1 of `total`.
inline std::vector<ncclComm_t> join(const ncclUniqueId& id, const std::vector<int>& ordinals, int first, int total) {
    std::vector<ncclComm_t> comms(ordinals.size(), nullptr);
    bool ok = ncclGroupStart() == ncclSuccess;
    for (std::size_t d = 0; ok && d < ordinals.size(); ++d)
        ok = cudaSetDevice(ordinals[d]) == cudaSuccess &&
             ncclCommInitRank(&comms[d], total, id, first + static_cast<int>(d)) == ncclSuccess;
    ok = ncclGroupEnd() == ncclSuccess && ok;
    if (!ok) {
        for (ncclComm_t c : comms)
            if (c != nullptr) (void)ncclCommDestroy(c);
        comms.clear();
    }
    return comms;
}

} // namespace detail

/// A meta_params::make_collective for a meta device over the processes of `procs` (see
/// the file comment). Collective: every process's make_backend() calls it.
[[nodiscard]] inline meta::collective_factory nccl_factory(std::shared_ptr<process_group> procs) {
    return [procs](std::span<const any_device> devs) -> std::unique_ptr<meta::collective> {
        const auto ordinals = cuda::cuda_ordinals(devs);
        if (!detail::all_agree(*procs, ordinals.has_value())) return nullptr;
        ncclUniqueId id{};
        if (!detail::shared_unique_id(*procs, id)) return nullptr;
        const int per = static_cast<int>(ordinals->size());
        auto comms = detail::join(id, *ordinals, per * procs->rank(), per * procs->size());
        if (!detail::all_agree(*procs, !comms.empty())) {
            for (ncclComm_t c : comms) (void)ncclCommDestroy(c);
            return nullptr;
        }
        return cuda::nccl_collective::adopt(std::move(comms), true);
    };
}

} // namespace backplane::mpi
