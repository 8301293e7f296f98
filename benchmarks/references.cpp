// Reference figures measured in the same binary and run as the CPU backend's, so that
// the backend is judged by ratios that a busy or different machine does not distort:
//
//   ref/openblas_sgemm/1024  cblas_sgemm 1024^3 with OpenBLAS on the same thread count
//   ref/read_bandwidth       streaming reads over ~2.5x the last-level cache (DRAM)
//   ref/fma_peak             register-only FMAs, enough accumulators for both FMA ports
//
// The loops are compiled for AVX-512 and AVX2 with target attributes and picked at run
// time, so the binary needs no -march flag; the label names the instruction set used.
// Each runs at every thread count of thread_counts() (1 and 2 by default).

#include "support.hpp"

#if BACKPLANE_BENCH_HAVE_OPENBLAS
#include <cblas.h> // prototypes only: the library is loaded at run time (see below)
#include <dlfcn.h>
#endif

#if defined(__x86_64__)
#include <immintrin.h>
#define BENCH_X86 1
#define BENCH_TARGET_AVX2 __attribute__((target("avx2,fma")))
#define BENCH_TARGET_AVX512 __attribute__((target("avx512f,fma")))
#else
#define BENCH_X86 0
#endif

#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

namespace {

using namespace backplane::bench;

enum class simd { portable, avx2, avx512 };

const char* to_string(simd s) {
    switch (s) {
    case simd::avx512:
        return "avx512";
    case simd::avx2:
        return "avx2";
    case simd::portable:
        return "portable";
    }
    return "?";
}

simd best_simd() {
#if BENCH_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma"))
        return simd::avx512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return simd::avx2;
#endif
    return simd::portable;
}

// -- ref/openblas_sgemm ---------------------------------------------------------------------

// OpenBLAS is loaded with dlopen on first use rather than linked, for two reasons:
// - Its kernel is chosen when the library loads, before main. OpenBLAS 0.3.21 (Debian 12)
//   does not recognise recent Xeons (this machine: family 6 model 207) and falls back to
//   its Prescott (SSE3) kernels, a fifth of the speed of its AVX-512 ones; on AMD Zen 4
//   and 5 it picks its Haswell (AVX2) kernels, half the speed of its AVX-512 ones there
//   (its detection goes by vendor and model). Loading late lets us pin
//   OPENBLAS_CORETYPE to the best kernel the CPU's instruction set allows, whatever the
//   vendor, first. The environment's OPENBLAS_CORETYPE (often set machine-wide) is
//   overridden: the reference is the fastest OpenBLAS the machine runs;
//   BACKPLANE_BENCH_OPENBLAS_CORETYPE chooses another kernel on purpose. The label names
//   the kernel used and why.
// - A linked OpenBLAS starts its thread pool at program start, beside every benchmark.
#if BACKPLANE_BENCH_HAVE_OPENBLAS
struct openblas_api {
    decltype(&::cblas_sgemm) sgemm = nullptr;
    decltype(&::openblas_set_num_threads) set_num_threads = nullptr;
    decltype(&::openblas_get_corename) corename = nullptr;
    std::string error;  ///< why it could not be loaded (empty when loaded)
    std::string why;    ///< how the kernel was chosen
};

/// The OpenBLAS kernel family for this CPU's instruction set, or null to let it detect.
const char* openblas_core_for_isa() {
#if BENCH_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512vl"))
        return "SkylakeX";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return "Haswell";
#endif
    return nullptr;
}

const openblas_api& openblas() {
    static const openblas_api api = [] {
        openblas_api a;
        const char* chosen = std::getenv("BACKPLANE_BENCH_OPENBLAS_CORETYPE");
        const char* core = chosen != nullptr ? chosen : openblas_core_for_isa();
        const char* before = std::getenv("OPENBLAS_CORETYPE");
        if (core != nullptr) {
            a.why = chosen != nullptr ? "chosen by BACKPLANE_BENCH_OPENBLAS_CORETYPE"
                                      : "pinned by the benchmark for this instruction set";
            if (before != nullptr && std::strcmp(before, core) != 0)
                a.why += std::string(", over the environment's OPENBLAS_CORETYPE=") + before;
            ::setenv("OPENBLAS_CORETYPE", core, 1); // before any other thread reads the environment
        } else {
            a.why = before != nullptr ? "OPENBLAS_CORETYPE from the environment" : "detected by OpenBLAS";
        }
        void* h = nullptr;
        for (const char* name :
             {BACKPLANE_BENCH_OPENBLAS_LIBRARY, "libopenblas.so.0", "libopenblas.so"})
            if (*name != '\0' && (h = ::dlopen(name, RTLD_NOW | RTLD_LOCAL)) != nullptr)
                break;
        if (h == nullptr) {
            const char* e = ::dlerror();
            a.error = std::string("cannot load OpenBLAS: ") + (e ? e : "not found");
            return a;
        }
        a.sgemm = reinterpret_cast<decltype(a.sgemm)>(::dlsym(h, "cblas_sgemm"));
        a.set_num_threads =
            reinterpret_cast<decltype(a.set_num_threads)>(::dlsym(h, "openblas_set_num_threads"));
        a.corename = reinterpret_cast<decltype(a.corename)>(::dlsym(h, "openblas_get_corename"));
        if (!a.sgemm || !a.set_num_threads || !a.corename)
            a.error = "the loaded BLAS is not OpenBLAS";
        return a; // never dlclose'd: OpenBLAS keeps threads
    }();
    return api;
}
#endif

void openblas_sgemm(benchmark::State& state) {
#if BACKPLANE_BENCH_HAVE_OPENBLAS
    const openblas_api& blas = openblas();
    if (!blas.error.empty()) {
        state.SkipWithError(blas.error.c_str());
        return;
    }
    constexpr int n = 1024;
    const int n_threads = static_cast<int>(state.range(0));
    std::vector<float> a(std::size_t{n} * n), b(std::size_t{n} * n), c(std::size_t{n} * n);
    fill_uniform(a.data(), a.size(), 1);
    fill_uniform(b.data(), b.size(), 2);
    blas.set_num_threads(n_threads);
    auto sgemm = [&] {
        blas.sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(),
                   n, 0.0f, c.data(), n);
    };
    sgemm(); // warm-up: OpenBLAS wakes its threads and touches its buffers
    for (auto _ : state) {
        sgemm();
        benchmark::DoNotOptimize(c.data());
        benchmark::ClobberMemory();
    }
    blas.set_num_threads(1); // its idle workers must not compete with what runs next
    state.counters["GFLOPS"] = rate(state, 2.0 * n * n * n / 1e9);
    state.SetLabel("OpenBLAS core " + std::string(blas.corename()) + " (" + blas.why + ")");
#else
    state.SkipWithError(
        "OpenBLAS's cblas.h was not found when configuring (install libopenblas-dev)");
#endif
}

// -- ref/read_bandwidth ---------------------------------------------------------------------

// Each thread reads its share as 4 contiguous parts side by side, 256 bytes of each per
// step, as a mat-vec kernel reads several rows at once: the hardware prefetchers then
// track 4 streams, which draws 5-10% more from DRAM on one core here than one stream
// (software prefetching did not help). The sums only keep the loads alive.
constexpr std::size_t read_streams = 4;
constexpr std::size_t read_step = 256;

#if BENCH_X86
BENCH_TARGET_AVX512 std::uint64_t read_avx512(const std::byte* p, std::size_t n) {
    const std::size_t part = n / read_streams;
    __m512i s0 = _mm512_setzero_si512(), s1 = s0, s2 = s0, s3 = s0;
    for (std::size_t i = 0; i < part; i += read_step)
        for (std::size_t k = 0; k < read_streams; ++k) {
            const std::byte* q = p + k * part + i;
            s0 = _mm512_add_epi64(s0, _mm512_load_si512(q));
            s1 = _mm512_add_epi64(s1, _mm512_load_si512(q + 64));
            s2 = _mm512_add_epi64(s2, _mm512_load_si512(q + 128));
            s3 = _mm512_add_epi64(s3, _mm512_load_si512(q + 192));
        }
    // stored and summed by hand: GCC 12's _mm512_reduce_add_* trip -Wuninitialized
    alignas(64) std::uint64_t lanes[8];
    _mm512_store_si512(lanes, _mm512_add_epi64(_mm512_add_epi64(s0, s1), _mm512_add_epi64(s2, s3)));
    std::uint64_t sum = 0;
    for (std::uint64_t v : lanes)
        sum += v;
    return sum;
}

BENCH_TARGET_AVX2 inline __m256i load(const std::byte* q) {
    return _mm256_load_si256(reinterpret_cast<const __m256i*>(q));
}

BENCH_TARGET_AVX2 std::uint64_t read_avx2(const std::byte* p, std::size_t n) {
    const std::size_t part = n / read_streams;
    // named accumulators: an array of them would live in memory at -O2
    __m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0;
    for (std::size_t i = 0; i < part; i += read_step)
        for (std::size_t k = 0; k < read_streams; ++k) {
            const std::byte* q = p + k * part + i;
            s0 = _mm256_add_epi64(s0, _mm256_add_epi64(load(q), load(q + 128)));
            s1 = _mm256_add_epi64(s1, _mm256_add_epi64(load(q + 32), load(q + 160)));
            s2 = _mm256_add_epi64(s2, _mm256_add_epi64(load(q + 64), load(q + 192)));
            s3 = _mm256_add_epi64(s3, _mm256_add_epi64(load(q + 96), load(q + 224)));
        }
    alignas(32) std::uint64_t lanes[4];
    _mm256_store_si256(reinterpret_cast<__m256i*>(lanes),
                       _mm256_add_epi64(_mm256_add_epi64(s0, s1), _mm256_add_epi64(s2, s3)));
    return lanes[0] + lanes[1] + lanes[2] + lanes[3];
}
#endif

std::uint64_t read_portable(const std::byte* p, std::size_t n) {
    const std::size_t part = n / read_streams;
    std::uint64_t s[4] = {};
    for (std::size_t i = 0; i < part; i += 32)
        for (std::size_t k = 0; k < read_streams; ++k)
            for (int j = 0; j < 4; ++j) {
                std::uint64_t v;
                std::memcpy(&v, p + k * part + i + 8 * j, sizeof v);
                s[j] += v;
            }
    return (s[0] + s[1]) + (s[2] + s[3]);
}

std::uint64_t read_sum(simd level, const std::byte* p, std::size_t n) {
#if BENCH_X86
    if (level == simd::avx512)
        return read_avx512(p, n);
    if (level == simd::avx2)
        return read_avx2(p, n);
#endif
    (void)level;
    return read_portable(p, n);
}

/// The streamed buffer: 64-byte aligned like the library's host data, written once so
/// that every page is backed by memory (untouched pages would all read the zero page).
struct read_buffer {
    struct aligned_free {
        void operator()(std::byte* p) const noexcept {
            ::operator delete[](p, std::align_val_t{64});
        }
    };
    std::unique_ptr<std::byte[], aligned_free> data;
    std::size_t bytes = 0;
    bool capped = false;
};

std::shared_ptr<read_buffer> make_read_buffer() {
    auto buf = std::make_shared<read_buffer>();
    std::size_t want = llc_bytes() / 2 * 5; // 2.5x the last-level cache
    want = std::max(want, 64 * mib);
    const std::size_t cap = available_bytes() / 2;
    buf->capped = want > cap;
    buf->bytes = std::min(want, cap) / mib * mib;
    buf->data.reset(static_cast<std::byte*>(::operator new[](buf->bytes, std::align_val_t{64})));
    std::memset(buf->data.get(), 0x5a, buf->bytes);
    return buf;
}

void read_bandwidth(benchmark::State& state) {
    const int n_threads = static_cast<int>(state.range(0));
    const read_buffer& buf = dataset_cache<read_buffer>("ref/read_bandwidth", make_read_buffer);
    const simd level = best_simd();
    // thread i reads its own contiguous share, whole steps of every stream
    constexpr std::size_t unit = read_streams * read_step;
    const std::size_t share = buf.bytes / static_cast<std::size_t>(n_threads) / unit * unit;
    std::vector<std::uint64_t> sums(static_cast<std::size_t>(n_threads));
    auto pass = [&] {
        fork_join(n_threads, [&](int i) {
            sums[static_cast<std::size_t>(i)] =
                read_sum(level, buf.data.get() + share * static_cast<std::size_t>(i), share);
        });
        benchmark::DoNotOptimize(sums.data());
        benchmark::ClobberMemory();
    };
    pass(); // warm-up
    for (auto _ : state)
        pass();
    state.counters["GBps"] = rate(state, static_cast<double>(share) * n_threads / 1e9);
    state.SetLabel(std::string(to_string(level)) + ", " +
                   mib_string(share * static_cast<std::size_t>(n_threads)) + " (LLC " +
                   mib_string(llc_bytes()) + (buf.capped ? ", capped by free memory)" : ")"));
}

// -- ref/fma_peak ---------------------------------------------------------------------------

// Each step is one FMA on every accumulator; the accumulators are independent, so the
// loop is bound by FMA throughput, not latency (4 cycles x 2 ports needs >= 8 chains).
// acc = acc * m + c tends to 1, so no denormals or overflow whatever the count.
constexpr std::int64_t fma_steps = std::int64_t{1} << 22;

#if BENCH_X86
constexpr int avx512_chains = 16;
constexpr int avx2_chains = 12;

BENCH_TARGET_AVX512 float fma_avx512(std::int64_t steps, float seed) {
    const __m512 m = _mm512_set1_ps(0.999999f);
    const __m512 c = _mm512_set1_ps(1e-6f);
    // distinct starting values: identical chains would be merged into one by the compiler
    const __m512 step = _mm512_set1_ps(1.0f / 64);
    __m512 a0 = _mm512_set1_ps(seed), a1 = _mm512_add_ps(a0, step), a2 = _mm512_add_ps(a1, step);
    __m512 a3 = _mm512_add_ps(a2, step), a4 = _mm512_add_ps(a3, step), a5 = _mm512_add_ps(a4, step);
    __m512 a6 = _mm512_add_ps(a5, step), a7 = _mm512_add_ps(a6, step), a8 = _mm512_add_ps(a7, step);
    __m512 a9 = _mm512_add_ps(a8, step), a10 = _mm512_add_ps(a9, step),
           a11 = _mm512_add_ps(a10, step);
    __m512 a12 = _mm512_add_ps(a11, step), a13 = _mm512_add_ps(a12, step),
           a14 = _mm512_add_ps(a13, step);
    __m512 a15 = _mm512_add_ps(a14, step);
    for (std::int64_t i = 0; i < steps; ++i) {
        a0 = _mm512_fmadd_ps(a0, m, c);
        a1 = _mm512_fmadd_ps(a1, m, c);
        a2 = _mm512_fmadd_ps(a2, m, c);
        a3 = _mm512_fmadd_ps(a3, m, c);
        a4 = _mm512_fmadd_ps(a4, m, c);
        a5 = _mm512_fmadd_ps(a5, m, c);
        a6 = _mm512_fmadd_ps(a6, m, c);
        a7 = _mm512_fmadd_ps(a7, m, c);
        a8 = _mm512_fmadd_ps(a8, m, c);
        a9 = _mm512_fmadd_ps(a9, m, c);
        a10 = _mm512_fmadd_ps(a10, m, c);
        a11 = _mm512_fmadd_ps(a11, m, c);
        a12 = _mm512_fmadd_ps(a12, m, c);
        a13 = _mm512_fmadd_ps(a13, m, c);
        a14 = _mm512_fmadd_ps(a14, m, c);
        a15 = _mm512_fmadd_ps(a15, m, c);
    }
    const __m512 s = _mm512_add_ps(
        _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)),
                      _mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(a6, a7))),
        _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a8, a9), _mm512_add_ps(a10, a11)),
                      _mm512_add_ps(_mm512_add_ps(a12, a13), _mm512_add_ps(a14, a15))));
    alignas(64) float lanes[16];
    _mm512_store_ps(lanes, s);
    float sum = 0.0f;
    for (float v : lanes)
        sum += v;
    return sum;
}

BENCH_TARGET_AVX2 float fma_avx2(std::int64_t steps, float seed) {
    const __m256 m = _mm256_set1_ps(0.999999f);
    const __m256 c = _mm256_set1_ps(1e-6f);
    const __m256 step = _mm256_set1_ps(1.0f / 64);
    __m256 a0 = _mm256_set1_ps(seed), a1 = _mm256_add_ps(a0, step), a2 = _mm256_add_ps(a1, step);
    __m256 a3 = _mm256_add_ps(a2, step), a4 = _mm256_add_ps(a3, step), a5 = _mm256_add_ps(a4, step);
    __m256 a6 = _mm256_add_ps(a5, step), a7 = _mm256_add_ps(a6, step), a8 = _mm256_add_ps(a7, step);
    __m256 a9 = _mm256_add_ps(a8, step), a10 = _mm256_add_ps(a9, step),
           a11 = _mm256_add_ps(a10, step);
    for (std::int64_t i = 0; i < steps; ++i) {
        a0 = _mm256_fmadd_ps(a0, m, c);
        a1 = _mm256_fmadd_ps(a1, m, c);
        a2 = _mm256_fmadd_ps(a2, m, c);
        a3 = _mm256_fmadd_ps(a3, m, c);
        a4 = _mm256_fmadd_ps(a4, m, c);
        a5 = _mm256_fmadd_ps(a5, m, c);
        a6 = _mm256_fmadd_ps(a6, m, c);
        a7 = _mm256_fmadd_ps(a7, m, c);
        a8 = _mm256_fmadd_ps(a8, m, c);
        a9 = _mm256_fmadd_ps(a9, m, c);
        a10 = _mm256_fmadd_ps(a10, m, c);
        a11 = _mm256_fmadd_ps(a11, m, c);
    }
    __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
                             _mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(a6, a7)));
    s = _mm256_add_ps(s, _mm256_add_ps(_mm256_add_ps(a8, a9), _mm256_add_ps(a10, a11)));
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, s);
    return ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) +
           ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
}
#endif

/// Portable fallback: 8 scalar chains (a compiler may or may not vectorise it).
float fma_portable(std::int64_t steps, float seed) {
    float a[8];
    for (int j = 0; j < 8; ++j)
        a[j] = seed + static_cast<float>(j) / 64;
    for (std::int64_t i = 0; i < steps; ++i)
        for (float& v : a)
            v = v * 0.999999f + 1e-6f;
    return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
}

/// Flops of one call of the loop for this level.
double fma_flops(simd level) {
#if BENCH_X86
    if (level == simd::avx512)
        return 2.0 * 16 * avx512_chains * static_cast<double>(fma_steps);
    if (level == simd::avx2)
        return 2.0 * 8 * avx2_chains * static_cast<double>(fma_steps);
#endif
    (void)level;
    return 2.0 * 8 * static_cast<double>(fma_steps);
}

float fma_loop(simd level, float seed) {
#if BENCH_X86
    if (level == simd::avx512)
        return fma_avx512(fma_steps, seed);
    if (level == simd::avx2)
        return fma_avx2(fma_steps, seed);
#endif
    (void)level;
    return fma_portable(fma_steps, seed);
}

void fma_peak(benchmark::State& state) {
    const int n_threads = static_cast<int>(state.range(0));
    const simd level = best_simd();
    std::vector<float> results(static_cast<std::size_t>(n_threads));
    volatile float seed = 0.5f; // not a constant the compiler could fold the loop with
    auto pass = [&] {
        fork_join(n_threads,
                  [&](int i) { results[static_cast<std::size_t>(i)] = fma_loop(level, seed); });
        benchmark::DoNotOptimize(results.data());
        benchmark::ClobberMemory();
    };
    pass(); // warm-up: brings the cores to their AVX frequency
    for (auto _ : state)
        pass();
    state.counters["GFLOPS"] = rate(state, fma_flops(level) * n_threads / 1e9);
    state.SetLabel(to_string(level));
}

[[maybe_unused]] const bool registered_references = [] {
    per_thread_count(benchmark::RegisterBenchmark("ref/openblas_sgemm/1024", openblas_sgemm))
        ->MinTime(0.5);
    per_thread_count(benchmark::RegisterBenchmark("ref/read_bandwidth", read_bandwidth))
        ->MinTime(1.0);
    per_thread_count(benchmark::RegisterBenchmark("ref/fma_peak", fma_peak))->MinTime(0.5);
    return true;
}();

} // namespace
