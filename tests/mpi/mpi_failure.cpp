// A rank that stops in the middle of a run: the others must fail with errc::timed_out
// within the timeout, and refuse every later call at once, instead of hanging.
//   backplane_mpi_failure killed|silent <timeout ms>
// The last rank stops before the 4th all-reduce: `killed` raises SIGKILL, `silent` stops
// calling (and leaves when the others are done). Each other rank prints one line,
//   "rank R: PASS ..." or "rank R: FAIL ...",
// which cmake/run_mpi_failure.cmake counts, and leaves 1.5 s later. mpirun must run with
// --mca orte_abort_on_non_zero_status 0, so that the survivors are not killed with it.
#include <backplane/mpi/communicator.hpp>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

using namespace backplane;
using clock_type = std::chrono::steady_clock;

namespace {

long ms_since(clock_type::time_point t) {
    return static_cast<long>(std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() - t).count());
}

int survivor_verdict(mpi::communicator& c, const status& s, long elapsed, long timeout_ms) {
    const int r = c.rank();
    if (s.ok()) {
        std::printf("rank %d: FAIL the all-reduce without the last rank succeeded\n", r);
        return 1;
    }
    const bool described = s.describe().rfind("timed out: rank " + std::to_string(r) + " of ", 0) == 0;
    if (s.code() != errc::timed_out || !described || elapsed < timeout_ms * 9 / 10 || elapsed > timeout_ms + 10000) {
        std::printf("rank %d: FAIL after %ld ms: %s\n", r, elapsed, s.describe().c_str());
        return 1;
    }
    std::vector<float> v(8, 1.0f);
    const auto t = clock_type::now();
    const status again = c.all_reduce_sum(std::span(v));
    if (again.message() != s.message() || ms_since(t) > 100 || !mpi::communication_failed()) {
        std::printf("rank %d: FAIL a later call was not refused at once: %s\n", r, again.describe().c_str());
        return 1;
    }
    std::printf("rank %d: PASS after %ld ms: %s\n", r, elapsed, s.describe().c_str());
    return 0;
}

} // namespace

int main(int argc, char** argv) {
    auto env = mpi::environment::init(&argc, &argv);
    if (!env || argc != 3) {
        std::fprintf(stderr, "usage: backplane_mpi_failure killed|silent <timeout ms>\n");
        return 2;
    }
    const std::string mode = argv[1];
    const long timeout_ms = std::atol(argv[2]);
    auto c = mpi::communicator::world({.timeout = std::chrono::milliseconds(timeout_ms)});
    if (!c || c->size() < 2) return 2;
    const bool victim = c->rank() == c->size() - 1;
    std::vector<float> v(1000);
    for (int it = 0; it < 6; ++it) {
        if (it == 3 && victim) {
            std::fflush(stdout);
            if (mode == "killed") std::raise(SIGKILL);
            std::this_thread::sleep_for(std::chrono::milliseconds(2 * timeout_ms + 2000));
            std::_Exit(0); // MPI_Finalize would wait for the others, who do not finalize
        }
        for (float& x : v) x = 1.0f;
        const auto t = clock_type::now();
        const status s = c->all_reduce_sum(std::span(v));
        if (it >= 3) {
            const int verdict = survivor_verdict(*c, s, ms_since(t), timeout_ms);
            // mpirun ends the job when the first rank leaves without MPI_Finalize: the
            // others, a few milliseconds behind, print first
            std::fflush(stdout);
            std::this_thread::sleep_for(std::chrono::milliseconds(1500));
            return verdict;
        }
        if (!s || v[0] != static_cast<float>(c->size())) {
            std::printf("rank %d: FAIL all-reduce %d with every rank: %s\n", c->rank(), it, s.describe().c_str());
            return 1;
        }
    }
    return 1;
}
