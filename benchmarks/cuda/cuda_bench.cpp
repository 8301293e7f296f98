// CUDA backend benchmarks (backplane_bench_cuda), on CUDA device 0. Each figure has a
// reference measured in the same run:
//
//   cuda/mul_mat/<type>/own/4096     4096^3 product (f32 activations), the own kernels,
//   cuda/mul_mat/<type>/cublas/4096  and through the cuBLAS path; GFLOP/s
//   cuda/ref/cublas/<type>/4096      cuBLAS alone (cublasGemmEx on f32 or f16 operands
//                                    already in device memory): the reference
//   cuda/mat_vec/<type>/<n>          n x n weights (f32 ... q4_0, q4_K, q5_K, q6_K, mxfp4)
//                                    by one vector, GB/s of weights read
//   cuda/ref/d2d_copy/<n>            a device-to-device copy of the q8_0 weights' size,
//                                    GB/s of bytes read and written (the memory traffic,
//                                    as the mat-vec's figure is)
//   cuda/llama                       the llama-like reference graph (32 layers, f32, 32
//                                    tokens), every weight in GPU memory, scheduled over
//                                    {cuda, cpu}; ref: cuda/llama/no_graphs (no CUDA graphs)
//
// Each timed iteration ends with a synchronize: the figures are completed work. Without a
// GPU every benchmark is skipped with the reason.

#include <backplane/backends/cuda.hpp>
#include <backplane/backplane.hpp>
#include <backplane/sched.hpp>

#include "../../tests/support/llama_graph.hpp"
#include "../support.hpp"

#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>
#if defined(BACKPLANE_BENCH_HAVE_CUBLAS) && BACKPLANE_BENCH_HAVE_CUBLAS
#include <cublas_v2.h>
#endif

#include <memory>
#include <optional>
#include <string>
#include <vector>

using namespace backplane;

namespace {

/// Device 0, opened once; null (and why) without one.
cuda_device* device(std::string& why) {
    static std::optional<cuda_device> dev;
    static std::string reason;
    static bool tried = false;
    if (!tried) {
        tried = true;
        auto d = cuda_device::open({.index = 0});
        if (d)
            dev.emplace(std::move(*d));
        else
            reason = "no CUDA device: " + d.error().describe();
    }
    why = reason;
    return dev ? &*dev : nullptr;
}

void cuda_mul_mat(benchmark::State& state, elem_type wt, bool cublas, std::int64_t M, std::int64_t N, std::int64_t K) {
    std::string why;
    cuda_device* dev = device(why);
    if (dev == nullptr) return state.SkipWithError(why.c_str());
    if (cublas && !cuda::detail::kernel_table_instance().with_cublas)
        return state.SkipWithError("the kernels were built without cuBLAS");
    auto be = dev->make_backend({.cublas = cublas});
    if (!be) return state.SkipWithError(be.error().describe().c_str());
    bench::mul_mat_case c;
    if (!c.make(dev->buffer_type(), wt, M, N, K)) return state.SkipWithError("allocation failed");
    c.run(state, *be, 3); // the second compute captures the CUDA graph
}

/// RAII device memory for the references.
struct device_memory {
    void* p = nullptr;
    explicit device_memory(std::size_t n) {
        if (cudaMalloc(&p, n) != cudaSuccess) p = nullptr;
    }
    ~device_memory() {
        if (p != nullptr) (void)cudaFree(p);
    }
    device_memory(const device_memory&) = delete;
    device_memory& operator=(const device_memory&) = delete;
};

void ref_d2d_copy(benchmark::State& state, std::size_t bytes) {
    std::string why;
    cuda_device* dev = device(why);
    if (dev == nullptr) return state.SkipWithError(why.c_str());
    (void)cudaSetDevice(dev->index());
    device_memory a(bytes), b(bytes);
    if (a.p == nullptr || b.p == nullptr) return state.SkipWithError("allocation failed");
    (void)cudaMemset(a.p, 1, bytes);
    for (auto _ : state) {
        if (cudaMemcpy(b.p, a.p, bytes, cudaMemcpyDeviceToDevice) != cudaSuccess ||
            cudaDeviceSynchronize() != cudaSuccess)
            return state.SkipWithError("copy failed");
    }
    state.counters["GB/s"] =
        benchmark::Counter(2.0 * static_cast<double>(bytes) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

#if defined(BACKPLANE_BENCH_HAVE_CUBLAS) && BACKPLANE_BENCH_HAVE_CUBLAS
void ref_cublas(benchmark::State& state, bool f16, int n) {
    std::string why;
    cuda_device* dev = device(why);
    if (dev == nullptr) return state.SkipWithError(why.c_str());
    (void)cudaSetDevice(dev->index());
    const std::size_t el = f16 ? 2 : 4;
    const auto nn = static_cast<std::size_t>(n) * static_cast<std::size_t>(n);
    device_memory a(nn * el), b(nn * el), c(nn * 4);
    if (a.p == nullptr || b.p == nullptr || c.p == nullptr) return state.SkipWithError("allocation failed");
    (void)cudaMemset(a.p, 0, nn * el);
    (void)cudaMemset(b.p, 0, nn * el);
    cublasHandle_t h = nullptr;
    if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) return state.SkipWithError("cublasCreate failed");
    const float one = 1.0f, zero = 0.0f;
    const cudaDataType_t t = f16 ? CUDA_R_16F : CUDA_R_32F;
    const auto gemm = [&] {
        return cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, n, n, n, &one, a.p, t, n, b.p, t, n, &zero, c.p, CUDA_R_32F, n,
                            CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    };
    bool ok = gemm() == CUBLAS_STATUS_SUCCESS && cudaDeviceSynchronize() == cudaSuccess;
    for (auto _ : state) {
        if (!ok) break;
        ok = gemm() == CUBLAS_STATUS_SUCCESS && cudaDeviceSynchronize() == cudaSuccess;
    }
    cublasDestroy(h);
    if (!ok) return state.SkipWithError("cublasGemmEx failed");
    const double flops = 2.0 * n * static_cast<double>(n) * n;
    state.counters["GFLOP/s"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
#endif

/// The llama graph over {cuda, cpu}, every weight in GPU memory, made once.
struct cuda_llama_set {
    context w{context_params{.no_alloc = true}};
    context gctx{context_params{.no_alloc = true}};
    test::llama_model m;
    test::llama_inputs in;
    graph g;
    std::optional<buffer_list> wbuf;
    cuda_backend be;
    cpu_backend cpu{cpu_backend_params{.n_threads = 2}};
    scheduler<cuda_backend, cpu_backend> sched{scheduler_params{}, be, cpu};
    explicit cuda_llama_set(cuda_backend b) : be(std::move(b)) {}
};

void cuda_llama(benchmark::State& state, bool graphs) {
    std::string why;
    cuda_device* dev = device(why);
    if (dev == nullptr) return state.SkipWithError(why.c_str());
    static std::unique_ptr<cuda_llama_set> sets[2];
    auto& s = sets[graphs ? 1 : 0];
    if (!s) {
        auto be = dev->make_backend({.cuda_graphs = graphs});
        if (!be) return state.SkipWithError(be.error().describe().c_str());
        auto made = std::make_unique<cuda_llama_set>(std::move(*be));
        made->m = test::make_llama_model(made->w, {});
        auto b = alloc_tensors(made->w, dev->buffer_type(), buffer_usage::weights);
        if (!b || !test::fill_llama_weights(made->m, 42)) return state.SkipWithError("weights failed");
        made->wbuf.emplace(std::move(*b));
        made->in = test::make_llama_inputs(made->gctx, made->m.params);
        made->g = test::build_llama_graph(made->gctx, made->m, made->in);
        s = std::move(made);
    }
    auto& sched = s->sched;
    if (!sched.alloc_graph(s->g) || !test::fill_llama_inputs(s->m.params, s->in, 42))
        return state.SkipWithError("allocation failed");
    for (int warm = 0; warm < 3; ++warm)
        if (!sched.compute(s->g) || !sched.synchronize()) return state.SkipWithError("compute failed");
    for (auto _ : state) {
        if (!sched.compute(s->g) || !sched.synchronize()) return state.SkipWithError("compute failed");
    }
    state.counters["splits"] = static_cast<double>(sched.n_splits());
    state.counters["graph_replays"] = static_cast<double>(s->be.stats().replays);
}

const bool registered = [] {
    using benchmark::RegisterBenchmark;
    const std::pair<const char*, elem_type> types[] = {
        {"f32", elem_type::f32}, {"f16", elem_type::f16}, {"q8_0", elem_type::q8_0}, {"q4_0", elem_type::q4_0}};
    for (auto [name, t] : types)
        for (const bool cublas : {false, true})
            RegisterBenchmark((std::string("cuda/mul_mat/") + name + (cublas ? "/cublas" : "/own") + "/4096").c_str(),
                              cuda_mul_mat, t, cublas, 4096, 4096, 4096)
                ->Unit(benchmark::kMillisecond)
                ->UseRealTime();
#if defined(BACKPLANE_BENCH_HAVE_CUBLAS) && BACKPLANE_BENCH_HAVE_CUBLAS
    RegisterBenchmark("cuda/ref/cublas/f32/4096", ref_cublas, false, 4096)->Unit(benchmark::kMillisecond)->UseRealTime();
    RegisterBenchmark("cuda/ref/cublas/f16/4096", ref_cublas, true, 4096)->Unit(benchmark::kMillisecond)->UseRealTime();
#endif
    // the decode step's weight types: those of the GGUF files people run
    const std::pair<const char*, elem_type> mat_vec_types[] = {
        {"f32", elem_type::f32},   {"f16", elem_type::f16},   {"q8_0", elem_type::q8_0},
        {"q4_0", elem_type::q4_0}, {"q4_K", elem_type::q4_K}, {"q5_K", elem_type::q5_K},
        {"q6_K", elem_type::q6_K}, {"mxfp4", elem_type::mxfp4}};
    for (const std::int64_t n : {4096, 8192}) {
        const std::string ns = std::to_string(n);
        for (auto [name, t] : mat_vec_types)
            RegisterBenchmark(("cuda/mat_vec/" + std::string(name) + "/" + ns).c_str(), cuda_mul_mat, t, false, n, 1, n)
                ->Unit(benchmark::kMicrosecond)
                ->UseRealTime();
        const auto q8_bytes = static_cast<std::size_t>(n * n / 32 * 34);
        RegisterBenchmark(("cuda/ref/d2d_copy/" + ns).c_str(), ref_d2d_copy, q8_bytes)
            ->Unit(benchmark::kMicrosecond)
            ->UseRealTime();
    }
    RegisterBenchmark("cuda/llama", cuda_llama, true)->Unit(benchmark::kMillisecond)->UseRealTime();
    RegisterBenchmark("cuda/llama/no_graphs", cuda_llama, false)->Unit(benchmark::kMillisecond)->UseRealTime();
    return true;
}();

} // namespace
