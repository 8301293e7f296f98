#pragma once
// The NCCL collective: partial sums of a meta device's CUDA parts all-reduced by NCCL on
// the parts' own streams (docs/meta.md, "Collectives"). Shipped with backplane::cuda when
// CMake finds NCCL (BACKPLANE_CUDA_NCCL=1: nccl.h and libnccl, in the CUDA Toolkit here).
//
//     auto meta = meta_device::make(cuda_parts, {.split = split,
//                                                .make_collective = cuda::nccl_collective::factory()});
//
// In one process the parts' communicators come from ncclCommInitAll. Across processes
// (a meta device with meta_params::processes, every part a CUDA device) the ranks'
// communicators share one NCCL unique id, made by process 0 and broadcast over MPI
// (mpi/nccl.hpp); the collective then sums over every device of every process, and the
// meta backend sends nothing through host memory (collective::spans_processes).
//
// A meta header (it implements meta::collective) that lives with the CUDA backend; the
// layer check places it in the meta layer.

#include <backplane/backends/cuda/backend.hpp>
#include <backplane/backends/cuda/device.hpp>
#include <backplane/backends/meta/collective.hpp>
#include <backplane/backends/meta/memory.hpp>

#include <nccl.h>

#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace backplane::cuda {

/// A status for an NCCL result: errc::device_error naming the call.
inline status nccl_check(const char* what, ncclResult_t r) {
    if (r == ncclSuccess) return {};
    return {errc::device_error, std::string("nccl: ") + what + ": " + ncclGetErrorString(r), static_cast<std::int32_t>(r)};
}

/// The CUDA ordinals of `devs`, or none when one of them is not a CUDA device.
inline std::optional<std::vector<int>> cuda_ordinals(std::span<const any_device> devs) {
    std::vector<int> ordinals;
    for (const any_device& d : devs) {
        const auto* c = d.get_if<cuda_device>();
        if (c == nullptr) return std::nullopt;
        ordinals.push_back(c->index());
    }
    return ordinals;
}

class nccl_collective final : public meta::collective {
public:
    /// One communicator per CUDA device in `ordinals`, all in this process (ncclCommInitAll;
    /// NCCL refuses a device listed twice).
    [[nodiscard]] static result<std::unique_ptr<nccl_collective>> make(std::span<const int> ordinals) {
        std::vector<ncclComm_t> comms(ordinals.size(), nullptr);
        if (status s = nccl_check("ncclCommInitAll",
                                  ncclCommInitAll(comms.data(), static_cast<int>(comms.size()), ordinals.data()));
            !s)
            return s;
        return std::unique_ptr<nccl_collective>(new nccl_collective(std::move(comms), false));
    }

    /// Takes communicators made elsewhere (one per part, in part order); `across`: they
    /// span the devices of several processes (mpi/nccl.hpp).
    [[nodiscard]] static std::unique_ptr<nccl_collective> adopt(std::vector<ncclComm_t> comms, bool across) {
        return std::unique_ptr<nccl_collective>(new nccl_collective(std::move(comms), across));
    }

    /// A meta_params::make_collective: NCCL when every part is a CUDA device and NCCL
    /// starts, else null (the meta backend then uses the generic collective).
    [[nodiscard]] static meta::collective_factory factory() {
        return [](std::span<const any_device> devs) -> std::unique_ptr<meta::collective> {
            auto ordinals = cuda_ordinals(devs);
            if (!ordinals) return nullptr;
            auto c = make(*ordinals);
            return c ? std::move(*c) : nullptr;
        };
    }

    nccl_collective(const nccl_collective&) = delete;
    nccl_collective& operator=(const nccl_collective&) = delete;
    ~nccl_collective() override {
        for (ncclComm_t c : comms_)
            if (c != nullptr) (void)ncclCommDestroy(c);
    }

    [[nodiscard]] std::string_view name() const noexcept override { return "nccl"; }
    [[nodiscard]] bool spans_processes() const noexcept override { return across_; }

    /// Queues one ncclAllReduce per part on its backend's stream, in one NCCL group.
    status all_reduce(meta::group& g, std::span<tensor* const> parts) override {
        const int n = g.size();
        if (static_cast<int>(parts.size()) != n || static_cast<std::size_t>(n) != comms_.size())
            return {errc::invalid_argument, "nccl all_reduce: " + std::to_string(parts.size()) + " tensors for " +
                                                std::to_string(comms_.size()) + " communicators"};
        for (int d = 0; d < n; ++d) {
            const tensor* p = parts[static_cast<std::size_t>(d)];
            if (p->type != elem_type::f32 || !p->is_contiguous() || p->ne != parts[0]->ne)
                return {errc::invalid_argument, "nccl all_reduce: " + backplane::detail::describe(p) +
                                                    " is not a contiguous f32 tensor shaped as the others"};
            if (g.backend(d).get_if<cuda_backend>() == nullptr)
                return {errc::invalid_argument, "nccl all_reduce: part " + std::to_string(d) + " is not a CUDA backend"};
        }
        ++stats_.calls;
        ++stats_.steps;
        const auto count = static_cast<std::size_t>(parts[0]->nelements());
        if (status s = nccl_check("ncclGroupStart", ncclGroupStart()); !s) return s;
        status first;
        for (int d = 0; d < n; ++d) {
            tensor* p = parts[static_cast<std::size_t>(d)];
            const cudaStream_t stream = g.backend(d).get_if<cuda_backend>()->native_stream();
            const status s = nccl_check("ncclAllReduce", ncclAllReduce(p->data, p->data, count, ncclFloat, ncclSum,
                                                                       comms_[static_cast<std::size_t>(d)], stream));
            if (!s && first.ok()) first = s;
        }
        if (status s = nccl_check("ncclGroupEnd", ncclGroupEnd()); !s) return s;
        // a ring moves 2 (n - 1) / n of the tensor per device
        stats_.bytes_moved += 2 * static_cast<std::uint64_t>(n - 1) * count * 4;
        return first;
    }

private:
    nccl_collective(std::vector<ncclComm_t> comms, bool across) noexcept : comms_(std::move(comms)), across_(across) {}
    std::vector<ncclComm_t> comms_;
    bool across_ = false;
};

} // namespace backplane::cuda
