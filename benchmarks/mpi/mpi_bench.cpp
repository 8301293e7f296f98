// backplane_bench_mpi, run under mpirun (mpirun -np 2 backplane_bench_mpi
// [--benchmark_repetitions=5]); every rank runs every benchmark with the same fixed
// iteration count (their collectives must match); rank 0 reports.
//
//   mpi/all_reduce/<bytes>/ranks:<n>        mpi::communicator::all_reduce_sum of f32
//   ref/mpi_allreduce/<bytes>/ranks:<n>     MPI_Allreduce of the same bytes: the reference
//   mpi/meta_llama/tokens:<t>/ranks:<n>     the llama-like reference graph (4 layers, n_embd
//                                           512, 8 heads, n_ff 1376, vocabulary 4096, f32
//                                           weights, t tokens: a prompt) on a meta device
//                                           over the n ranks, one CPU part of 1 thread each
//   ref/cpu_llama/tokens:<t>/threads:1      the same graph on rank 0's CPU backend with one
//                                           thread, the other ranks asleep: the reference
//   mpi/pipeline_llama/tokens:<t>/batches:<b>/ranks:<n>
//                                           the same graph cut by layers into one stage per
//                                           rank (mpi::pipeline, 1 thread each, 2 pipeline
//                                           copies): b batches of t tokens queued one after
//                                           another, then the last one's logits read
//
// Items are tokens (items_per_second: tokens/s). The meta device's logits are checked
// against one CPU's first (NMSE < 1e-6): a wrong result is an error, never a figure.
#include <backplane/mpi/process_group.hpp>

#include "../../tests/backends/meta/meta_fixtures.hpp"
#include "../../tests/mpi/pipeline_llama.hpp"
#include "../../tests/support/llama_graph.hpp"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <thread>
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

// Waits for every rank, asleep (a rank that spins would take a core from the others).
void sleeping_barrier() {
    MPI_Request r = MPI_REQUEST_NULL;
    {
        auto lock = mpi::detail::call_lock();
        MPI_Ibarrier(world->native(), &r);
    }
    for (int done = 0; !done;) {
        {
            auto lock = mpi::detail::call_lock();
            MPI_Test(&r, &done, MPI_STATUS_IGNORE);
        }
        if (!done) std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
}

constexpr std::uint32_t llama_seed = 42;
std::shared_ptr<mpi::process_group> processes;

test::llama_params llama_params(int n_tokens) {
    return {.n_layer = 4, .n_embd = 512, .n_head = 8, .n_ff = 1376, .n_tokens = n_tokens, .n_vocab = 4096};
}

void tokens_processed(benchmark::State& state, int n_tokens) {
    state.SetItemsProcessed(state.iterations() * n_tokens);
}

// The graph on a meta device over the ranks: rank r holds global device r.
void meta_llama(benchmark::State& state, int n_tokens) {
    const test::llama_params p = llama_params(n_tokens);
    const std::int64_t head_dim = p.head_dim();
    auto dev = meta_device::make(test::cpu_parts(1),
                                 {.split = [head_dim](const tensor& t, int n) { return test::split_llama(t, n, head_dim); },
                                  .threads_per_device = 1,
                                  .processes = processes});
    if (!dev) return state.SkipWithError(dev.error().describe().c_str());
    auto be = dev->make_backend();
    if (!be) return state.SkipWithError(be.error().describe().c_str());
    std::optional<test::meta_llama> ml;
    try {
        ml.emplace(p, *dev, *be);
        test::fill_llama(ml->model, ml->inputs, llama_seed).throw_if_failed();
    } catch (const std::exception& e) {
        return state.SkipWithError(e.what());
    }
    status st = be->compute(ml->g);
    auto got = st ? tensor_get_all<float>(*ml->g.back()) : result<std::vector<float>>(st);
    if (!got) return state.SkipWithError(got.error().describe().c_str());
    const double e = test::nmse_of(test::llama_on_cpu(p, llama_seed, {.n_threads = 1}), *got);
    if (!(e < 1e-6)) return state.SkipWithError(("wrong result: nmse " + std::to_string(e)).c_str());
    sleeping_barrier();
    for (auto _ : state)
        if (status s = be->compute(ml->g); !s || !(s = be->synchronize())) {
            state.SkipWithError(s.describe().c_str());
            break;
        }
    tokens_processed(state, n_tokens);
    state.counters["process_bytes_per_token"] =
        static_cast<double>(be->stats().process_bytes) / static_cast<double>((state.iterations() + 1) * n_tokens);
}

// The graph cut by layers over the ranks; `batches` computes queued per iteration.
void pipeline_llama(benchmark::State& state, int n_tokens, int batches) {
    const test::llama_params p = llama_params(n_tokens);
    cpu_backend cpu(cpu_backend_params{.n_threads = 1});
    auto pipe = mpi::pipeline::make(*world, cpu, cpu, {.n_copies = 2});
    if (!pipe) return state.SkipWithError(pipe.error().describe().c_str());
    std::optional<test::llama_instance> m;
    std::vector<float> got;
    try {
        m.emplace(p, test::pipeline_stages(**pipe));
        test::fill_llama_weights(m->model, llama_seed).throw_if_failed();
        got = test::pipeline_logits(**pipe, *m, llama_seed);
    } catch (const std::exception& e) {
        return state.SkipWithError(e.what());
    }
    const double e = test::nmse_of(test::llama_on_cpu(p, llama_seed, {.n_threads = 1}), got);
    if (!(e < 1e-6)) return state.SkipWithError(("wrong result: nmse " + std::to_string(e)).c_str());
    sleeping_barrier();
    for (auto _ : state) {
        status s;
        for (int b = 0; b < batches && s; ++b) {
            s = (*pipe)->alloc_graph(m->g);
            if (s) s = test::fill_llama_inputs(p, m->inputs, llama_seed);
            if (s) s = (*pipe)->compute_async(m->g);
        }
        if (s) s = (*pipe)->read(*m->g.back(), got.data(), 0, m->g.back()->nbytes());
        if (!s) {
            state.SkipWithError(s.describe().c_str());
            break;
        }
    }
    state.SetItemsProcessed(state.iterations() * n_tokens * batches);
    state.counters["bytes_sent_per_token"] = static_cast<double>((*pipe)->stats().bytes_sent) /
                                             static_cast<double>((state.iterations() * batches + 1) * n_tokens);
}

// The graph on rank 0's CPU backend with one thread; the other ranks wait asleep.
void cpu_llama(benchmark::State& state, int n_tokens) {
    std::optional<test::llama_instance> inst;
    graph_allocator ga(cpu_buffer_type::instance());
    cpu_backend cpu(cpu_backend_params{.n_threads = 1});
    if (world->rank() == 0) {
        inst.emplace(llama_params(n_tokens));
        ga.alloc_graph(inst->g).throw_if_failed();
        test::fill_llama(inst->model, inst->inputs, llama_seed).throw_if_failed();
        (void)cpu.compute(inst->g);
    }
    for (auto _ : state)
        if (inst) (void)cpu.compute(inst->g);
    tokens_processed(state, n_tokens);
    sleeping_barrier();
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
    auto pg = mpi::process_group::world();
    if (!pg) {
        std::fprintf(stderr, "%s\n", pg.error().describe().c_str());
        return 1;
    }
    processes = *pg;
    for (int t : {8, 64}) {
        const std::string ts = "tokens:" + std::to_string(t);
        benchmark::RegisterBenchmark(("ref/cpu_llama/" + ts + "/threads:1").c_str(), cpu_llama, t)
            ->Iterations(t == 8 ? 40 : 10)
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime();
        benchmark::RegisterBenchmark(("mpi/meta_llama/" + ts + "/ranks:" + ranks).c_str(), meta_llama, t)
            ->Iterations(t == 8 ? 40 : 10)
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime();
    }
    for (const auto& [t, b] : {std::pair{8, 8}, std::pair{32, 4}}) {
        const std::string name = "mpi/pipeline_llama/tokens:" + std::to_string(t) + "/batches:" + std::to_string(b) +
                                 "/ranks:" + ranks;
        benchmark::RegisterBenchmark(name.c_str(), pipeline_llama, t, b)
            ->Iterations(10)
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime();
    }
    for (int t : {32}) // the reference per token for the batches of 32
        benchmark::RegisterBenchmark(("ref/cpu_llama/tokens:" + std::to_string(t) + "/threads:1").c_str(), cpu_llama, t)
            ->Iterations(10)
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime();
    benchmark::Initialize(&argc, argv);
    if (comm->rank() == 0) {
        benchmark::RunSpecifiedBenchmarks();
    } else {
        silent_reporter quiet;
        benchmark::RunSpecifiedBenchmarks(&quiet);
    }
    benchmark::Shutdown();
    processes.reset();
    return 0;
}
