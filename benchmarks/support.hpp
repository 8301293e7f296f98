#pragma once
// Shared pieces of the benchmarks: machine facts (last-level cache, free memory), the
// thread counts to run at, random tensor data, counters, a tiny fork-join helper for the
// reference loops, and a one-slot cache for data sets too large to rebuild per run.
//
// Google Benchmark calls a benchmark function several times while it picks the number
// of iterations, so set-up that takes seconds (hundreds of MiB of weights) is kept in
// dataset_cache between those calls. It holds one data set at a time: asking for another
// frees the previous one first, so the binary never holds two large sets at once.

#include <backplane/backplane.hpp>
#include <backplane/backends/cpu/weight_kernels.hpp>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include <unistd.h>

namespace backplane::bench {

inline constexpr std::size_t mib = std::size_t{1} << 20;

// -- machine facts ----------------------------------------------------------------------

/// Size of the last-level cache in bytes: sysconf, then sysfs, then a 32 MiB guess.
inline std::size_t llc_bytes() {
#ifdef _SC_LEVEL3_CACHE_SIZE
    if (const long v = ::sysconf(_SC_LEVEL3_CACHE_SIZE); v > 0)
        return static_cast<std::size_t>(v);
#endif
    std::ifstream f("/sys/devices/system/cpu/cpu0/cache/index3/size");
    std::string s;
    if (f >> s && !s.empty()) {
        std::size_t scale = 1;
        switch (s.back()) {
        case 'K':
            scale = 1024;
            break;
        case 'M':
            scale = mib;
            break;
        case 'G':
            scale = 1024 * mib;
            break;
        default:
            break;
        }
        if (const auto n = std::strtoull(s.c_str(), nullptr, 10); n > 0)
            return static_cast<std::size_t>(n) * scale;
    }
    return 32 * mib;
}

/// Size of one core's L2 cache in bytes: sysconf, else a 1 MiB guess.
inline std::size_t l2_bytes() {
#ifdef _SC_LEVEL2_CACHE_SIZE
    if (const long v = ::sysconf(_SC_LEVEL2_CACHE_SIZE); v > 0)
        return static_cast<std::size_t>(v);
#endif
    return mib;
}

/// Memory the kernel says is available (MemAvailable, which counts reclaimable page
/// cache), falling back to free pages.
inline std::size_t available_bytes() {
    std::ifstream f("/proc/meminfo");
    std::string key;
    std::size_t kib = 0;
    std::string unit;
    while (f >> key >> kib >> unit)
        if (key == "MemAvailable:")
            return kib * 1024;
    const long page = ::sysconf(_SC_PAGESIZE);
    const long pages = ::sysconf(_SC_AVPHYS_PAGES);
    return page > 0 && pages > 0 ? static_cast<std::size_t>(page) * static_cast<std::size_t>(pages)
                                 : 4096 * mib;
}

/// Thread counts every multi-threaded benchmark runs at: BACKPLANE_BENCH_THREADS as a
/// comma-separated list ("1,2,4"), 1 and 2 by default.
inline const std::vector<int>& thread_counts() {
    static const std::vector<int> counts = [] {
        std::vector<int> v;
        if (const char* e = std::getenv("BACKPLANE_BENCH_THREADS")) {
            std::stringstream ss(e);
            std::string item;
            while (std::getline(ss, item, ','))
                if (const int n = std::atoi(item.c_str()); n > 0)
                    v.push_back(n);
        }
        if (v.empty())
            v = {1, 2};
        return v;
    }();
    return counts;
}

/// Adds one instance per thread count, as the argument "threads".
inline benchmark::internal::Benchmark* per_thread_count(benchmark::internal::Benchmark* b) {
    b->ArgName("threads");
    for (int n : thread_counts())
        b->Arg(n);
    return b->UseRealTime();
}

// -- thread counts of the CPU backend -----------------------------------------------------

/// Makes `b` compute with n threads; on a refused count, says why (the caller then
/// skips the benchmark rather than report a figure under the wrong thread count).
inline bool set_threads(cpu_backend& b, int n, benchmark::State& state) {
    if (status s = b.set_n_threads(n); !s) {
        state.SkipWithError(s.describe().c_str());
        return false;
    }
    return true;
}

// -- random data ------------------------------------------------------------------------

/// splitmix64: fast, fixed-seed and good enough for benchmark data.
struct rng {
    std::uint64_t state;
    std::uint64_t next() noexcept {
        std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
    /// Uniform in [-1, 1).
    float uniform() noexcept {
        return static_cast<float>(next() >> 40) * (2.0f / 16777216.0f) - 1.0f;
    }
};

inline void fill_uniform(float* p, std::size_t n, std::uint64_t seed) {
    rng r{seed};
    for (std::size_t i = 0; i < n; ++i)
        p[i] = r.uniform();
}

/// Fills a contiguous host tensor with uniform [-1, 1) values stored in its type
/// (quantized types are quantized row by row, as weights would be).
inline void fill_random(tensor& t, std::uint64_t seed) {
    std::vector<float> row(static_cast<std::size_t>(t.ne[0]));
    rng r{seed};
    for (std::int64_t i = 0; i < t.nrows(); ++i) {
        for (float& v : row)
            v = r.uniform();
        from_float_row(t.type, row.data(),
                       static_cast<std::byte*>(t.data) + static_cast<std::size_t>(i) * t.nb[1],
                       t.ne[0]);
    }
}

/// Spot-checks a computed 2-D mul_mat (out[m, n] = sum_k a[k, m] * b[k, n]) at `samples`
/// points spread over the output, against sums in double over a's stored values. The
/// tolerance allows for the backend quantizing b for quantized weights (~1% of the sum of
/// |products|): it catches wrong or missing work, not rounding. Empty when all agree,
/// else a message naming the first bad point.
inline std::string check_mul_mat(const tensor& out, int samples = 64) {
    const tensor& a = *out.src[0];
    const tensor& b = *out.src[1];
    const std::int64_t K = a.ne[0], M = out.ne[0], N = out.ne[1];
    std::vector<float> arow(static_cast<std::size_t>(K)), bcol(static_cast<std::size_t>(K));
    rng r{12345};
    for (int s = 0; s < samples; ++s) {
        const auto m = static_cast<std::int64_t>(r.next() % static_cast<std::uint64_t>(M));
        const auto n = static_cast<std::int64_t>(r.next() % static_cast<std::uint64_t>(N));
        to_float_row(a.type,
                     static_cast<const std::byte*>(a.data) + static_cast<std::size_t>(m) * a.nb[1],
                     arow.data(), K);
        to_float_row(b.type,
                     static_cast<const std::byte*>(b.data) + static_cast<std::size_t>(n) * b.nb[1],
                     bcol.data(), K);
        double sum = 0.0, mag = 0.0;
        for (std::size_t k = 0; k < arow.size(); ++k) {
            sum += static_cast<double>(arow[k]) * bcol[k];
            mag += std::abs(static_cast<double>(arow[k]) * bcol[k]);
        }
        float got = 0.0f;
        std::memcpy(&got,
                    static_cast<const std::byte*>(out.data) +
                        static_cast<std::size_t>(m) * out.nb[0] +
                        static_cast<std::size_t>(n) * out.nb[1],
                    sizeof got);
        if (!(std::abs(got - sum) <= 0.01 * mag + 1e-3)) // also catches NaN
            return "wrong result: out[" + std::to_string(m) + ", " + std::to_string(n) +
                   "] = " + std::to_string(got) + ", expected " + std::to_string(sum);
    }
    return {};
}

// -- counters ---------------------------------------------------------------------------

/// units per second (e.g. GFLOP/s when units are 1e9 flops per iteration).
inline benchmark::Counter rate(const benchmark::State& state, double units_per_iteration) {
    return {units_per_iteration * static_cast<double>(state.iterations()),
            benchmark::Counter::kIsRate};
}

// -- fork-join for the reference loops ----------------------------------------------------

/// Runs f(i) for i in [0, n) on n threads, the calling thread taking i = 0. Thread start
/// costs tens of microseconds; the reference loops run for tens of milliseconds.
template <class F> void fork_join(int n, F&& f) {
    std::vector<std::thread> workers;
    workers.reserve(static_cast<std::size_t>(n > 1 ? n - 1 : 0));
    for (int i = 1; i < n; ++i)
        workers.emplace_back([&f, i] { f(i); });
    f(0);
    for (auto& w : workers)
        w.join();
}

// -- one-slot cache for large data sets ---------------------------------------------------

namespace detail {
struct dataset_slot {
    std::string key;
    std::shared_ptr<void> data;
};
inline dataset_slot& slot() {
    static dataset_slot s;
    return s;
}
} // namespace detail

/// The data set named `key`, made by make() (returning std::shared_ptr<T>) unless it is
/// the one already held. The key must name T's family ("mat_vec/q4_0").
template <class T, class Make> T& dataset_cache(const std::string& key, Make&& make) {
    auto& s = detail::slot();
    if (s.data == nullptr || s.key != key) {
        s.data.reset(); // free the old set before building the new one
        s.key.clear();
        std::shared_ptr<T> fresh = std::forward<Make>(make)();
        s.data = fresh;
        s.key = key;
    }
    return *static_cast<T*>(s.data.get());
}

/// Human-readable MiB.
inline std::string mib_string(std::size_t bytes) {
    std::ostringstream os;
    os.setf(std::ios::fixed);
    os.precision(bytes % mib == 0 ? 0 : 1);
    os << static_cast<double>(bytes) / static_cast<double>(mib) << " MiB";
    return os.str();
}

/// A mul_mat of a {K, M} weight of type wt by a {K, N} f32 activation, in one buffer of
/// `bt` (any backend's buffer type), filled with random values through the host.
struct mul_mat_case {
    context ctx{context_params{.no_alloc = true}};
    tensor* a = nullptr;
    tensor* b = nullptr;
    tensor* out = nullptr;
    graph g;
    std::optional<buffer_list> buf;

    template <class BT>
    bool make(const BT& bt, elem_type wt, std::int64_t M, std::int64_t N, std::int64_t K) {
        a = ctx.new_tensor_2d(wt, K, M);
        b = ctx.new_tensor_2d(elem_type::f32, K, N);
        out = mul_mat(ctx, a, b);
        g = graph(out);
        auto r = alloc_tensors(ctx, bt);
        if (!r) return false;
        buf.emplace(std::move(*r));
        std::uint64_t seed = 1;
        for (tensor* t : {a, b}) {
            context hctx(context_params{.no_alloc = false});
            tensor* h = hctx.new_tensor_2d(t->type, t->ne[0], t->ne[1]);
            fill_random(*h, seed++);
            if (!tensor_set(*t, h->data, 0, t->nbytes())) return false;
        }
        return true;
    }

    /// Computes the product `warm` times on backend `be`, then once per iteration (with
    /// a synchronize), and reports GFLOP/s, and for a mat-vec (N = 1) the weight's GB/s.
    template <class B>
    void run(benchmark::State& state, B& be, int warm = 1) {
        for (int i = 0; i < warm; ++i)
            if (!be.compute(g) || !be.synchronize()) return state.SkipWithError("compute failed");
        for (auto _ : state) {
            if (!be.compute(g)) return state.SkipWithError("compute failed");
            if (!be.synchronize()) return state.SkipWithError("synchronize failed");
        }
        const double flops = 2.0 * static_cast<double>(a->ne[1]) * static_cast<double>(b->ne[1]) *
                             static_cast<double>(a->ne[0]);
        state.counters["GFLOP/s"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
        if (b->ne[1] == 1)
            state.counters["GB/s"] = benchmark::Counter(static_cast<double>(a->nbytes()) * 1e-9,
                                                        benchmark::Counter::kIsIterationInvariantRate);
    }
};

} // namespace backplane::bench
