// A 3 x 3 convolution of a 64 x 64 image of 256 channels into 256 channels (stride 1, pad
// 1: the size kept), the shape of a VAE or U-Net block, in f32, computed as the one node
// conv_2d_direct (the CPU's fast path: the windows unrolled into tiles, times the kernel
// with the fast GEMM) with an f32 and an f16 kernel, and as ggml's composite conv_2d
// (im2col, mul_mat, cont) with an f16 kernel, for comparison with ggml's CPU on the
// same shape (test-backend-ops' conv_2d perf cases, or llama.cpp's examples).
//
//   cpu/conv_2d/direct_f32/64x64x256   conv_2d_direct, f32 kernel
//   cpu/conv_2d/direct_f16/64x64x256   conv_2d_direct, f16 kernel (the input rounded to f16)
//   cpu/conv_2d/im2col_f16/64x64x256   conv_2d: im2col into f16, then mul_mat
//
// Each reports GFLOPS (2 * 64 * 64 * 256 * 3 * 3 * 256 per compute, 2.4 G multiply-adds).
// The set-up checks the result at a few points against sums in double.

#include "support.hpp"

#include <cmath>
#include <memory>
#include <string>

namespace {

using namespace backplane;
using namespace backplane::bench;

constexpr std::int64_t conv_width = 64, conv_height = 64, conv_channels = 256, conv_kernel = 3;

enum class conv_form { direct_f32, direct_f16, im2col_f16 };

const char* conv_name(conv_form f) {
    return f == conv_form::direct_f32 ? "direct_f32" : f == conv_form::direct_f16 ? "direct_f16" : "im2col_f16";
}

/// The image, the kernel in the form's type and the form's graph.
struct conv_set {
    context ctx{context_params{.no_alloc = false}};
    graph g;
    tensor* image = nullptr;
    tensor* kernel = nullptr;
    tensor* out = nullptr;
};

std::shared_ptr<conv_set> make_conv_set(conv_form form) {
    auto set = std::make_shared<conv_set>();
    const elem_type kt = form == conv_form::direct_f32 ? elem_type::f32 : elem_type::f16;
    tensor* image = set->image = set->ctx.new_tensor_4d(elem_type::f32, conv_width, conv_height, conv_channels, 1);
    tensor* kernel = set->kernel = set->ctx.new_tensor_4d(kt, conv_kernel, conv_kernel, conv_channels, conv_channels);
    fill_random(*image, 1);
    fill_random(*kernel, 2);
    set->out = form == conv_form::im2col_f16 ? conv_2d(set->ctx, kernel, image, 1, 1, 1, 1, 1, 1)
                                             : conv_2d_direct(set->ctx, kernel, image, 1, 1, 1, 1, 1, 1);
    set->g.build_forward(set->out);
    return set;
}

/// Value i of a contiguous f32 or f16 tensor.
double conv_value_at(const tensor& t, std::int64_t i) {
    if (t.type == elem_type::f16) return f16_to_f32(static_cast<const f16_t*>(t.data)[i]);
    return static_cast<const float*>(t.data)[i];
}

/// Empty when output (x, y, o) at a few positions (corners, edges, inside) is the sum over
/// the kernel's taps computed here in double, within what rounding the input to f16 and
/// summing in f32 allow; it catches wrong or missing work, not rounding.
std::string conv_check_points(const tensor& kernel, const tensor& image, const tensor& out) {
    const std::int64_t points[][3] = {{0, 0, 0}, {63, 63, 255}, {31, 0, 17}, {0, 40, 128}, {20, 33, 99}};
    for (const auto& [x, y, o] : points) {
        double sum = 0.0, size = 0.0;
        for (std::int64_t c = 0; c < conv_channels; ++c)
            for (std::int64_t ky = 0; ky < conv_kernel; ++ky)
                for (std::int64_t kx = 0; kx < conv_kernel; ++kx) {
                    const std::int64_t ix = x + kx - 1, iy = y + ky - 1;
                    if (ix < 0 || ix >= conv_width || iy < 0 || iy >= conv_height) continue;
                    const double p = conv_value_at(kernel, ((o * conv_channels + c) * conv_kernel + ky) * conv_kernel + kx) *
                                     conv_value_at(image, (c * conv_height + iy) * conv_width + ix);
                    sum += p;
                    size += std::abs(p);
                }
        const double got = conv_value_at(out, (o * conv_height + y) * conv_width + x);
        if (std::abs(got - sum) > 1e-3 * size + 1e-6)
            return "conv_2d differs from the sum at (" + std::to_string(x) + ", " + std::to_string(y) + ", " +
                   std::to_string(o) + ")";
    }
    return {};
}

void conv_bench(benchmark::State& state, conv_form form) {
    cpu_backend backend;
    if (!set_threads(backend, static_cast<int>(state.range(0)), state))
        return;
    conv_set& set = dataset_cache<conv_set>(std::string("cpu/conv_2d/") + conv_name(form), [&] { return make_conv_set(form); });
    if (status s = backend.compute(set.g); !s) { // warm-up, and the result for the check
        state.SkipWithError(s.describe().c_str());
        return;
    }
    if (const std::string bad = conv_check_points(*set.kernel, *set.image, *set.out); !bad.empty()) {
        state.SkipWithError(bad.c_str());
        return;
    }
    for (auto _ : state) {
        if (status s = backend.compute(set.g); !s) {
            state.SkipWithError(s.describe().c_str());
            break;
        }
        benchmark::ClobberMemory();
    }
    const double flops = 2.0 * static_cast<double>(conv_width * conv_height * conv_channels) * conv_kernel * conv_kernel * conv_channels;
    state.counters["GFLOPS"] = rate(state, flops / 1e9);
    state.SetLabel(std::string(conv_name(form)) + ", isa " + std::string(cpu::to_string(cpu::active_isa())));
}

[[maybe_unused]] const bool registered_conv = [] {
    for (const conv_form form : {conv_form::direct_f32, conv_form::direct_f16, conv_form::im2col_f16}) {
        const std::string name = std::string("cpu/conv_2d/") + conv_name(form) + "/64x64x256";
        per_thread_count(benchmark::RegisterBenchmark(name.c_str(), conv_bench, form))->MinTime(1.0);
    }
    return true;
}();

} // namespace
