// A SwiGLU MLP block on a CUDA GPU, next to the CPU: weights in device memory filled by a
// kernel of this file (backplane's headers and your own CUDA code share one .cu file), the
// input in host memory, the scheduler moving what has to move. The result is checked
// against the CPU backend alone.
//
//   build/default/examples/cuda_mlp [tokens]
//
// Without an NVIDIA driver or GPU it says so and exits 0.

#include <backplane/backends/cuda.hpp>
#include <backplane/backplane.hpp>
#include <backplane/sched.hpp>

#include <cuda_fp16.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

using namespace backplane;

namespace {

/// Fills n f16 values with a hash of their index, scaled to [-a, a): weights made where
/// they live, with no host copy.
__global__ void fill_weights(__half* w, std::int64_t n, std::uint32_t seed, float a) {
    for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
         i += std::int64_t{gridDim.x} * blockDim.x) {
        std::uint32_t h = static_cast<std::uint32_t>(i) * 2654435761u ^ seed;
        h ^= h >> 15;
        h *= 2246822519u;
        h ^= h >> 13;
        w[i] = __float2half((static_cast<float>(h >> 8) / 16777216.0f * 2.0f - 1.0f) * a);
    }
}

constexpr std::int64_t n_embd = 1024, n_ff = 2816;

struct block {
    tensor* norm;
    tensor *gate, *up, *down; // f16
};

/// out = x + down(silu(gate(n)) * up(n)), n = rms_norm(x) * norm
tensor* mlp(context& ctx, const block& w, tensor* x) {
    tensor* n = mul(ctx, rms_norm(ctx, x, 1e-5f), w.norm);
    tensor* h = mul(ctx, silu(ctx, mul_mat(ctx, w.gate, n)), mul_mat(ctx, w.up, n));
    return add(ctx, x, mul_mat(ctx, w.down, h));
}

int fail(const char* what, const status& s) {
    std::fprintf(stderr, "cuda_mlp: %s: %s\n", what, s.describe().c_str());
    return 1;
}

/// A token count: a whole decimal number >= 1, nothing else.
bool parse_tokens(const char* s, std::int64_t& out) {
    char* end = nullptr;
    const long long v = std::strtoll(s, &end, 10);
    if (end == s || *end != '\0' || v < 1) return false;
    out = v;
    return true;
}

} // namespace

int main(int argc, char** argv) {
    std::int64_t tokens = 8;
    if (argc > 2 || (argc == 2 && !parse_tokens(argv[1], tokens))) {
        std::fprintf(stderr, "cuda_mlp: bad arguments\nusage: cuda_mlp [tokens] (tokens: an integer >= 1, default 8)\n");
        return 2;
    }
    auto dev = cuda_device::open({.index = 0});
    if (!dev) {
        std::printf("cuda_mlp: no CUDA device here (%s); nothing to do\n", dev.error().describe().c_str());
        return 0;
    }
    std::printf("device: %s: %s\n", std::string(dev->name()).c_str(), std::string(dev->description()).c_str());

    // weights in GPU memory, filled there
    context wctx({.no_alloc = true});
    block w{wctx.new_tensor_1d(elem_type::f32, n_embd), wctx.new_tensor_2d(elem_type::f16, n_embd, n_ff),
            wctx.new_tensor_2d(elem_type::f16, n_embd, n_ff), wctx.new_tensor_2d(elem_type::f16, n_ff, n_embd)};
    auto wbuf = alloc_tensors(wctx, dev->buffer_type(), buffer_usage::weights);
    if (!wbuf) return fail("allocating the weights", wbuf.error());
    std::uint32_t seed = 1;
    for (tensor* t : {w.gate, w.up, w.down})
        fill_weights<<<256, 256>>>(static_cast<__half*>(t->data), t->nelements(), seed++,
                                   1.0f / std::sqrt(static_cast<float>(t->ne[0])));
    if (cudaDeviceSynchronize() != cudaSuccess) return fail("filling the weights", status(errc::device_error, "kernel"));
    const std::vector<float> ones(static_cast<std::size_t>(n_embd), 1.0f);
    if (status s = tensor_set(*w.norm, ones.data(), 0, ones.size() * sizeof(float)); !s) return fail("norm", s);

    // the graph; its input in host memory
    context gctx({.no_alloc = true});
    tensor* x = gctx.new_tensor_2d(elem_type::f32, n_embd, tokens);
    x->set_flag(tensor_flag::input);
    tensor* y = mlp(gctx, w, x);
    graph g(y);

    auto cuda = dev->make_backend();
    if (!cuda) return fail("making a stream", cuda.error());
    cpu_backend cpu;
    scheduler sched(scheduler_params{}, *cuda, cpu);
    if (status s = sched.alloc_graph(g); !s) return fail("allocating the graph", s);
    std::vector<float> in(static_cast<std::size_t>(x->nelements()));
    for (std::size_t i = 0; i < in.size(); ++i) in[i] = std::sin(0.01f * static_cast<float>(i));
    if (status s = tensor_set(*x, in.data(), 0, in.size() * sizeof(float)); !s) return fail("input", s);

    double best_ms = 1e30;
    for (int run = 0; run < 5; ++run) { // the second run captures a CUDA graph, the rest replay it
        const auto t0 = std::chrono::steady_clock::now();
        if (status s = sched.compute(g); !s) return fail("compute", s);
        if (status s = sched.synchronize(); !s) return fail("synchronize", s);
        best_ms = std::min(best_ms, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::vector<float> got(static_cast<std::size_t>(y->nelements()));
    if (status s = tensor_get(*y, got.data(), 0, got.size() * sizeof(float)); !s) return fail("output", s);

    // the same block on the CPU alone, with the weights copied back
    context rctx;
    block rw{rctx.new_tensor_1d(elem_type::f32, n_embd), rctx.new_tensor_2d(elem_type::f16, n_embd, n_ff),
             rctx.new_tensor_2d(elem_type::f16, n_embd, n_ff), rctx.new_tensor_2d(elem_type::f16, n_ff, n_embd)};
    const tensor* from[] = {w.norm, w.gate, w.up, w.down};
    tensor* to[] = {rw.norm, rw.gate, rw.up, rw.down};
    for (int i = 0; i < 4; ++i)
        if (status s = tensor_get(*from[i], to[i]->data, 0, to[i]->nbytes()); !s) return fail("reading weights", s);
    tensor* rx = rctx.new_tensor_2d(elem_type::f32, n_embd, tokens);
    std::copy(in.begin(), in.end(), static_cast<float*>(rx->data));
    tensor* ry = mlp(rctx, rw, rx);
    graph rg(ry);
    if (status s = cpu.compute(rg); !s) return fail("CPU reference", s);
    const float* want = static_cast<const float*>(ry->data);
    double num = 0, den = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
        num += (got[i] - want[i]) * static_cast<double>(got[i] - want[i]);
        den += want[i] * static_cast<double>(want[i]);
    }
    const double nmse = den > 0 ? num / den : num;
    const auto st = cuda->stats();
    std::printf("%lld tokens: %d splits, %.3f ms per run (best of 5), CUDA graphs captured %llu, replayed %llu\n",
                static_cast<long long>(tokens), static_cast<int>(sched.n_splits()), best_ms,
                static_cast<unsigned long long>(st.captures), static_cast<unsigned long long>(st.replays));
    std::printf("against the CPU alone: nmse %.3g (%s)\n", nmse, nmse <= 1e-4 ? "ok" : "MISMATCH");
    return nmse <= 1e-4 ? 0 : 1;
}
