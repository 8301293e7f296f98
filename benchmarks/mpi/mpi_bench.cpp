// backplane_bench_mpi: the all-reduce of backplane::mpi::communicator (mpi/all_reduce/)
// next to MPI_Allreduce of the same bytes (ref/mpi_allreduce/), in the same run.
//   mpirun -np 2 build/default/benchmarks/backplane_bench_mpi [--benchmark_repetitions=5]
// Every rank runs every benchmark with the same fixed iteration count (their collectives
// must match); rank 0 reports.
#include <backplane/mpi/communicator.hpp>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

using namespace backplane;

namespace {

mpi::communicator* world = nullptr;

const std::vector<std::size_t> sizes = {std::size_t{2} << 10,   std::size_t{8} << 10,   std::size_t{64} << 10,
                                        std::size_t{256} << 10, std::size_t{1} << 20, std::size_t{4} << 20};

std::int64_t iterations(std::size_t bytes) {
    return std::clamp<std::int64_t>(static_cast<std::int64_t>((std::size_t{256} << 20) / bytes), 50, 20000);
}

void ours(benchmark::State& state, std::size_t bytes) {
    std::vector<float> v(bytes / 4, 1.0f);
    for (auto _ : state)
        if (status s = world->all_reduce_sum(std::span(v)); !s) {
            state.SkipWithError(s.describe().c_str());
            break;
        }
    state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(bytes));
}

void reference(benchmark::State& state, std::size_t bytes) {
    std::vector<float> v(bytes / 4, 1.0f);
    for (auto _ : state)
        MPI_Allreduce(MPI_IN_PLACE, v.data(), static_cast<int>(v.size()), MPI_FLOAT, MPI_SUM, world->native());
    state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(bytes));
}

class silent_reporter final : public benchmark::BenchmarkReporter {
public:
    bool ReportContext(const Context&) override { return true; }
    void ReportRuns(const std::vector<Run>&) override {}
};

} // namespace

int main(int argc, char** argv) {
    auto env = mpi::environment::init(&argc, &argv);
    if (!env) {
        std::fprintf(stderr, "%s\n", env.error().describe().c_str());
        return 1;
    }
    auto comm = mpi::communicator::world();
    if (!comm) {
        std::fprintf(stderr, "%s\n", comm.error().describe().c_str());
        return 1;
    }
    world = &*comm;
    const std::string ranks = std::to_string(comm->size());
    for (std::size_t b : sizes) {
        const std::string tail = std::to_string(b) + "/ranks:" + ranks;
        benchmark::RegisterBenchmark(("ref/mpi_allreduce/" + tail).c_str(), reference, b)
            ->Iterations(iterations(b))
            ->UseRealTime();
        benchmark::RegisterBenchmark(("mpi/all_reduce/" + tail).c_str(), ours, b)->Iterations(iterations(b))->UseRealTime();
    }
    if (comm->rank() != 0) // only rank 0 writes the output file
        argc = static_cast<int>(std::remove_if(argv + 1, argv + argc, [](const char* a) {
                                    return std::string(a).starts_with("--benchmark_out");
                                }) - argv);
    benchmark::Initialize(&argc, argv);
    if (comm->rank() == 0) {
        benchmark::RunSpecifiedBenchmarks();
    } else {
        silent_reporter quiet;
        benchmark::RunSpecifiedBenchmarks(&quiet);
    }
    benchmark::Shutdown();
    return 0;
}
