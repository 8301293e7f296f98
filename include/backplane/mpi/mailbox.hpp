#pragma once
// backplane::mpi::mailbox: the point-to-point messages of a pipeline across processes
// (pipeline.hpp), in the order both sides make them.
//
//     auto box = mpi::mailbox::make(world).value();       // collective
//     box->send(1, std::move(bytes));                      // returns at once
//     auto got = box->receive(0, n_bytes);                 // waits, at most the timeout
//
// A send takes the bytes and returns at once; a thread of the mailbox drives the
// message on while the caller computes (an MPI library moves a large message only when
// its sender calls into MPI), testing it more rarely the longer it waits, and hands the
// bytes back once delivered. Messages between two ranks are received in the order they
// were sent. Sends not delivered and receives not completed within the communicator's
// timeout fail the mailbox with errc::timed_out: a rank that died or stopped taking
// part. After a failure every call returns the same status.
//
// The mailbox has its own duplicate of the communicator's MPI communicator. One thread
// at a time sends and receives (errc::busy otherwise). Where MPI offers less than
// MPI_THREAD_SERIALIZED (a program that initialized it so), no thread is started, and
// messages move on when the caller sends, receives or flushes.

#include <backplane/core/detail/single_user.hpp>
#include <backplane/core/error.hpp>
#include <backplane/mpi/communicator.hpp>
#include <backplane/mpi/environment.hpp>

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace backplane::mpi {

/// What a mailbox moved since it was made.
struct mailbox_stats {
    std::uint64_t messages_sent = 0;
    std::uint64_t bytes_sent = 0;
    std::uint64_t messages_received = 0;
    std::uint64_t bytes_received = 0;
};

class mailbox {
public:
    using clock = std::chrono::steady_clock;

    /// A mailbox over c's ranks with c's timeout. Collective: every rank of c calls it.
    [[nodiscard]] static result<std::unique_ptr<mailbox>> make(const communicator& c) {
        if (!c.failure().ok()) return c.failure();
        std::unique_ptr<mailbox> box(new (std::nothrow) mailbox(c.rank(), c.size(), c.options().timeout));
        if (!box) return status(errc::alloc_failed, "mpi::mailbox: out of host memory");
        int provided = MPI_THREAD_SINGLE;
        {
            auto lock = detail::call_lock();
            if (const int rc = MPI_Comm_dup(c.native(), &box->comm_); rc != MPI_SUCCESS)
                return status(errc::failed, "mpi::mailbox: MPI_Comm_dup: " + detail::error_string(rc), rc);
            MPI_Comm_set_errhandler(box->comm_, MPI_ERRORS_RETURN);
            MPI_Query_thread(&provided);
        }
        if (provided >= MPI_THREAD_SERIALIZED) box->progress_ = std::thread([p = box.get()] { p->drive(); });
        return box;
    }

    mailbox(const mailbox&) = delete;
    mailbox& operator=(const mailbox&) = delete;
    /// Waits for the sends in flight (within the timeout), then stops its thread.
    ~mailbox() {
        (void)flush();
        {
            std::lock_guard g(m_);
            stop_ = true;
        }
        wake_.notify_all();
        if (progress_.joinable()) progress_.join();
        std::lock_guard g(m_);
        if (!failure_.ok() || communication_failed()) {
            // undelivered messages stay with MPI, their bytes for the process's life
            for (outgoing& o : out_) detail::comm_state::kept().push_back(std::move(o.bytes));
            detail::comm_state::kept().push_back(std::move(in_));
            return;
        }
        auto lock = detail::call_lock();
        int finalized = 0;
        MPI_Finalized(&finalized);
        if (!finalized) MPI_Comm_free(&comm_);
    }

    [[nodiscard]] int rank() const noexcept { return rank_; }
    [[nodiscard]] int size() const noexcept { return size_; }
    [[nodiscard]] std::chrono::milliseconds timeout() const noexcept { return timeout_; }

    /// Queues `bytes` for rank `peer` and returns at once (see the header comment).
    status send(int peer, std::vector<std::byte> bytes) {
        const auto use = user_.enter();
        if (!use) return backplane::detail::busy_status("mpi mailbox", "send");
        if (status s = check(peer, bytes.size(), "send"); !s) return s;
        outgoing o{std::move(bytes), MPI_REQUEST_NULL, clock::now() + timeout_, peer};
        int rc = MPI_SUCCESS;
        {
            auto lock = detail::call_lock();
            rc = MPI_Isend(o.bytes.data(), static_cast<int>(o.bytes.size()), MPI_BYTE, peer, tag, comm_, &o.req);
        }
        std::lock_guard g(m_);
        if (rc != MPI_SUCCESS) return fail_locked({errc::failed, where() + ": " + describe(o) + ": " + detail::error_string(rc), rc});
        stats_.messages_sent += 1;
        stats_.bytes_sent += o.bytes.size();
        out_.push_back(std::move(o)); // the vector's bytes stay where MPI reads them
        pause_ = min_pause;
        wake_.notify_one();
        if (!progress_.joinable()) return test_locked();
        return {};
    }

    /// Receives the oldest message from rank `peer` not yet received, which must be of
    /// `bytes` bytes: a view of the mailbox's buffer, valid until the next receive.
    result<std::span<const std::byte>> receive(int peer, std::size_t bytes) {
        const auto use = user_.enter();
        if (!use) return backplane::detail::busy_status("mpi mailbox", "receive");
        if (status s = check(peer, bytes, "receive"); !s) return s;
        // into a buffer of the mailbox: after a timeout, MPI may still write it
        if (in_.size() < bytes) in_.resize(bytes);
        const auto what = [&] { return "a receive of " + std::to_string(bytes) + " bytes from rank " + std::to_string(peer); };
        MPI_Request req = MPI_REQUEST_NULL;
        int rc = MPI_SUCCESS;
        {
            auto lock = detail::call_lock();
            rc = MPI_Irecv(in_.data(), static_cast<int>(bytes), MPI_BYTE, peer, tag, comm_, &req);
        }
        if (rc != MPI_SUCCESS) return fail({errc::failed, where() + ": " + what() + ": " + detail::error_string(rc), rc});
        const auto deadline = clock::now() + timeout_;
        for (unsigned spin = 0;; ++spin) {
            int done = 0, count = 0;
            MPI_Status st{};
            {
                auto lock = detail::call_lock();
                rc = MPI_Test(&req, &done, &st);
                if (rc == MPI_SUCCESS && done) MPI_Get_count(&st, MPI_BYTE, &count);
            }
            if (rc != MPI_SUCCESS) return fail({errc::failed, where() + ": " + what() + ": " + detail::error_string(rc), rc});
            if (done && static_cast<std::size_t>(count) != bytes)
                return fail({errc::failed, where() + ": " + what() + " got " + std::to_string(count) +
                                               " bytes: the ranks did not make the same calls"});
            if (done) break;
            if (clock::now() > deadline) {
                abandon(req);
                return fail({errc::timed_out, where() + ": " + what() + " did not complete within " +
                                                  std::to_string(timeout_.count()) +
                                                  " ms: that rank died, hangs, or did not make the same calls"});
            }
            if (spin >= 64) std::this_thread::yield();
        }
        std::lock_guard g(m_);
        if (!failure_.ok()) return failure_;
        stats_.messages_received += 1;
        stats_.bytes_received += bytes;
        return std::span<const std::byte>(in_.data(), bytes);
    }

    /// Waits until every queued send was delivered (within the timeout of each).
    status flush() {
        for (;;) {
            {
                std::lock_guard g(m_);
                if (status s = test_locked(); !s || out_.empty()) return s;
            }
            std::this_thread::yield();
        }
    }

    /// The error that ended this mailbox (ok while it works).
    [[nodiscard]] status failure() const {
        std::lock_guard g(m_);
        return failure_;
    }
    [[nodiscard]] mailbox_stats stats() const {
        std::lock_guard g(m_);
        return stats_;
    }

private:
    static constexpr int tag = 1;
    static constexpr std::chrono::microseconds min_pause{20}, max_pause{100};

    struct outgoing {
        std::vector<std::byte> bytes;
        MPI_Request req;
        clock::time_point deadline;
        int peer;
    };

    mailbox(int rank, int size, std::chrono::milliseconds timeout) : rank_(rank), size_(size), timeout_(timeout) {}

    [[nodiscard]] std::string where() const { return "rank " + std::to_string(rank_) + " of " + std::to_string(size_); }
    static std::string describe(const outgoing& o) {
        return "a send of " + std::to_string(o.bytes.size()) + " bytes to rank " + std::to_string(o.peer);
    }

    status check(int peer, std::size_t bytes, const char* what) const {
        if (peer < 0 || peer >= size_ || peer == rank_)
            return {errc::invalid_argument, std::string("mpi mailbox ") + what + ": rank " + std::to_string(peer) + " (" +
                                                where() + ")"};
        if (bytes > static_cast<std::size_t>(INT_MAX))
            return {errc::invalid_argument, std::string("mpi mailbox ") + what + ": over 2 GiB in one message"};
        return failure();
    }

    status fail(status s) {
        std::lock_guard g(m_);
        return fail_locked(std::move(s));
    }
    status fail_locked(status s) {
        if (failure_.ok()) failure_ = std::move(s);
        if (failure_.code() == errc::timed_out) detail::failed_flag().store(true);
        return failure_;
    }

    // A timed-out receive: cancelled, and its buffer kept if MPI does not let it go.
    void abandon(MPI_Request& req) {
        auto lock = detail::call_lock();
        MPI_Cancel(&req);
        const auto until = clock::now() + std::chrono::milliseconds(100);
        int done = 0;
        while (!done && clock::now() < until) MPI_Test(&req, &done, MPI_STATUS_IGNORE);
        if (!done) detail::comm_state::kept().push_back(std::move(in_));
        in_.clear();
    }

    // Tests the sends in flight (m_ held): delivered ones are dropped, one past its
    // deadline fails the mailbox.
    status test_locked() {
        if (!failure_.ok()) return failure_;
        const auto now = clock::now();
        for (auto it = out_.begin(); it != out_.end();) {
            int done = 0, rc = MPI_SUCCESS;
            {
                auto lock = detail::call_lock();
                rc = MPI_Test(&it->req, &done, MPI_STATUS_IGNORE);
            }
            if (rc != MPI_SUCCESS) return fail_locked({errc::failed, where() + ": " + describe(*it) + ": " + detail::error_string(rc), rc});
            if (done) {
                it = out_.erase(it);
                pause_ = min_pause;
                continue;
            }
            if (now > it->deadline)
                return fail_locked({errc::timed_out, where() + ": " + describe(*it) + " was not received within " +
                                                         std::to_string(timeout_.count()) +
                                                         " ms: that rank died, hangs, or did not make the same calls"});
            ++it;
        }
        return {};
    }

    // The mailbox's thread: tests the sends in flight, more rarely while nothing moves.
    void drive() {
        std::unique_lock lk(m_);
        while (!stop_) {
            if (out_.empty() || !failure_.ok()) {
                wake_.wait(lk);
                continue;
            }
            (void)test_locked();
            wake_.wait_for(lk, pause_);
            pause_ = std::min(pause_ * 2, max_pause);
        }
    }

    MPI_Comm comm_ = MPI_COMM_NULL;
    int rank_, size_;
    std::chrono::milliseconds timeout_;
    backplane::detail::single_user user_; // the thread that sends and receives
    std::vector<std::byte> in_;           // what receives land in

    mutable std::mutex m_; // guards what follows; taken before MPI's call lock
    std::condition_variable wake_;
    std::deque<outgoing> out_;
    status failure_;
    mailbox_stats stats_;
    std::chrono::microseconds pause_ = min_pause;
    bool stop_ = false;
    std::thread progress_;
};

} // namespace backplane::mpi
