#pragma once
// Test harness for the CPU op tests: a context with host data, inputs in every layout a
// graph can hand a kernel (offset, padded rows, permuted, transposed, strided elements),
// and a runner that computes one node on the CPU backend and checks it against the
// reference oracle, and that nothing outside the node's own elements was written.

#include "../../support/ref_oracle.hpp"

#include <backplane/conformance/inputs.hpp>

#include <backplane/backplane.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace cpu_test {

using namespace backplane;
namespace bt = backplane::test;
using i64 = std::int64_t;
using extents = bt::extents;

inline constexpr elem_type f32 = elem_type::f32;
inline constexpr elem_type f16 = elem_type::f16;
inline constexpr elem_type bf16 = elem_type::bf16;
inline constexpr elem_type q8_0 = elem_type::q8_0;
inline constexpr elem_type q4_0 = elem_type::q4_0;
inline constexpr elem_type i32 = elem_type::i32;

inline constexpr elem_type float_types[] = {f32, f16, bf16};
inline constexpr elem_type real_types[] = {f32, f16, bf16, q8_0, q4_0};

// Operand layouts (conformance/inputs.hpp): the parity cases lay theirs out the same way.
using backplane::conformance::all_layouts;
using backplane::conformance::allows;
using backplane::conformance::layout;
using backplane::conformance::nth_layout;
using backplane::conformance::random_divisor;
using backplane::conformance::to_string;

inline std::string str(const extents& ne) {
    std::ostringstream s;
    s << '[' << ne[0] << ',' << ne[1] << ',' << ne[2] << ',' << ne[3] << ']';
    return s.str();
}

/// Bounds for one comparison against the oracle.
struct tolerance {
    double max_nmse = 1e-7;
    double max_rel = -1.0; ///< bound on compare().max_rel_err; negative: not checked
    double rel_floor = 1e-6;
    double max_abs = -1.0; ///< bound on compare().max_abs_err; negative: not checked
    bool exact = false; ///< every value bit-equal to the oracle's
};

/// One relative step of type t's mantissa (2^-23 for f32).
inline double ulp(elem_type t) {
    switch (t) {
    case elem_type::f16:
        return 1.0 / 1024.0;
    case elem_type::bf16:
        return 1.0 / 128.0;
    default:
        return 1.0 / 8388608.0;
    }
}

/// Sets the split threshold for one scope (process-wide), and restores the default.
struct split_threshold {
    explicit split_threshold(std::int64_t units) { cpu::set_min_work_per_thread(units); }
    ~split_threshold() { cpu::reset_min_work_per_thread(); }
    split_threshold(const split_threshold&) = delete;
    split_threshold& operator=(const split_threshold&) = delete;
};

class harness {
  public:
    explicit harness(std::uint32_t seed) : rng(seed) {}

    // Alignment 4 packs tensors tightly, so a write past a node's end lands in the next
    // tensor, where the byte check below sees it.
    context ctx{
        context_params{.no_alloc = false, .alignment = 4, .chunk_size = std::size_t{1} << 16}};
    std::mt19937 rng;

    /// A contiguous leaf with random values in [lo, hi).
    tensor* leaf(elem_type t, const extents& ne, double lo = -1.0, double hi = 1.0) {
        tensor* x = ctx.new_tensor(t, std::span<const i64>(ne));
        bt::fill_random(*x, rng, lo, hi);
        return x;
    }

    /// A tensor of extents ne laid out as l, the whole underlying memory random.
    tensor* input(elem_type t, const extents& ne, layout l, double lo = -1.0, double hi = 1.0) {
        return conformance::laid_out(ctx, t, ne, l, [&](elem_type type, const extents& root) {
            return leaf(type, root, lo, hi);
        });
    }

    /// A tensor of random values right after the newest one: catches writes past its end.
    void guard() { leaf(f32, {16, 1, 1, 1}); }

    /// The bytes of every tensor that holds memory the graph of `out` can reach (its
    /// sources' roots) or that was made since the last check (guards, padding around
    /// views), to prove later that only out's elements were written. Tensors of earlier
    /// cases are left out: the context keeps growing, and rescanning it would make a test
    /// quadratic in its number of cases.
    struct snapshot {
        std::vector<const tensor*> tensors;
        std::vector<std::vector<std::byte>> bytes;
    };
    snapshot take_snapshot(const graph& g) const {
        std::vector<const tensor*> watch;
        auto add_root = [&](const tensor* t) { watch.push_back(t->view_src ? t->view_src : t); };
        for (const tensor* t : g.nodes())
            add_root(t);
        for (const tensor* t : g.leafs())
            add_root(t);
        for (auto it = ctx.begin() + static_cast<std::ptrdiff_t>(mark_); it != ctx.end(); ++it)
            watch.push_back(&*it);
        std::sort(watch.begin(), watch.end());
        watch.erase(std::unique(watch.begin(), watch.end()), watch.end());
        snapshot s;
        for (const tensor* t : watch) {
            if (t->is_view() || t->data == nullptr)
                continue;
            const auto* p = static_cast<const std::byte*>(t->data);
            s.tensors.push_back(t);
            s.bytes.emplace_back(p, p + t->nbytes());
        }
        return s;
    }

    /// Count of bytes that changed outside the memory of out's elements.
    static i64 stray_writes(const snapshot& s, const tensor& out) {
        const tensor* root = out.view_src ? out.view_src : &out;
        std::vector<bool> mine(root->nbytes(), false);
        const std::size_t ts = type_size(out.type);
        bt::for_each_index(out.ne, [&](i64 i0, i64 i1, i64 i2, i64 i3) {
            if (i0 % block_size(out.type) != 0)
                return;
            const std::size_t off = out.view_offs + out.offset_of(i0, i1, i2, i3);
            for (std::size_t b = 0; b < ts && off + b < mine.size(); ++b)
                mine[off + b] = true;
        });
        i64 stray = 0;
        for (std::size_t k = 0; k < s.tensors.size(); ++k) {
            const auto* now = static_cast<const std::byte*>(s.tensors[k]->data);
            for (std::size_t b = 0; b < s.bytes[k].size(); ++b)
                if (now[b] != s.bytes[k][b] && !(s.tensors[k] == root && mine[b]))
                    ++stray;
        }
        return stray;
    }

    /// Computes out's graph on the CPU backend and checks it against the oracle.
    /// Returns false (after recording failed checks) when something is off.
    bool check(tensor* out, const tolerance& tol, const std::string& what) {
        const bt::ref_tensor expected = bt::ref_forward(*out);
        guard();
        graph g(out);
        const snapshot before = take_snapshot(g);
        mark_ = ctx.size();
        cpu_backend backend;
        const status st = backend.compute(g);
        INFO(what << " -> " << to_string(out->type) << ' ' << str(out->ne));
        INFO("status: " << st.describe());
        REQUIRE(st.ok());
        const bt::comparison c = bt::compare(expected, *out, tol.rel_floor);
        const i64 stray = stray_writes(before, *out);
        INFO("nmse " << c.nmse << ", max rel " << c.max_rel_err << " at " << c.worst << ", max abs "
                     << c.max_abs_err << ", mismatches " << c.mismatches << ", nans " << c.nans
                     << ", stray bytes " << stray);
        bool ok = c.nans == 0 && c.nmse <= tol.max_nmse && stray == 0;
        if (tol.exact)
            ok = ok && c.mismatches == 0;
        if (tol.max_rel >= 0.0)
            ok = ok && c.max_rel_err <= tol.max_rel;
        if (tol.max_abs >= 0.0)
            ok = ok && c.max_abs_err <= tol.max_abs;
        CHECK(ok);
        ++cases;
        return ok;
    }

    int cases = 0;

  private:
    std::size_t mark_ = 0; ///< tensors before this index belong to earlier checks
};

/// Shapes for ops on plain types: sizes 1, odd and even sizes, every dimension used.
inline const std::vector<extents>& plain_shapes() {
    static const std::vector<extents> s = {
        {1, 1, 1, 1},   {2, 1, 1, 1},   {1, 3, 1, 1},  {3, 1, 2, 1},  {5, 7, 1, 1},   {7, 5, 3, 1},
        {16, 1, 1, 1},  {17, 3, 1, 1},  {31, 2, 2, 2}, {32, 4, 1, 1}, {33, 5, 2, 1},  {64, 3, 1, 3},
        {1, 1, 1, 5},   {1, 4, 3, 2},   {13, 1, 5, 1}, {8, 8, 8, 1},  {65, 2, 1, 1},  {3, 3, 3, 3},
        {100, 1, 2, 1}, {127, 2, 1, 1}, {6, 5, 4, 3},  {2, 9, 1, 2},  {257, 1, 1, 1}, {4, 4, 1, 4},
    };
    return s;
}

/// Shapes whose rows hold whole quantization blocks.
inline const std::vector<extents>& block_shapes() {
    static const std::vector<extents> s = {
        {32, 1, 1, 1},  {64, 1, 1, 1}, {32, 3, 1, 1},  {96, 2, 1, 1},  {32, 1, 2, 3},
        {160, 5, 1, 1}, {64, 7, 3, 1}, {32, 2, 2, 2},  {128, 1, 1, 1}, {32, 9, 1, 1},
        {256, 2, 1, 1}, {96, 1, 3, 1}, {64, 4, 1, 2},  {32, 5, 5, 1},  {288, 3, 1, 1},
        {32, 1, 1, 7},  {64, 2, 3, 2}, {320, 1, 1, 1}, {32, 6, 1, 1},  {544, 2, 1, 1},
    };
    return s;
}

inline const std::vector<extents>& shapes_for(elem_type t) {
    return is_quantized(t) ? block_shapes() : plain_shapes();
}

} // namespace cpu_test
