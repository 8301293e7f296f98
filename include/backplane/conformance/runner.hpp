#pragma once
// Running catalogue cases on a backend against the CPU reference kernels, shrinking a
// failing case, listing cases and measuring them. The engine of the backplane-conformance
// tool and of the conformance tests; usable on its own with any backend (a type modelling
// the backend concept, or an any_backend).
//
//     cpu_backend ref({.n_threads = 1, .reference = true});
//     conformance::case_result r = conformance::run_case(ref, my_backend, spec);
//     if (r.outcome == conformance::outcome::fail) {
//         conformance::case_spec small = conformance::shrink(ref, my_backend, spec);
//         std::puts(conformance::repro_args(small).c_str());
//     }
//
// A case passes when the target's result has no NaN or infinity where the reference has
// none, its NMSE against the reference is at most the case's threshold (and every
// element is equal for exact cases), no guard byte around any tensor of the target's copy
// was written, and the compute succeeded. The target's output starts as 0xff bytes (NaN),
// so an element it never writes fails.

#include <backplane/backends/cpu.hpp>
#include <backplane/conformance/catalogue.hpp>
#include <backplane/conformance/compare.hpp>
#include <backplane/core/context.hpp>
#include <backplane/core/graph.hpp>
#include <backplane/memory/tensor_io.hpp>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace backplane::conformance {

enum class outcome : std::uint8_t {
    pass,
    fail,
    unsupported, ///< the target's supports_op refuses the node
    invalid,     ///< the family cannot build this spec (or the reference does not compute it)
};
constexpr std::string_view to_string(outcome o) noexcept {
    switch (o) {
    case outcome::pass:
        return "pass";
    case outcome::fail:
        return "FAIL";
    case outcome::unsupported:
        return "unsupported";
    case outcome::invalid:
        return "invalid";
    }
    return "?";
}

/// How two results compare.
struct comparison {
    double nmse = 0;
    double max_abs_err = 0;
    std::size_t mismatches = 0; ///< elements not bit-equal as f32
    std::size_t bad_values = 0; ///< NaN or infinity in the target where the reference is finite
    std::size_t worst = 0;      ///< index of the largest absolute error
};

/// NMSE = sum (a - e)^2 / sum e^2 (the plain sum of squares when the reference is all 0).
inline comparison compare_values(const std::vector<float>& expected,
                                 const std::vector<float>& actual) {
    comparison c;
    double num = 0, den = 0;
    for (std::size_t i = 0; i < expected.size() && i < actual.size(); ++i) {
        const double e = expected[i], a = actual[i];
        if (std::isfinite(e) && !std::isfinite(a)) {
            ++c.bad_values;
            continue;
        }
        if (!std::isfinite(e)) { // the reference's infinities must be matched exactly
            if (std::memcmp(&expected[i], &actual[i], sizeof(float)) != 0 &&
                !(std::isnan(e) && std::isnan(a)))
                ++c.mismatches;
            continue;
        }
        if (e != a)
            ++c.mismatches;
        const double d = a - e;
        if (std::abs(d) > c.max_abs_err) {
            c.max_abs_err = std::abs(d);
            c.worst = i;
        }
        num += d * d;
        den += e * e;
    }
    if (expected.size() != actual.size())
        c.mismatches += expected.size() > actual.size() ? expected.size() - actual.size()
                                                        : actual.size() - expected.size();
    c.nmse = den > 0 ? num / den : num;
    return c;
}

struct case_result {
    case_spec spec;
    outcome result = outcome::invalid;
    comparison cmp;
    double max_nmse = 0;
    bool exact = false;
    std::string message; ///< why it failed (or was invalid / unsupported)
};

namespace detail {

/// Every byte of t's root set to 0xff (NaN in every float type).
inline void poison_root(tensor& t) {
    tensor& root = t.view_src != nullptr ? *t.view_src : t;
    if (root.data != nullptr && root.buffer == nullptr)
        std::memset(root.data, 0xff, root.nbytes());
}

inline std::string describe_failure(const comparison& c, double max_nmse, bool exact) {
    auto g = [](double v) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.3g", v);
        return std::string(buf);
    };
    std::string s = "nmse " + g(c.nmse) + " (max " + g(max_nmse) + ")";
    if (c.bad_values)
        s += ", " + std::to_string(c.bad_values) + " NaN/inf values";
    if (exact && c.mismatches)
        s += ", " + std::to_string(c.mismatches) + " elements differ (exact op)";
    s += ", max abs error " + g(c.max_abs_err) + " at element " + std::to_string(c.worst);
    return s;
}

} // namespace detail

/// Guard bytes around every tensor of the target's copy.
inline constexpr std::size_t guard_bytes = 64;

/// Runs one case: the reference computes the host graph, the target a guarded copy of it
/// in its own memory (compare_backends, whole-graph mode), and the results are compared.
template <class Ref, class Target>
case_result run_case(Ref& reference, Target& target, const case_spec& spec) {
    case_result r;
    r.spec = spec;
    context ctx;
    std::optional<built_case> b;
    try {
        b = build(ctx, spec);
    } catch (const error& e) { // out of host memory building it
        r.message = e.what();
        return r;
    }
    if (!b) {
        r.message = "the catalogue cannot build " + to_string(spec);
        return r;
    }
    if (!reference.supports_op(*b->out)) {
        r.message = "the reference does not compute " + to_string(spec);
        return r;
    }
    if (!target.supports_op(*b->out)) {
        r.result = outcome::unsupported;
        return r;
    }
    r.max_nmse = b->max_nmse;
    r.exact = b->exact;
    detail::poison_root(*b->out);
    graph g(b->out);
    tensor* nodes[] = {b->out};
    std::vector<float> expected, actual;
    status read;
    auto cb = [&](std::size_t, const tensor& t1, const tensor& t2) {
        auto e = tensor_read_f32(t1);
        auto a = tensor_read_f32(t2);
        if (!e)
            read = e.error();
        else if (!a)
            read = a.error();
        else {
            expected = std::move(*e);
            actual = std::move(*a);
        }
        return true;
    };
    auto cmp =
        compare_backends(reference, target, g, cb,
                         {.nodes = nodes, .copy = {.guard_bytes = guard_bytes, .fill_byte = 0xff}});
    if (!cmp) {
        r.result = outcome::fail;
        r.message = cmp.error().describe();
        return r;
    }
    if (!read) {
        r.result = outcome::fail;
        r.message = read.describe();
        return r;
    }
    std::size_t ref_bad = 0;
    for (float v : expected)
        ref_bad += std::isfinite(v) ? 0 : 1;
    if (ref_bad != 0) {
        r.message = "the reference result has " + std::to_string(ref_bad) + " NaN/inf values";
        return r; // invalid: the catalogue's inputs should never do this
    }
    r.cmp = compare_values(expected, actual);
    const bool ok =
        r.cmp.bad_values == 0 && r.cmp.nmse <= r.max_nmse && (!r.exact || r.cmp.mismatches == 0);
    r.result = ok ? outcome::pass : outcome::fail;
    if (!ok)
        r.message = detail::describe_failure(r.cmp, r.max_nmse, r.exact);
    return r;
}

/// The smallest failing case reachable from `failing` by shrinking one dimension at a
/// time (to 1 or the smallest legal extent, to half, by one step), keeping every step
/// that still fails on the target with the same seed. At most `max_runs` cases are run.
template <class Ref, class Target>
case_spec shrink(Ref& reference, Target& target, case_spec failing, int max_runs = 400) {
    int runs = 0;
    bool progress = true;
    while (progress && runs < max_runs) {
        progress = false;
        for (std::size_t d = 0; d < max_dims && !progress; ++d) {
            const std::int64_t n = failing.ne[d];
            // dim 0 of quantized operands and rope's head_dim move in steps of their block
            std::int64_t step = 1;
            if (d == 0) {
                for (elem_type t : failing.types)
                    if (is_quantized(t))
                        step = std::max<std::int64_t>(step, block_size(t));
                if (failing.op == "rope")
                    step = std::max<std::int64_t>(step, 2);
            }
            std::vector<std::int64_t> candidates{step, (n / 2) / step * step, n - step};
            for (std::int64_t c : candidates) {
                if (c <= 0 || c >= n || runs >= max_runs)
                    continue;
                case_spec s = failing;
                s.ne[d] = c;
                ++runs;
                const case_result r = run_case(reference, target, s);
                if (r.result == outcome::fail) {
                    failing = s;
                    progress = true;
                    break;
                }
            }
        }
    }
    return failing;
}

/// Cases of family f for one type combination: `count` random shapes from `seed`, the
/// variants taken in turn; specs the family cannot build are replaced by variant 0.
inline std::vector<case_spec> cases_for(const op_cases& f, const std::vector<elem_type>& types,
                                        int count, std::uint32_t seed) {
    std::vector<case_spec> out;
    std::seed_seq seq{seed, static_cast<std::uint32_t>(std::hash<std::string_view>{}(f.name)),
                      static_cast<std::uint32_t>(
                          types.empty() ? 0
                                        : static_cast<int>(types[0]) * 8 +
                                              (types.size() > 1 ? static_cast<int>(types[1]) : 0))};
    std::mt19937 rng(seq);
    for (int i = 0; i < count; ++i) {
        case_spec c{std::string(f.name), types, f.shape(rng, types), 0,
                    static_cast<std::uint32_t>(rng())};
        c.variant = static_cast<int>(rng() % static_cast<std::uint32_t>(f.n_variants));
        context probe;
        if (!build(probe, c))
            c.variant = 0;
        out.push_back(std::move(c));
    }
    return out;
}

/// Whether target supports family f for these types (on the probe shape: 64 x 3 x 2 x 1,
/// dim 0 a whole block of the types with longer ones, 256 for the K-quants).
template <class Target>
bool supports(const Target& target, const op_cases& f, const std::vector<elem_type>& types) {
    std::int64_t ne0 = 64;
    for (elem_type t : types) ne0 = std::max(ne0, block_size(t));
    for (int v = 0; v < std::min(f.n_variants, 2); ++v) {
        context ctx;
        case_spec probe{std::string(f.name), types, {ne0, 3, 2, 1}, v, 1};
        auto b = build(ctx, probe);
        if (b && target.supports_op(*b->out))
            return true;
    }
    return false;
}

/// True when the catalogue builds family f for these types and the reference computes
/// it: a type combination the catalogue claims.
template <class Ref>
bool claimed(const Ref& reference, const op_cases& f, const std::vector<elem_type>& types) {
    return supports(reference, f, types);
}

/// One timed case of the perf mode.
struct perf_result {
    case_spec spec;
    outcome result = outcome::invalid;
    double seconds = 0; ///< per compute (median of the runs)
    double gflops = 0;  ///< when the op has arithmetic (mul_mat)
    double gbytes = 0;  ///< bytes read and written per second, in GB/s
    std::string message;
};

/// Times spec on target: a copy in its memory, one warm-up, then computes for at least
/// `min_seconds` (and at least 3), the median per compute.
template <class Target>
perf_result run_perf(Target& target, const case_spec& spec, double min_seconds = 0.5) {
    perf_result r;
    r.spec = spec;
    context ctx;
    auto b = build(ctx, spec);
    if (!b) {
        r.message = "the catalogue cannot build " + to_string(spec);
        return r;
    }
    if (!target.supports_op(*b->out)) {
        r.result = outcome::unsupported;
        return r;
    }
    graph g(b->out);
    auto copy = graph_copy(target, g);
    if (!copy) {
        r.result = outcome::fail;
        r.message = copy.error().describe();
        return r;
    }
    auto once = [&]() -> status {
        status s = target.compute(copy->graph());
        return s ? target.synchronize() : s;
    };
    if (auto s = once(); !s) {
        r.result = outcome::fail;
        r.message = s.describe();
        return r;
    }
    std::vector<double> times;
    const auto start = std::chrono::steady_clock::now();
    while (times.size() < 3 ||
           std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() <
               min_seconds) {
        const auto t0 = std::chrono::steady_clock::now();
        if (auto s = once(); !s) {
            r.result = outcome::fail;
            r.message = s.describe();
            return r;
        }
        times.push_back(
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        if (times.size() >= 1000)
            break;
    }
    std::sort(times.begin(), times.end());
    r.seconds = times[times.size() / 2];
    r.result = outcome::pass;
    if (b->flops > 0)
        r.gflops = b->flops / r.seconds * 1e-9;
    r.gbytes = b->bytes / r.seconds * 1e-9;
    return r;
}

} // namespace backplane::conformance
