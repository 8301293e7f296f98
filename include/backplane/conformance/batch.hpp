#pragma once
// Many cases in one graph, computed by the CPU backend's reference kernels and then by
// every target, compared node by node: the engine of the backends' parity tests
// (conformance/parity.hpp holds their cases). Batching keeps them fast: thousands of
// small nodes cost one graph copy and one compute per target, not one each.
//
//     conformance::batch b(7, {my_target});
//     tensor* a = b.input(elem_type::f16, b.gen.rows(elem_type::f16), b.any_layout(elem_type::f16));
//     if (b.claimed([&] { return sqr(b.ctx, b.leaf(elem_type::f16, {32, 1, 1, 1})); }))
//         b.add(sqr(b.ctx, a));
//     conformance::batch_report r = b.run();
//     if (!r.ok()) for (auto& f : r.failures) std::puts(f.c_str());
//
// A target is a name, its supports_op and a compute that leaves its results in the host
// memory of the graph's tensors (a device target copies the graph there and back). A
// combination is claimed when every target supports it; a case the builder refuses or
// a target refuses although its combination is claimed is a failure of the batch.
//
// Each case's output starts as 0xff bytes (NaN in every float type) before every
// compute, so an element a target never writes fails. A case passes on a target when
// the target's result has no NaN or infinity where the reference has none and its NMSE
// (and, for exact ops, every element) is within threshold_for(node)
// (conformance/thresholds.hpp).

#include <backplane/backends/cpu.hpp>
#include <backplane/backends/cpu/weight_kernels.hpp>
#include <backplane/conformance/inputs.hpp>
#include <backplane/conformance/runner.hpp>
#include <backplane/conformance/shapes.hpp>
#include <backplane/conformance/thresholds.hpp>
#include <backplane/core/context.hpp>
#include <backplane/core/detail/describe.hpp>
#include <backplane/core/error.hpp>
#include <backplane/core/graph.hpp>
#include <backplane/memory/tensor_io.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace backplane::conformance {

/// A backend configuration to compare with the reference.
struct target {
    std::string name;
    std::function<bool(const tensor&)> supports;
    /// Computes g and leaves the results in the host memory of g's tensors.
    std::function<status(graph&)> compute;
};

/// What a batch's run found.
struct batch_report {
    std::size_t cases = 0;
    int combinations = 0;
    int sampled = 0; ///< the combinations that got cases (all of them unless the batch samples)
    std::size_t targets = 0;
    std::size_t failed = 0;            ///< failed comparisons, over all targets
    std::vector<std::string> failures; ///< the first few in full, then the problems
    [[nodiscard]] bool ok() const { return failed == 0 && failures.empty(); }
    /// "2520 cases, 126 type combinations, 4 targets" ("..., 42 of 126 type combinations
    /// sampled, ..." when the batch samples).
    [[nodiscard]] std::string summary() const {
        const std::string combos = sampled == combinations
                                       ? std::to_string(combinations) + " type combinations"
                                       : std::to_string(sampled) + " of " + std::to_string(combinations) +
                                             " type combinations sampled";
        return std::to_string(cases) + " cases, " + combos + ", " + std::to_string(targets) + " targets";
    }
};

/// The node a builder makes, or null when it refuses these operands.
template <class F> tensor* attempt(F&& build) {
    try {
        return build();
    } catch (const error&) {
        return nullptr;
    }
}

/// "add a = f32 [5, 3, 1, 1] (non-contiguous), b = f32 [5, 1, 1, 1]"
inline std::string describe_case(const tensor& node) {
    std::string s(to_string(node.op));
    const char* sep = " ";
    for (const tensor* src : node.src)
        if (src != nullptr) {
            s += sep + backplane::detail::describe(src);
            sep = ", ";
        }
    return s + " -> " + backplane::detail::describe(&node);
}

/// Cases collected into one graph.
class batch {
  public:
    /// How many failures a report describes in full (the count says the rest).
    static constexpr std::size_t described_failures = 20;

    batch(std::uint32_t seed, std::vector<target> targets)
        : rng(seed), gen{rng}, targets_(std::move(targets)) {}
    batch(const batch&) = delete;
    batch& operator=(const batch&) = delete;

    // Alignment 4 packs tensors tightly: kernels meet operands at odd addresses.
    context ctx{
        context_params{.no_alloc = false, .alignment = 4, .chunk_size = std::size_t{1} << 16}};
    std::mt19937 rng;
    shape_gen gen;

    /// A contiguous leaf with values uniform in [lo, hi). In a combination that the sample
    /// drops it gets no values (most of a sampled sweep's time was making and quantizing
    /// them) but takes its share of the random stream, so that a kept case has the values
    /// it has in the whole sweep; a kept case that uses such a leaf is a problem.
    tensor* leaf(elem_type t, const extents& ne, double lo = -1.0, double hi = 1.0) {
        if (sampled_now_)
            return random_leaf(ctx, t, ne, rng, lo, hi);
        tensor* x = ctx.new_tensor(t, std::span<const std::int64_t>(ne));
        detail::skip_fill(*x, rng);
        x->name = dropped_input;
        return x;
    }
    /// A tensor of extents ne laid out as l, the whole underlying memory random.
    tensor* input(elem_type t, const extents& ne, layout l, double lo = -1.0, double hi = 1.0) {
        return laid_out(ctx, t, ne, l,
                        [&](elem_type type, const extents& root) { return leaf(type, root, lo, hi); });
    }
    /// A random layout that t allows.
    layout any_layout(elem_type t) { return nth_layout(rng(), t); }

    /// True when the combination that `probe` builds is claimed: the builder accepts it
    /// and every target supports the node.
    template <class F> bool claimed(F&& probe) {
        const tensor* t = attempt(probe);
        if (t == nullptr)
            return false;
        for (const target& tg : targets_)
            if (!tg.supports(*t))
                return false;
        return true;
    }
    /// Counts a claimed type combination (for the coverage check); the cases added after
    /// it, up to the next one, are its cases.
    void combination() {
        const int k = combinations_++;
        sampled_now_ = (k + k / every_ + rotation_) % every_ == 0;
        if (sampled_now_ && thin_ > 1)
            sampled_now_ = (on_diagonal_++ + thin_rotation_) % thin_ == 0;
        if (sampled_now_) ++sampled_;
    }
    [[nodiscard]] int combinations() const { return combinations_; }
    [[nodiscard]] std::size_t cases() const { return cases_.size(); }

    /// Keeps the cases of one claimed combination in `every` and drops the others' cases:
    /// combination k (counted from 0) is kept when (k + k / every + rotation) % every == 0,
    /// a diagonal, so that in a grid of types (say 16 weight types by 3 activation types)
    /// every row and every column keeps some. Where each distinct kernel costs much to
    /// prepare (a software driver that compiles every pipeline), the `every` rotations
    /// 0 ... every - 1 keep each combination exactly once. Every claimed combination is
    /// still counted. Applies to the combinations counted after the call.
    ///
    /// With `thin` > 1, one in `thin` of the diagonal's combinations, in the order they
    /// are counted: a subset of what the same rotation keeps without it, so a second run
    /// (under a sanitizer) finds the pipelines the first one compiled; the every * thin
    /// rotations 0 ... every * thin - 1 keep each combination exactly once.
    void sample(int every, int rotation, int thin = 1) {
        every_ = every < 1 ? 1 : every;
        thin_ = thin < 1 ? 1 : thin;
        const int period = every_ * thin_;
        const int r = ((rotation % period) + period) % period;
        rotation_ = r % every_;
        thin_rotation_ = r / every_;
        on_diagonal_ = 0;
    }

    /// A case of a claimed combination: every target must support it (a claimed
    /// combination is claimed for every shape and layout). Dropped when the batch samples
    /// and its combination is not among the sample.
    void add(tensor* out) {
        if (!sampled_now_)
            return;
        if (out == nullptr) {
            problems_.push_back("the builder refused a case of a claimed combination");
            return;
        }
        if (uses_dropped_input(*out))
            problems_.push_back("a kept case uses a leaf made in a dropped combination: " + describe_case(*out));
        for (const target& tg : targets_)
            if (!tg.supports(*out))
                problems_.push_back(tg.name + " refuses a case of a claimed combination: " +
                                    describe_case(*out));
        cases_.push_back(out);
    }

    /// Computes every case with the reference kernels, then on every target, and
    /// compares each case's node with the reference's.
    batch_report run() {
        batch_report r{.cases = cases_.size(), .combinations = combinations_,
                       .sampled = sampled_, .targets = targets_.size(),
                       .failures = problems_};
        graph g;
        for (tensor* c : cases_)
            g.build_forward(c);
        cpu_backend ref({.n_threads = 1, .reference = true});
        std::vector<std::vector<float>> expected;
        if (!compute(r, "the reference", [&] { return ref.compute(g); }, expected))
            return r;
        for (std::size_t i = 0; i < cases_.size(); ++i)
            for (float v : expected[i])
                if (!std::isfinite(v)) { // the inputs are chosen so that it has none
                    r.failures.push_back("the reference has NaN or infinity in " +
                                         describe_case(*cases_[i]));
                    break;
                }
        for (const target& tg : targets_) {
            std::vector<std::vector<float>> actual;
            if (!compute(r, tg.name, [&] { return tg.compute(g); }, actual))
                continue;
            for (std::size_t i = 0; i < cases_.size(); ++i)
                judge(r, tg, *cases_[i], expected[i], actual[i]);
        }
        return r;
    }

  private:
    /// Poisons every case's output, computes, reads the outputs back; false (and a
    /// failure) when the compute or a read fails.
    template <class F>
    bool compute(batch_report& r, const std::string& who, F&& run,
                 std::vector<std::vector<float>>& values) {
        for (tensor* c : cases_)
            detail::poison_root(*c);
        if (status s = run(); !s) {
            r.failures.push_back(who + ": " + s.describe());
            return false;
        }
        values.reserve(cases_.size());
        for (tensor* c : cases_) {
            auto v = tensor_read_f32(*c);
            if (!v) {
                r.failures.push_back(who + ": " + v.error().describe());
                return false;
            }
            values.push_back(std::move(*v));
        }
        return true;
    }

    static constexpr std::string_view dropped_input = "input of a dropped combination";

    static bool uses_dropped_input(const tensor& t) {
        if (t.name == dropped_input)
            return true;
        if (t.view_src != nullptr && uses_dropped_input(*t.view_src))
            return true;
        for (const tensor* s : t.src)
            if (s != nullptr && uses_dropped_input(*s))
                return true;
        return false;
    }

    static void judge(batch_report& r, const target& tg, const tensor& node,
                      const std::vector<float>& expected, const std::vector<float>& actual) {
        const threshold th = threshold_for(node);
        const comparison c = compare_values(expected, actual);
        const bool ok = c.bad_values == 0 && c.nmse <= th.max_nmse && (!th.exact || c.mismatches == 0);
        if (ok)
            return;
        if (++r.failed <= described_failures)
            r.failures.push_back(describe_case(node) + " on " + tg.name + ": " +
                                 detail::describe_failure(c, th.max_nmse, th.exact));
    }

    std::vector<target> targets_;
    std::vector<tensor*> cases_;
    std::vector<std::string> problems_;
    int combinations_ = 0;
    int sampled_ = 0;
    int every_ = 1;
    int rotation_ = 0;
    int thin_ = 1;
    int thin_rotation_ = 0;
    int on_diagonal_ = 0; // the diagonal's combinations counted so far (thinning)
    bool sampled_now_ = true; // cases added before any combination are kept
};

} // namespace backplane::conformance
