#pragma once
// backplane::mpi::pipeline_set: the backends of a pipeline across processes as the
// scheduler of one rank sees them (pipeline.hpp): stage 0 .. n-1, stage k on rank k,
// then the host backend. It models routed_backend_set (sched/backend_set.hpp).
//
// This rank's stage is its own backend; every other stage stands for the backend of its
// rank: it supports the ops this rank's stage supports (a rank whose stage supports
// others plans otherwise, which its messages reveal: below), owns a remote_buffer_type,
// and computes nothing here. Every rank places and splits the
// graph alike, so every rank runs the same list of copies:
//   * from the host (graph inputs, which every rank writes alike): each rank copies to
//     its own stage and its host, and nowhere else;
//   * from this rank's stage: sent to the stage's rank (to every other rank when the
//     host reads it, and copied here too);
//   * from another rank's stage: received from that rank when this rank's stage or the
//     host reads it; else nothing.
// Each message carries the hash of its sender's plan and the number of its compute: a
// rank that planned otherwise, or skipped a compute, is an error where it receives.
// Every stage answers alike which memory it reads: its own stage's, and plain host
// memory when this rank's stage backend reads it (weights of another stage, or another
// stage's results, always cross as copies).

#include <backplane/core/error.hpp>
#include <backplane/core/graph.hpp>
#include <backplane/core/tensor.hpp>
#include <backplane/erased/backend_ref.hpp>
#include <backplane/memory/buffer.hpp>
#include <backplane/memory/tensor_copy.hpp>
#include <backplane/memory/tensor_io.hpp>
#include <backplane/mpi/mailbox.hpp>
#include <backplane/sched/backend_set.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace backplane::mpi {

class pipeline_set {
public:
    /// What the stages' memory is on this rank: stage_types[k] for stage k (this rank's
    /// stage memory, or a remote_buffer_type), host_type for the host's compute buffers.
    struct memory_types {
        std::vector<buffer_type_ref> stage_types;
        buffer_type_ref host_type;
    };

    /// `local`: this rank's stage backend; `host`: a backend computing in host memory
    /// (may be `local` itself). `box` and what `types` names must outlive the set.
    pipeline_set(mailbox& box, backend_ref local, backend_ref host, memory_types types)
        : box_(&box), me_(static_cast<std::size_t>(box.rank())), n_(static_cast<std::size_t>(box.size())),
          real_(std::vector<backend_ref>{local, host}), types_(std::move(types)) {
        for (std::size_t k = 0; k < n_; ++k)
            names_.push_back(k == me_ ? std::string(local.name()) + "@rank" + std::to_string(k) : "rank" + std::to_string(k));
        names_.push_back(std::string(host.name()) + "@host");
    }

    [[nodiscard]] std::size_t size() const noexcept { return n_ + 1; }

    [[nodiscard]] std::string_view name(std::size_t i) const { return names_[i]; }
    [[nodiscard]] std::string_view description(std::size_t i) const {
        return is_real(i) ? real_.description(real(i)) : std::string_view(names_[i]);
    }
    [[nodiscard]] device_kind kind(std::size_t i) const { return real_.kind(is_real(i) ? real(i) : 0); }
    [[nodiscard]] memory_info memory(std::size_t i) const { return is_real(i) ? real_.memory(real(i)) : memory_info{}; }
    [[nodiscard]] buffer_type_ref buffer_type(std::size_t i) const {
        return i == n_ ? types_.host_type : types_.stage_types[i];
    }
    // every stage supports what this rank's stage supports
    [[nodiscard]] bool supports_op(std::size_t i, const tensor& t) const { return real_.supports_op(i == n_ ? 1 : 0, t); }
    [[nodiscard]] bool supports_defined_op(std::size_t i, const tensor& t) const {
        return real_.supports_defined_op(i == n_ ? 1 : 0, t);
    }
    [[nodiscard]] bool supports_buffer_type(std::size_t i, const buffer_type_ref& bt) const {
        const bool plain_host = bt.is_host() && !is_stage_memory(bt);
        if (i == n_) return plain_host;
        return bt == types_.stage_types[i] || (plain_host && real_.supports_buffer_type(0, bt));
    }
    [[nodiscard]] bool offload_op(std::size_t, const tensor&) const { return false; }

    [[nodiscard]] status compute(std::size_t i, graph_view g) { return is_real(i) ? real_.compute(real(i), g) : status{}; }
    [[nodiscard]] status synchronize(std::size_t i) { return is_real(i) ? real_.synchronize(real(i)) : status{}; }
    [[nodiscard]] bool copy_async(std::size_t i, const tensor& src, tensor& dst) {
        return is_real(i) && real_.copy_async(real(i), src, dst);
    }
    [[nodiscard]] status init_events(int n_copies) { return real_.init_events(n_copies); }
    [[nodiscard]] bool has_events(std::size_t i) const { return is_real(i) && real_.has_events(real(i)); }
    [[nodiscard]] bool set_timing(std::size_t i, bool on) { return is_real(i) && real_.set_timing(real(i), on); }
    [[nodiscard]] std::optional<device_span> last_compute_time(std::size_t i) const {
        return is_real(i) ? real_.last_compute_time(real(i)) : std::nullopt;
    }
    [[nodiscard]] status record(std::size_t i, int c) { return is_real(i) ? real_.record(real(i), c) : status{}; }
    // another rank's stage runs nothing here: nothing to wait for, nothing waits
    [[nodiscard]] status wait(std::size_t i, std::size_t j, int c) {
        return is_real(i) && is_real(j) ? real_.wait(real(i), real(j), c) : status{};
    }
    [[nodiscard]] status event_sync(std::size_t i, int c) { return is_real(i) ? real_.event_sync(real(i), c) : status{}; }

    // -- copies between processes (see the header comment) ------------------------------

    [[nodiscard]] copy_route route(std::size_t a, std::size_t b) const {
        const bool here = b == me_ || b == n_;
        if (a == n_) return here ? copy_route::local : copy_route::none;
        if (a == me_) return b == n_ ? copy_route::send_and_local : copy_route::send;
        return here ? copy_route::receive : copy_route::none;
    }

    /// What every message of the next run carries: the plan's hash and the run's
    /// number, which the receiver checks against its own (pipeline.hpp).
    void start_run(std::uint64_t plan_hash) noexcept {
        header_.plan = plan_hash;
        header_.run += 1;
    }

    /// src (this rank's stage's, computed) to the rank of stage b, or to every other rank
    /// when b is the host.
    status send(std::size_t, std::size_t b, const tensor& src) {
        std::vector<std::byte> bytes(sizeof(header) + src.nbytes());
        std::memcpy(bytes.data(), &header_, sizeof(header));
        if (status s = tensor_get(src, bytes.data() + sizeof(header), 0, src.nbytes()); !s) return s;
        if (b != n_) return box_->send(static_cast<int>(b), std::move(bytes));
        const std::size_t last = me_ + 1 == n_ ? n_ - 2 : n_ - 1; // the last other rank
        for (std::size_t k = 0; k < n_; ++k)
            if (k != me_)
                if (status s = box_->send(static_cast<int>(k), k == last ? std::move(bytes) : bytes); !s) return s;
        return {};
    }

    /// dst (this rank's copy of a tensor of stage a) from the rank of stage a.
    status receive(std::size_t a, std::size_t, tensor& dst) {
        auto got = box_->receive(static_cast<int>(a), sizeof(header) + dst.nbytes());
        if (!got) return got.error();
        if (status s = check_header(a, got->data()); !s) return s;
        const std::byte* bytes = got->data() + sizeof(header);
        if (dst.is_contiguous()) return tensor_set(dst, bytes, 0, dst.nbytes());
        status first;
        for_each_byte_run(dst, [&](std::size_t off, std::size_t len) {
            if (first) first = tensor_set(dst, bytes + off, off, len);
        });
        return first;
    }

private:
    [[nodiscard]] bool is_real(std::size_t i) const noexcept { return i == me_ || i == n_; }
    [[nodiscard]] std::size_t real(std::size_t i) const noexcept { return i == n_ ? 1 : 0; }
    [[nodiscard]] bool is_stage_memory(const buffer_type_ref& bt) const {
        for (const buffer_type_ref& t : types_.stage_types)
            if (t == bt) return true;
        return false;
    }

    struct header {
        std::uint64_t plan = 0;
        std::uint64_t run = 0;
    };

    status check_header(std::size_t from, const std::byte* p) const {
        header h;
        std::memcpy(&h, p, sizeof h);
        const std::string who = "mpi::pipeline: rank " + std::to_string(me_) + " got from rank " + std::to_string(from);
        if (h.plan != header_.plan)
            return {errc::failed, who + " a tensor of another plan: every rank must build the same graph, and the " +
                                      "stage backends must support the same ops"};
        if (h.run != header_.run)
            return {errc::failed, who + " a tensor of its compute " + std::to_string(h.run) + " in this rank's compute " +
                                      std::to_string(header_.run) + ": every rank must make the same calls"};
        return {};
    }

    mailbox* box_;
    std::size_t me_, n_;
    header header_;
    dynamic_backend_set real_; // [this rank's stage, the host]
    memory_types types_;
    std::vector<std::string> names_;
};

static_assert(routed_backend_set<pipeline_set>);

} // namespace backplane::mpi
