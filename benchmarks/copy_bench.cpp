// tensor_copy and graph_copy on the host, next to memcpy of the same bytes measured in
// the same run:
//
//   copy/memcpy/<MiB>            std::memcpy between two host blocks (the reference)
//   copy/tensor_copy/<MiB>       tensor_copy between two contiguous f32 tensors in CPU
//                                buffers: its host fast path, checks included
//   copy/tensor_copy_rows/<MiB>  a view of every other row of a [1024, rows] tensor into
//                                another such view (one run per row, holes untouched)
//   copy/graph_copy_llama        a deep copy of the small llama reference graph (weights,
//                                inputs, views, one buffer) onto the CPU buffer type
//
// bytes_per_second counts the bytes of the elements copied, so the ratio of
// copy/tensor_copy to copy/memcpy is the overhead of the fast path.

#include "../tests/support/llama_graph.hpp"

#include <backplane/backplane.hpp>
#include <backplane/memory/graph_copy.hpp>

#include <benchmark/benchmark.h>

#include <cstring>
#include <vector>

namespace {

using namespace backplane;

constexpr std::int64_t row = 1024; // f32 per row

void bm_memcpy(benchmark::State& state) {
    const auto bytes = static_cast<std::size_t>(state.range(0)) << 20;
    std::vector<std::byte> a(bytes, std::byte{1}), b(bytes);
    for (auto _ : state) {
        std::memcpy(b.data(), a.data(), bytes);
        benchmark::DoNotOptimize(b.data());
        benchmark::ClobberMemory();
    }
    state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                            static_cast<std::int64_t>(bytes));
}

/// Two [row, rows] f32 tensors in CPU buffers.
struct two_tensors {
    context ctx{context_params{.no_alloc = true}};
    tensor* a;
    tensor* b;
    buffer_list bufs;
    explicit two_tensors(std::int64_t rows) {
        a = ctx.new_tensor(elem_type::f32, {row, rows});
        b = ctx.new_tensor(elem_type::f32, {row, rows});
        bufs = alloc_tensors(ctx, cpu_buffer_type::instance()).value();
        std::memset(a->data, 1, a->nbytes());
    }
};

void bm_tensor_copy(benchmark::State& state) {
    const std::int64_t rows = (state.range(0) << 20) / (row * 4);
    two_tensors t(rows);
    for (auto _ : state) {
        if (auto s = tensor_copy(*t.a, *t.b); !s)
            state.SkipWithError(s.describe().c_str());
        benchmark::ClobberMemory();
    }
    state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                            static_cast<std::int64_t>(t.a->nbytes()));
}

void bm_tensor_copy_rows(benchmark::State& state) {
    const std::int64_t rows = (state.range(0) << 20) / (row * 4);
    two_tensors t(rows);
    tensor* va = view_2d(t.ctx, t.a, row, rows / 2, 2 * t.a->nb[1], 0);
    tensor* vb = view_2d(t.ctx, t.b, row, rows / 2, 2 * t.b->nb[1], 0);
    for (auto _ : state) {
        if (auto s = tensor_copy(*va, *vb); !s)
            state.SkipWithError(s.describe().c_str());
        benchmark::ClobberMemory();
    }
    state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * (rows / 2) * row * 4);
}

void bm_graph_copy_llama(benchmark::State& state) {
    test::llama_instance s(test::llama_params{.n_layer = 4,
                                              .n_embd = 128,
                                              .n_head = 4,
                                              .n_ff = 344,
                                              .n_tokens = 8,
                                              .n_vocab = 256,
                                              .token_input = true});
    graph_allocator ga(cpu_buffer_type::instance());
    if (auto st = ga.alloc_graph(s.g); !st)
        state.SkipWithError(st.describe().c_str());
    std::size_t bytes = 0;
    for (auto _ : state) {
        auto copy = graph_copy(cpu_buffer_type::instance(), s.g);
        if (!copy) {
            state.SkipWithError(copy.error().describe().c_str());
            break;
        }
        bytes = copy->bytes();
        benchmark::DoNotOptimize(copy->buffer());
    }
    state.counters["buffer_bytes"] = static_cast<double>(bytes);
    state.counters["nodes"] = static_cast<double>(s.g.n_nodes());
}

BENCHMARK(bm_memcpy)->Name("copy/memcpy")->Arg(1)->Arg(64)->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_tensor_copy)->Name("copy/tensor_copy")->Arg(1)->Arg(64)->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_tensor_copy_rows)
    ->Name("copy/tensor_copy_rows")
    ->Arg(1)
    ->Arg(64)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_graph_copy_llama)->Name("copy/graph_copy_llama")->Unit(benchmark::kMicrosecond);

} // namespace
