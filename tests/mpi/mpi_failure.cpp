// A rank that stops in the middle of a run: the others must fail with errc::timed_out
// within the timeout, and refuse every later call at once, instead of hanging.
//   backplane_mpi_failure killed|silent|pipeline <timeout ms>
// The last rank stops before the 4th all-reduce: `killed` raises SIGKILL, `silent` stops
// calling (and leaves when the others are done); `pipeline` kills it before the 4th
// compute of the llama graph cut into one stage per rank (mpi::pipeline), whose logits
// it holds. Each other rank prints one line,
//   "rank R: PASS ..." or "rank R: FAIL ...",
// which cmake/run_mpi_failure.cmake counts, and leaves 1.5 s later. mpirun must run with
// --mca orte_abort_on_non_zero_status 0, so that the survivors are not killed with it.
#include <backplane/backends/cpu.hpp>
#include <backplane/mpi/communicator.hpp>
#include <backplane/mpi/pipeline.hpp>

#include "pipeline_llama.hpp"

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

// The verdict of a surviving rank on the status s of the failed call, `elapsed` ms
// after it started; `again` repeats a call, which must be refused at once.
template <class Again>
int survivor_verdict(int r, const status& s, long elapsed, long timeout_ms, Again&& again) {
    if (s.ok()) {
        std::printf("rank %d: FAIL the call without the last rank succeeded\n", r);
        return 1;
    }
    const bool described = s.describe().rfind("timed out: rank " + std::to_string(r) + " of ", 0) == 0;
    if (s.code() != errc::timed_out || !described || elapsed < timeout_ms * 9 / 10 || elapsed > timeout_ms + 10000) {
        std::printf("rank %d: FAIL after %ld ms: %s\n", r, elapsed, s.describe().c_str());
        return 1;
    }
    const auto t = clock_type::now();
    const status later = again();
    if (later.message() != s.message() || ms_since(t) > 100 || !mpi::communication_failed()) {
        std::printf("rank %d: FAIL a later call was not refused at once: %s\n", r, later.describe().c_str());
        return 1;
    }
    std::printf("rank %d: PASS after %ld ms: %s\n", r, elapsed, s.describe().c_str());
    return 0;
}

// mpirun ends the job when the first rank leaves without MPI_Finalize: the others, a
// few milliseconds behind, print first.
int leave(int verdict) {
    std::fflush(stdout);
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    return verdict;
}

[[noreturn]] void stop(const std::string& mode, long timeout_ms) {
    std::fflush(stdout);
    if (mode != "silent") std::raise(SIGKILL);
    std::this_thread::sleep_for(std::chrono::milliseconds(2 * timeout_ms + 2000));
    std::_Exit(0); // MPI_Finalize would wait for the others, who do not finalize
}

int all_reduce_scenario(mpi::communicator& c, const std::string& mode, long timeout_ms) {
    const bool victim = c.rank() == c.size() - 1;
    std::vector<float> v(1000);
    for (int it = 0; it < 6; ++it) {
        if (it == 3 && victim) stop(mode, timeout_ms);
        for (float& x : v) x = 1.0f;
        const auto t = clock_type::now();
        const status s = c.all_reduce_sum(std::span(v));
        if (it >= 3)
            return leave(survivor_verdict(c.rank(), s, ms_since(t), timeout_ms, [&] { return c.all_reduce_sum(std::span(v)); }));
        if (!s || v[0] != static_cast<float>(c.size())) {
            std::printf("rank %d: FAIL all-reduce %d with every rank: %s\n", c.rank(), it, s.describe().c_str());
            return 1;
        }
    }
    return 1;
}

int pipeline_scenario(mpi::communicator& c, long timeout_ms) {
    const bool victim = c.rank() == c.size() - 1;
    const test::llama_params p{.n_layer = 2 * c.size(), .n_embd = 128, .n_head = 4, .n_ff = 256, .n_tokens = 7, .n_vocab = 300};
    cpu_backend cpu({.n_threads = 1});
    auto pipe = mpi::pipeline::make(c, cpu, cpu);
    if (!pipe) return 2;
    test::llama_instance m(p, test::pipeline_stages(**pipe));
    if (!test::fill_llama_weights(m.model, 3)) return 2;
    std::vector<float> logits(static_cast<std::size_t>(m.g.back()->nelements()));
    const auto run = [&] {
        if (status s = (*pipe)->alloc_graph(m.g); !s) return s;
        if (status s = test::fill_llama_inputs(p, m.inputs, 3); !s) return s;
        if (status s = (*pipe)->compute(m.g); !s) return s;
        return (*pipe)->read(*m.g.back(), logits.data(), 0, m.g.back()->nbytes());
    };
    for (int it = 0; it < 6; ++it) {
        if (it == 3 && victim) stop("killed", timeout_ms);
        const auto t = clock_type::now();
        const status s = run();
        if (it >= 3) return leave(survivor_verdict(c.rank(), s, ms_since(t), timeout_ms, run));
        if (!s) {
            std::printf("rank %d: FAIL compute %d with every rank: %s\n", c.rank(), it, s.describe().c_str());
            return 1;
        }
    }
    return 1;
}

} // namespace

int main(int argc, char** argv) {
    auto env = mpi::environment::init(&argc, &argv);
    if (!env || argc != 3) {
        std::fprintf(stderr, "usage: backplane_mpi_failure killed|silent|pipeline <timeout ms>\n");
        return 2;
    }
    const std::string mode = argv[1];
    const long timeout_ms = std::atol(argv[2]);
    auto c = mpi::communicator::world({.timeout = std::chrono::milliseconds(timeout_ms)});
    if (!c || c->size() < 2) return 2;
    return mode == "pipeline" ? pipeline_scenario(*c, timeout_ms) : all_reduce_scenario(*c, mode, timeout_ms);
}
