// The unary functions over 1M f32 (4 MiB, a single row of 1,048,576 elements split
// over 16 rows of 65,536), one thread, next to memcpy of the same bytes in the same run:
//
//   cpu/unary/memcpy            std::memcpy of 4 MiB (the reference)
//   cpu/unary/<fn>/fast         the default backend: the fast row kernel (fast/rowwise.hpp)
//   cpu/unary/<fn>/reference    a reference-mode backend: the element-by-element kernel
//                               (kernels/unary.hpp), what every unary function ran before
//                               it had a fast row
//
// for silu, gelu, tanh, gelu_quick, sigmoid and exp. bytes_per_second counts the bytes
// read and written (8 MiB per compute, memcpy's too), so each figure's ratio to
// cpu/unary/memcpy says how far the function is from moving its bytes.

#include "support.hpp"

#include <cstring>
#include <string>
#include <vector>

namespace unary_bench {

using namespace backplane;
using namespace backplane::bench;

constexpr std::int64_t row_len = 65536, rows = 16;
constexpr auto bytes = static_cast<std::size_t>(row_len * rows) * sizeof(float);

void bm_memcpy(benchmark::State& state) {
    std::vector<std::byte> a(bytes, std::byte{1}), b(bytes);
    for (auto _ : state) {
        std::memcpy(b.data(), a.data(), bytes);
        benchmark::DoNotOptimize(b.data());
        benchmark::ClobberMemory();
    }
    state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * 2 * bytes));
}

void bm_unary(benchmark::State& state, op_kind op, bool reference) {
    cpu_backend backend({.n_threads = 1, .reference = reference});
    context ctx(context_params{.no_alloc = false});
    tensor* a = ctx.new_tensor(elem_type::f32, {row_len, rows});
    fill_random(*a, 7);
    tensor* y = nullptr;
    switch (op) {
    case op_kind::silu: y = silu(ctx, a); break;
    case op_kind::gelu: y = gelu(ctx, a); break;
    case op_kind::tanh: y = tanh(ctx, a); break;
    case op_kind::gelu_quick: y = gelu_quick(ctx, a); break;
    case op_kind::sigmoid: y = sigmoid(ctx, a); break;
    default: y = exp(ctx, a); break;
    }
    const graph g(y);
    for (auto _ : state) {
        if (status s = backend.compute(g); !s) {
            state.SkipWithError(s.describe().c_str());
            break;
        }
        benchmark::ClobberMemory();
    }
    state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * 2 * bytes));
    state.SetLabel(reference ? "reference kernel" : std::string(to_string(cpu::active_isa())));
}

void register_all() {
    benchmark::RegisterBenchmark("cpu/unary/memcpy", bm_memcpy)->UseRealTime()->Unit(benchmark::kMicrosecond);
    for (const op_kind op : {op_kind::silu, op_kind::gelu, op_kind::tanh, op_kind::gelu_quick, op_kind::sigmoid,
                             op_kind::exp})
        for (const bool reference : {false, true})
            benchmark::RegisterBenchmark(
                ("cpu/unary/" + std::string(to_string(op)) + (reference ? "/reference" : "/fast")).c_str(),
                [op, reference](benchmark::State& s) { bm_unary(s, op, reference); })
                ->UseRealTime()
                ->Unit(benchmark::kMicrosecond);
}

[[maybe_unused]] const bool registered = (register_all(), true);

} // namespace unary_bench
