#pragma once
// backplane::mpi::communicator: the processes (ranks) that compute one graph together.
//
//     auto world = mpi::communicator::world({.timeout = std::chrono::seconds(30)}).value();
//     std::vector<float> partial = ...;
//     if (status s = world.all_reduce_sum(std::span(partial)); !s) ...   // every rank: the sum
//
// A communicator wraps a duplicate of MPI_COMM_WORLD or of a program's own MPI_Comm, with
// MPI_ERRORS_RETURN: an MPI error is a status naming the call, never an abort. Every
// operation is non-blocking underneath and polled against a deadline (`timeout`), so a
// rank that died, hung or stopped making the same calls makes the others fail with
// errc::timed_out instead of waiting for ever (Open MPI 4 reports no failed peer by
// itself). After a failure the communicator refuses every later call with the same
// error, and MPI is not finalized (environment.hpp).
//
// The all-reduce is backplane's own, over point-to-point messages: recursive doubling for
// small vectors, a ring (reduce-scatter, then all-gather) for large ones. Every element's
// sum is formed in one fixed order, so all ranks get the same bits, from run to run.
//
// One thread at a time per communicator, checked (errc::busy); any thread.

#include <backplane/core/detail/single_user.hpp>
#include <backplane/core/error.hpp>
#include <backplane/mpi/environment.hpp>

#include <mpi.h>

#include <chrono>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace backplane::mpi {

struct comm_options {
    /// Deadline of one operation (a collective; a wait for a send or a receive). A rank
    /// that does not take part within it is taken for dead: errc::timed_out.
    std::chrono::milliseconds timeout{std::chrono::seconds(60)};
    /// All-reduces of at least this many bytes go round the ring (2 (n-1)/n of the vector
    /// sent per rank); smaller ones use recursive doubling (log2 n whole-vector steps).
    std::size_t ring_min_bytes = std::size_t{256} << 10;
};

/// Tags at or above this value are the communicator's own (collectives).
inline constexpr int first_reserved_tag = 0x7000;

namespace detail {

template <class T>
MPI_Datatype datatype_of() noexcept {
    if constexpr (std::is_same_v<T, float>) return MPI_FLOAT;
    else if constexpr (std::is_same_v<T, double>) return MPI_DOUBLE;
    else if constexpr (std::is_same_v<T, std::int32_t>) return MPI_INT32_T;
    else if constexpr (std::is_same_v<T, std::int64_t>) return MPI_INT64_T;
    else if constexpr (std::is_same_v<T, std::uint64_t>) return MPI_UINT64_T;
    else {
        static_assert(std::is_same_v<T, std::byte>, "mpi: float, double, int32, int64, uint64 or std::byte");
        return MPI_BYTE;
    }
}

/// a[i] += b[i], in blocks the compiler vectorizes at -O2.
template <class T>
void add_into(T* __restrict a, const T* __restrict b, std::size_t n) noexcept {
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (std::size_t j = 0; j < 8; ++j) a[i + j] += b[i + j];
    for (; i < n; ++i) a[i] += b[i];
}

} // namespace detail

class communicator;

namespace detail {

/// A communicator's state; requests point at it, so a communicator may move.
struct comm_state {
    MPI_Comm comm = MPI_COMM_NULL;
    int rank = 0, size = 1;
    comm_options options;
    status failure;
    backplane::detail::single_user user; ///< one thread at a time
    std::vector<std::byte> scratch;
    std::uint64_t all_reduces = 0;
    std::chrono::steady_clock::time_point deadline; ///< of the operation under way

    /// "rank 1 of 4".
    [[nodiscard]] std::string where() const { return "rank " + std::to_string(rank) + " of " + std::to_string(size); }

    /// Ends the communicator with s. A timed-out operation stays pending in MPI, which
    /// then must not be finalized (environment.hpp).
    status fail(status s) {
        failure = s;
        if (s.code() == errc::timed_out) failed_flag().store(true);
        return s;
    }

    /// The requests of one operation at most.
    static constexpr std::size_t max_requests = 64;

    // Polls until every request finished or the deadline passed (then the communicator
    // has failed). Spins briefly, then yields: ranks may share cores. what() names the
    // operation, only when it failed.
    template <class Describe>
    status finish(std::span<MPI_Request> reqs, const Describe& what) {
        MPI_Status st[max_requests];
        for (unsigned spin = 0;; ++spin) {
            int done = 0, rc = 0;
            {
                auto lock = call_lock();
                rc = MPI_Testall(static_cast<int>(reqs.size()), reqs.data(), &done, st);
            }
            if (rc == MPI_ERR_IN_STATUS)
                for (std::size_t i = 0; i < reqs.size(); ++i)
                    if (st[i].MPI_ERROR != MPI_SUCCESS && st[i].MPI_ERROR != MPI_ERR_PENDING) rc = st[i].MPI_ERROR;
            if (rc != MPI_SUCCESS) return fail({errc::failed, where() + ": " + what() + ": " + error_string(rc), rc});
            if (done) return {};
            if (std::chrono::steady_clock::now() > deadline) {
                cancel(reqs);
                return fail({errc::timed_out, where() + ": " + what() + " did not complete within " +
                                                  std::to_string(options.timeout.count()) +
                                                  " ms: a rank died, hangs, or did not make the same call"});
            }
            if (spin >= 64) std::this_thread::yield();
        }
    }

    // Cancels what a timed-out operation left pending, so that a rank that comes back
    // late does not write into memory given back since; what does not finish within
    // 100 ms is left to MPI (the scratch buffer is then kept for the process's life).
    void cancel(std::span<MPI_Request> reqs) {
        auto lock = call_lock();
        for (MPI_Request& r : reqs)
            if (r != MPI_REQUEST_NULL) MPI_Cancel(&r);
        const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
        int done = 0;
        while (!done && std::chrono::steady_clock::now() < until)
            MPI_Testall(static_cast<int>(reqs.size()), reqs.data(), &done, MPI_STATUSES_IGNORE);
        if (!done) kept().push_back(std::move(scratch));
    }
    static std::vector<std::vector<std::byte>>& kept() {
        static std::vector<std::vector<std::byte>> buffers;
        return buffers;
    }
};

} // namespace detail

/// A pending send or receive (isend / irecv); finish it with communicator::wait. A request
/// dropped unfinished is waited for by its destructor (within the timeout).
class request {
public:
    request() = default;
    request(request&& o) noexcept
        : owner_(std::exchange(o.owner_, nullptr)), req_(std::exchange(o.req_, MPI_REQUEST_NULL)), what_(std::move(o.what_)) {}
    request& operator=(request&& o) noexcept;
    ~request();
    [[nodiscard]] bool pending() const noexcept { return req_ != MPI_REQUEST_NULL; }

private:
    friend class communicator;
    request(detail::comm_state* c, MPI_Request r, std::string what) noexcept : owner_(c), req_(r), what_(std::move(what)) {}
    detail::comm_state* owner_ = nullptr;
    MPI_Request req_ = MPI_REQUEST_NULL;
    std::string what_;
};

class communicator {
public:
    /// All processes of the job (a duplicate of MPI_COMM_WORLD). Needs an initialized MPI.
    [[nodiscard]] static result<communicator> world(comm_options o = {}) { return from(MPI_COMM_WORLD, o); }

    /// The processes of `comm` (duplicated, so backplane's messages never meet the
    /// program's own). Collective: every rank of comm calls it.
    [[nodiscard]] static result<communicator> from(MPI_Comm comm, comm_options o = {}) {
        int initialized = 0, finalized = 0;
        MPI_Initialized(&initialized);
        MPI_Finalized(&finalized);
        if (!initialized || finalized)
            return status(errc::invalid_argument,
                          "mpi::communicator: MPI is not initialized (make a backplane::mpi::environment first)");
        if (o.timeout.count() <= 0) return status(errc::invalid_argument, "mpi::communicator: the timeout must be positive");
        auto lock = detail::call_lock();
        auto st = std::make_unique<state>();
        st->options = o;
        if (const int rc = MPI_Comm_dup(comm, &st->comm); rc != MPI_SUCCESS)
            return status(errc::failed, "mpi::communicator: MPI_Comm_dup: " + detail::error_string(rc), rc);
        MPI_Comm_set_errhandler(st->comm, MPI_ERRORS_RETURN);
        MPI_Comm_rank(st->comm, &st->rank);
        MPI_Comm_size(st->comm, &st->size);
        return communicator(std::move(st));
    }

    communicator(communicator&&) noexcept = default;
    communicator& operator=(communicator&&) noexcept = default;
    ~communicator() {
        // a failed communicator may have operations that never finish: it is left to MPI
        if (s_ && s_->failure.ok() && !communication_failed()) {
            auto lock = detail::call_lock();
            int finalized = 0;
            MPI_Finalized(&finalized);
            if (!finalized) MPI_Comm_free(&s_->comm);
        }
    }

    [[nodiscard]] int rank() const noexcept { return s_->rank; }
    [[nodiscard]] int size() const noexcept { return s_->size; }
    [[nodiscard]] MPI_Comm native() const noexcept { return s_->comm; }
    [[nodiscard]] const comm_options& options() const noexcept { return s_->options; }
    void set_timeout(std::chrono::milliseconds t) noexcept {
        if (t.count() > 0) s_->options.timeout = t;
    }
    /// The error that ended this communicator (ok while it works).
    [[nodiscard]] const status& failure() const noexcept { return s_->failure; }
    /// "rank 1 of 4".
    [[nodiscard]] std::string where() const { return s_->where(); }

    /// Sums `data` over all ranks, in place: every rank ends with the same bits.
    template <class T>
        requires(!std::is_same_v<T, std::byte>)
    status all_reduce_sum(std::span<T> data) {
        auto g = enter("all_reduce_sum");
        if (!g) return g.error();
        if (data.size() > static_cast<std::size_t>(INT_MAX))
            return {errc::invalid_argument, "mpi all_reduce_sum: " + std::to_string(data.size()) + " elements (at most 2^31 - 1)"};
        if (s_->size == 1 || data.empty()) return {};
        ++s_->all_reduces;
        if (data.size_bytes() >= s_->options.ring_min_bytes && data.size() >= static_cast<std::size_t>(s_->size))
            return ring(data);
        return doubling(data);
    }

    /// Root's bytes to every rank (the same size on every rank).
    status broadcast(std::span<std::byte> data, int root) {
        auto g = enter("broadcast");
        if (!g) return g.error();
        if (status s = check_peer(root, "broadcast"); !s) return s;
        if (s_->size == 1) return {};
        // a binomial tree: in round k, ranks 0 .. 2^k - 1 (relative to root) send to + 2^k
        const int n = s_->size, me = (s_->rank - root + n) % n;
        for (int bit = 1; bit < n; bit <<= 1) {
            if (me < bit && me + bit < n) {
                if (status s = exchange(data, (me + bit + root) % n, {}, -1, "broadcast"); !s) return s;
            } else if (me >= bit && me < 2 * bit) {
                if (status s = exchange({}, -1, data, (me - bit + root) % n, "broadcast"); !s) return s;
            }
        }
        return {};
    }

    /// Every rank's `mine` (the same size on every rank) into `all`, in rank order.
    status all_gather(std::span<const std::byte> mine, std::span<std::byte> all) {
        auto g = enter("all_gather");
        if (!g) return g.error();
        const std::size_t b = mine.size(), n = static_cast<std::size_t>(s_->size);
        if (all.size() != b * n)
            return {errc::invalid_argument, "mpi all_gather: " + std::to_string(all.size()) + " bytes for " +
                                                std::to_string(n) + " ranks of " + std::to_string(b)};
        if (b > static_cast<std::size_t>(INT_MAX)) return {errc::invalid_argument, "mpi all_gather: over 2 GiB per rank"};
        const auto r = static_cast<std::size_t>(s_->rank);
        if (b != 0) std::memmove(all.data() + r * b, mine.data(), b);
        // a ring: in step s, pass on the piece received in step s - 1
        const int right = (s_->rank + 1) % s_->size, left = (s_->rank + s_->size - 1) % s_->size;
        for (std::size_t s = 0; s + 1 < n; ++s) {
            const std::size_t out = (r + n - s) % n, in = (r + n - s - 1) % n;
            if (status st = exchange(all.subspan(out * b, b), right, all.subspan(in * b, b), left, "all_gather"); !st)
                return st;
        }
        return {};
    }

    /// Waits until every rank has called it.
    status barrier() {
        std::uint64_t one = 1;
        return all_reduce_sum(std::span<std::uint64_t>(&one, 1));
    }

    /// Starts sending `data` to rank `dest` with `tag` (below first_reserved_tag); the
    /// bytes must stay until the request is finished.
    result<request> isend(std::span<const std::byte> data, int dest, int tag) { return start(data.data(), data.size(), dest, tag, true); }
    /// Starts receiving exactly data.size() bytes from rank `src` with `tag`.
    result<request> irecv(std::span<std::byte> data, int src, int tag) { return start(data.data(), data.size(), src, tag, false); }
    /// Finishes a request of this communicator (within the timeout).
    status wait(request& r) {
        if (!r.pending()) return {};
        if (r.owner_ != s_.get()) return {errc::invalid_argument, "mpi wait: the request belongs to another communicator"};
        auto g = enter("wait");
        if (!g) {
            if (g.error().code() != errc::busy) r.req_ = MPI_REQUEST_NULL; // a failed communicator gives it up
            return g.error();
        }
        return s_->finish(std::span<MPI_Request>(&r.req_, 1), [&r] { return r.what_; });
    }
    status send(std::span<const std::byte> data, int dest, int tag) {
        auto r = isend(data, dest, tag);
        return r ? wait(*r) : r.error();
    }
    status recv(std::span<std::byte> data, int src, int tag) {
        auto r = irecv(data, src, tag);
        return r ? wait(*r) : r.error();
    }

    /// All-reduces made since the communicator was made.
    [[nodiscard]] std::uint64_t all_reduces() const noexcept { return s_->all_reduces; }

private:
    using state = detail::comm_state;
    explicit communicator(std::unique_ptr<state> s) noexcept : s_(std::move(s)) {}

    // The one-thread-at-a-time check, the refusal after a failure, the operation's deadline.
    result<backplane::detail::single_user::lease> enter(const char* what) {
        auto use = s_->user.enter();
        if (!use.first()) return backplane::detail::busy_status("mpi communicator", what);
        if (!s_->failure.ok()) return s_->failure;
        s_->deadline = std::chrono::steady_clock::now() + s_->options.timeout;
        return use;
    }

    status check_peer(int peer, const char* what) const {
        if (peer < 0 || peer >= s_->size)
            return {errc::invalid_argument, std::string("mpi ") + what + ": rank " + std::to_string(peer) + " (" +
                                                where() + ")"};
        return {};
    }

    result<request> start(const void* data, std::size_t bytes, int peer, int tag, bool sending) {
        const char* what = sending ? "isend" : "irecv";
        auto g = enter(what);
        if (!g) return g.error();
        if (status s = check_peer(peer, what); !s) return s;
        if (tag < 0 || tag >= first_reserved_tag)
            return status(errc::invalid_argument, std::string("mpi ") + what + ": tag " + std::to_string(tag) +
                                                      " (0 to " + std::to_string(first_reserved_tag - 1) + ")");
        if (bytes > static_cast<std::size_t>(INT_MAX)) return status(errc::invalid_argument, std::string("mpi ") + what + ": over 2 GiB");
        MPI_Request r = MPI_REQUEST_NULL;
        const int n = static_cast<int>(bytes);
        int rc = 0;
        {
            auto lock = detail::call_lock();
            rc = sending ? MPI_Isend(data, n, MPI_BYTE, peer, tag, s_->comm, &r)
                         : MPI_Irecv(const_cast<void*>(data), n, MPI_BYTE, peer, tag, s_->comm, &r);
        }
        const std::string desc = std::string(sending ? "MPI_Isend of " : "MPI_Irecv of ") + std::to_string(bytes) +
                                 " bytes " + (sending ? "to" : "from") + " rank " + std::to_string(peer) + " (tag " +
                                 std::to_string(tag) + ")";
        if (rc != MPI_SUCCESS) return s_->fail({errc::failed, where() + ": " + desc + ": " + detail::error_string(rc), rc});
        return request(s_.get(), r, desc);
    }

    // Sends `out` to `to` and receives `in` from `from` (either side may be absent: peer
    // -1), with the communicator's own tag. Messages up to 128 KB go in
    // pieces that fit the shared-memory transport's eager limit (no handshake).
    status exchange(std::span<const std::byte> out, int to, std::span<std::byte> in, int from, const char* what) {
        constexpr std::size_t piece = 4000, max_pieces = detail::comm_state::max_requests / 2;
        const auto pieces = [&](std::size_t bytes) {
            return bytes <= piece * max_pieces && bytes > 0 ? (bytes + piece - 1) / piece : std::size_t{1};
        };
        const std::size_t n_in = from >= 0 ? pieces(in.size()) : 0, n_out = to >= 0 ? pieces(out.size()) : 0;
        MPI_Request reqs[detail::comm_state::max_requests];
        int rc = MPI_SUCCESS;
        {
            auto lock = detail::call_lock();
            for (std::size_t i = 0; i < n_in && rc == MPI_SUCCESS; ++i) {
                const std::size_t first = in.size() * i / n_in, len = in.size() * (i + 1) / n_in - first;
                rc = MPI_Irecv(in.data() + first, static_cast<int>(len), MPI_BYTE, from, first_reserved_tag, s_->comm, &reqs[i]);
            }
            for (std::size_t i = 0; i < n_out && rc == MPI_SUCCESS; ++i) {
                const std::size_t first = out.size() * i / n_out, len = out.size() * (i + 1) / n_out - first;
                rc = MPI_Isend(out.data() + first, static_cast<int>(len), MPI_BYTE, to, first_reserved_tag, s_->comm,
                               &reqs[n_in + i]);
            }
        }
        const auto desc = [&] {
            return std::string(what) + " (" + std::to_string(out.size() + in.size()) + " bytes with rank " +
                   std::to_string(from >= 0 ? from : to) + ")";
        };
        if (rc != MPI_SUCCESS) return s_->fail({errc::failed, where() + ": " + desc() + ": " + detail::error_string(rc), rc});
        return s_->finish(std::span<MPI_Request>(reqs, n_in + n_out), desc);
    }

    template <class T>
    std::span<T> scratch(std::size_t n) {
        if (s_->scratch.size() < n * sizeof(T)) s_->scratch.resize(n * sizeof(T));
        return {reinterpret_cast<T*>(s_->scratch.data()), n};
    }

    // Recursive doubling; ranks beyond the largest power of two first fold into the
    // ranks below it and get the sum back at the end.
    template <class T>
    status doubling(std::span<T> data) {
        const int n = s_->size, r = s_->rank;
        int p2 = 1;
        while (p2 * 2 <= n) p2 *= 2;
        const auto bytes = std::as_writable_bytes(data);
        auto recv = scratch<T>(data.size());
        const auto rbytes = std::as_writable_bytes(recv);
        if (r >= p2) {
            if (status s = exchange(bytes, r - p2, {}, -1, "all_reduce_sum"); !s) return s;
            return exchange({}, -1, bytes, r - p2, "all_reduce_sum");
        }
        if (r + p2 < n) {
            if (status s = exchange({}, -1, rbytes, r + p2, "all_reduce_sum"); !s) return s;
            detail::add_into(data.data(), recv.data(), data.size());
        }
        for (int bit = 1; bit < p2; bit <<= 1) {
            if (status s = exchange(bytes, r ^ bit, rbytes, r ^ bit, "all_reduce_sum"); !s) return s;
            // a + b on one side, b + a on the other: the same bits
            detail::add_into(data.data(), recv.data(), data.size());
        }
        if (r + p2 < n) return exchange(bytes, r + p2, {}, -1, "all_reduce_sum");
        return {};
    }

    // The ring: reduce-scatter (after step s, rank r holds the sum of s + 2 ranks for chunk
    // r - s - 1), then all-gather of the summed chunks.
    template <class T>
    status ring(std::span<T> data) {
        const int n = s_->size, r = s_->rank;
        const auto first = [&](int c) { return data.size() * static_cast<std::size_t>(c) / static_cast<std::size_t>(n); };
        const auto chunk = [&](int c) { return data.subspan(first(c), first(c + 1) - first(c)); };
        const auto mod = [n](int x) { return ((x % n) + n) % n; };
        const int right = mod(r + 1), left = mod(r - 1);
        auto recv = scratch<T>(first(1) + 1);
        for (int s = 0; s < n - 1; ++s) {
            auto out = chunk(mod(r - s)), acc = chunk(mod(r - s - 1));
            auto in = recv.first(acc.size());
            if (status st = exchange(std::as_bytes(out), right, std::as_writable_bytes(in), left, "all_reduce_sum"); !st)
                return st;
            detail::add_into(acc.data(), in.data(), acc.size());
        }
        for (int s = 0; s < n - 1; ++s) {
            auto out = chunk(mod(r + 1 - s)), in = chunk(mod(r - s));
            if (status st = exchange(std::as_bytes(out), right, std::as_writable_bytes(in), left, "all_reduce_sum"); !st)
                return st;
        }
        return {};
    }

    std::unique_ptr<state> s_;
};

inline request& request::operator=(request&& o) noexcept {
    if (this != &o) {
        this->~request();
        owner_ = std::exchange(o.owner_, nullptr);
        req_ = std::exchange(o.req_, MPI_REQUEST_NULL);
        what_ = std::move(o.what_);
    }
    return *this;
}

// Waits for the request (its bytes may still be in use by MPI), once no other thread
// uses the communicator; a failed communicator gives it up.
inline request::~request() {
    if (!pending() || owner_ == nullptr) return;
    for (;;) {
        const auto use = owner_->user.enter();
        if (!use) {
            std::this_thread::yield();
            continue;
        }
        owner_->deadline = std::chrono::steady_clock::now() + owner_->options.timeout;
        if (owner_->failure.ok()) (void)owner_->finish(std::span<MPI_Request>(&req_, 1), [this] { return what_; });
        return;
    }
}

} // namespace backplane::mpi
