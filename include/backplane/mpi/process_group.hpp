#pragma once
// backplane::mpi::process_group: the processes of a communicator as the processes one meta
// device spans (tensor parallelism across processes, docs/distributed.md).
//
//     auto procs = mpi::process_group::world().value();              // every rank
//     auto meta = meta_device::make({any_device::borrow(cpu_device::instance())},
//                                   {.split = my_split, .processes = procs}).value();
//
// Each rank's meta device then holds its own slice of the weights and computes its
// part of every node; partial sums are all-reduced over the ranks by the communicator's
// all-reduce (the same bits on every rank), and split outputs are gathered so that every
// rank reads whole values.

#include <backplane/backends/meta/processes.hpp>
#include <backplane/mpi/communicator.hpp>

#include <memory>
#include <span>
#include <utility>

namespace backplane::mpi {

class process_group final : public meta::process_group {
public:
    explicit process_group(communicator c) noexcept : c_(std::move(c)) {}

    /// Over all ranks of the job (a new communicator).
    [[nodiscard]] static result<std::shared_ptr<process_group>> world(comm_options o = {}) {
        auto c = communicator::world(o);
        if (!c) return c.error();
        return std::make_shared<process_group>(std::move(*c));
    }

    [[nodiscard]] int rank() const noexcept override { return c_.rank(); }
    [[nodiscard]] int size() const noexcept override { return c_.size(); }
    status all_reduce_sum(std::span<float> data) override { return c_.all_reduce_sum(data); }
    status all_gather(std::span<const std::byte> mine, std::span<std::byte> all) override {
        return c_.all_gather(mine, all);
    }
    [[nodiscard]] communicator& comm() noexcept { return c_; }

private:
    communicator c_;
};

} // namespace backplane::mpi
