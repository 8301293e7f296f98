#pragma once
// backplane::mpi::pipeline: pipeline parallelism across processes. Consecutive splits
// of one graph run on different ranks; what crosses a rank boundary goes as non-blocking
// point-to-point messages (mailbox.hpp) that overlap the sender's compute.
//
//     auto world = mpi::communicator::world().value();
//     cpu_backend cpu;
//     auto pipe = mpi::pipeline::make(world, cpu, cpu).value();    // every rank
//     // stage k's weights in pipe->buffer_type(k): layers [k L / n, (k + 1) L / n)
//     ...allocate, load the same weights on every rank (each keeps its stage's)...
//     pipe->alloc_graph(g); ...write the inputs on every rank...; pipe->compute(g);
//     pipe->read(*logits, out.data(), 0, bytes);                    // every rank
//
// SPMD: every rank builds the same graph and makes the same calls. Stage k runs on rank
// k: its backend is that rank's `local` backend; the scheduler of each rank sees the
// others' stages as stand-ins (pipeline_set.hpp) and places, splits and allocates the
// graph exactly as every other rank does. Ops run where their weights are, so the
// layers of stage k (its weights in buffer_type(k)) run on rank k. Graph inputs live on
// the host backend of every rank (each rank writes them alike) and reach each stage
// without a message.
//
// Each message carries a hash of its sender's plan and the number of its compute: a rank
// that placed the graph otherwise (another graph, a stage backend that supports other
// ops) or skipped a compute is an error where its message arrives, never a tensor taken
// for another. A rank that died or stopped taking part makes the others fail with
// errc::timed_out within the communicator's timeout.

#include <backplane/core/error.hpp>
#include <backplane/core/graph.hpp>
#include <backplane/core/tensor.hpp>
#include <backplane/erased/backend_ref.hpp>
#include <backplane/memory/buffer.hpp>
#include <backplane/memory/host_buffer.hpp>
#include <backplane/memory/tensor_io.hpp>
#include <backplane/mpi/communicator.hpp>
#include <backplane/mpi/mailbox.hpp>
#include <backplane/mpi/pipeline_set.hpp>
#include <backplane/mpi/remote_memory.hpp>
#include <backplane/sched/scheduler.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace backplane::mpi {

class pipeline {
public:
    using scheduler_type = basic_scheduler<pipeline_set>;

    /// A pipeline over c's ranks, stage k on rank k. `local`: this rank's stage backend;
    /// `host`: a backend that computes in host memory (graph inputs; ops no stage
    /// supports), which may be `local` itself. Both must outlive the pipeline.
    /// Collective: every rank of c calls it. errc::invalid_argument for a host backend
    /// whose memory is not host memory; the scheduler's errors.
    [[nodiscard]] static result<std::unique_ptr<pipeline>> make(const communicator& c, backend_ref local, backend_ref host,
                                                              scheduler_params params = {}) {
        if (!host.buffer_type().is_host())
            return status(errc::invalid_argument, "mpi::pipeline: the host backend ('" + std::string(host.name()) +
                                                      "') must compute in host memory");
        auto comm = communicator::from(c.native(), c.options());
        if (!comm) return comm.error();
        auto box = mailbox::make(*comm);
        if (!box) return box.error();
        try {
            return std::unique_ptr<pipeline>(new pipeline(std::move(*comm), std::move(*box), local, host, std::move(params)));
        } catch (const error& e) {
            return status(e.code(), e.what());
        } catch (const std::bad_alloc&) {
            return status(errc::alloc_failed, "mpi::pipeline: out of host memory");
        }
    }

    [[nodiscard]] int rank() const noexcept { return comm_.rank(); }
    [[nodiscard]] int n_stages() const noexcept { return comm_.size(); }

    /// Stage k's memory: allocate stage k's weights (and its KV cache) in it, on every
    /// rank. On rank k it is the stage backend's memory (its own buffer type when that is
    /// host memory, so it is told apart from plain host memory); on the others it holds
    /// no bytes (remote_memory.hpp).
    [[nodiscard]] buffer_type_ref buffer_type(int stage) const {
        return stage == rank() ? local_type_ : buffer_type_ref(*remote_[static_cast<std::size_t>(stage)]);
    }

    /// The scheduler (plans, describe(), splits). Allocate and compute through the
    /// pipeline, which numbers the computes and tells the messages the plan's hash.
    [[nodiscard]] scheduler_type& scheduler() noexcept { return *sched_; }

    /// The scheduler's alloc_graph; the messages of the graph's runs carry its plan's
    /// hash. Every rank allocates the same graphs.
    [[nodiscard]] status alloc_graph(const graph& g) {
        if (!failure_.ok()) return failure_;
        allocated_ = nullptr;
        if (status s = sched_->alloc_graph(g); !s) return note(std::move(s));
        plan_hash_ = hash_plan();
        allocated_ = &g;
        return {};
    }

    /// Computes g (allocating it first unless it is the graph allocated last) and waits
    /// for this rank's backends; the messages it sent may still be on their way.
    [[nodiscard]] status compute(const graph& g) {
        if (status s = compute_async(g); !s) {
            (void)sched_->synchronize();
            return s;
        }
        return sched_->synchronize();
    }
    /// compute, returning once this rank's part is queued (with scheduler_params::n_copies
    /// > 1, the next graph's first stages overlap this one's last).
    [[nodiscard]] status compute_async(const graph& g) {
        if (!failure_.ok()) return failure_;
        if (allocated_ != &g)
            if (status s = alloc_graph(g); !s) return s;
        sched_->backends().start_run(plan_hash_);
        return note(sched_->compute_async(g));
    }

    /// Waits for this rank's backends and for every message it sent to be received.
    [[nodiscard]] status synchronize() {
        if (!failure_.ok()) return failure_;
        status s = sched_->synchronize();
        status f = box_->flush();
        return note(s ? f : s);
    }

    /// The rank that computes t in the last graph, or holds it (a weight); -1 when every
    /// rank has it (graph inputs, what the host computes, plain host memory).
    [[nodiscard]] int owner(const tensor& t) const {
        const int b = sched_->backend_of(t);
        if (b >= 0) return b == n_stages() ? -1 : b;
        if (t.buffer == nullptr) return -1;
        const buffer_type_ref bt = t.buffer->type();
        for (int k = 0; k < n_stages(); ++k)
            if (bt == buffer_type(k)) return k;
        return -1;
    }

    /// Bytes [offset, offset + size) of t into dst on every rank, from the rank that owns
    /// it (owner()). Collective: every rank calls it for the same tensor.
    [[nodiscard]] status read(const tensor& t, void* dst, std::size_t offset, std::size_t size) {
        if (!failure_.ok()) return failure_;
        const int from = owner(t);
        if (status s = sched_->synchronize(); !s) return s;
        if (from < 0) return tensor_get(t, dst, offset, size);
        // the owner's bytes and whether it could read them, in one broadcast
        std::vector<std::byte> msg(size + 1);
        if (from == rank()) {
            const status s = tensor_get(t, msg.data(), offset, size);
            msg[size] = std::byte{s.ok() ? std::uint8_t{1} : std::uint8_t{0}};
            if (status b = comm_.broadcast(msg, from); !b) return note(std::move(b));
            if (!s) return s;
        } else {
            if (status b = comm_.broadcast(msg, from); !b) return note(std::move(b));
            if (msg[size] != std::byte{1})
                return {errc::failed, "mpi::pipeline::read: rank " + std::to_string(from) + " could not read '" + t.name +
                                          "' (its own status says why)"};
        }
        if (size != 0) std::memcpy(dst, msg.data(), size);
        return {};
    }

    /// The error that ended the pipeline (ok while it works): the first failure of its
    /// communication, after which every call returns it at once.
    [[nodiscard]] const status& failure() const noexcept { return failure_; }

    /// What this rank sent and received between stages.
    [[nodiscard]] mailbox_stats stats() const { return box_->stats(); }
    /// The communicator of the pipeline's collectives (plans, reads).
    [[nodiscard]] communicator& comm() noexcept { return comm_; }

private:
    pipeline(communicator comm, std::unique_ptr<mailbox> box, backend_ref local, backend_ref host, scheduler_params params)
        : comm_(std::move(comm)), box_(std::move(box)) {
        for (int k = 0; k < comm_.size(); ++k) remote_.push_back(std::make_unique<remote_buffer_type>(k));
        // this rank's stage memory: the backend's, told apart from plain host memory
        local_type_ = local.buffer_type().is_host() ? buffer_type_ref(own_host_memory_) : local.buffer_type();
        pipeline_set::memory_types types{{}, cpu_buffer_type::instance()};
        for (int k = 0; k < comm_.size(); ++k) types.stage_types.push_back(buffer_type(k));
        sched_ = std::make_unique<scheduler_type>(pipeline_set(*box_, local, host, std::move(types)), std::move(params));
    }

    // s, kept as the pipeline's end when the communication failed.
    status note(status s) {
        if (!s && failure_.ok() && (!comm_.failure().ok() || !box_->failure().ok())) failure_ = s;
        return s;
    }

    // A hash of the plan: its splits, their backends and their inputs.
    std::uint64_t hash_plan() const {
        std::uint64_t h = 1469598103934665603ull;
        const auto mix = [&h](std::uint64_t v) { h = (h ^ v) * 1099511628211ull; };
        mix(sched_->n_splits());
        for (std::size_t k = 0; k < sched_->n_splits(); ++k) {
            const split_info s = sched_->split_at(k);
            for (std::uint64_t v : {std::uint64_t{s.backend}, std::uint64_t{s.first}, std::uint64_t{s.last},
                                    std::uint64_t{s.inputs.size()}})
                mix(v);
            for (const tensor* in : s.inputs) {
                mix(static_cast<std::uint64_t>(sched_->backend_of(*in)));
                mix(in->nbytes());
            }
        }
        return h;
    }

    communicator comm_;
    std::unique_ptr<mailbox> box_;
    cpu_buffer_type own_host_memory_; // this rank's stage memory when its backend's is host memory
    std::vector<std::unique_ptr<remote_buffer_type>> remote_;
    buffer_type_ref local_type_ = own_host_memory_;
    std::unique_ptr<scheduler_type> sched_;
    const graph* allocated_ = nullptr;
    std::uint64_t plan_hash_ = 0;
    status failure_;
};

} // namespace backplane::mpi
