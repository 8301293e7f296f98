// The BLAS backend (backends/blas): its contracts, its supports_op truth table, its
// statuses, and its mul_mat against the CPU backend's reference kernels.
//
// Parity: for each weight type (f32, f16, bf16), 24 seeded random shapes (odd sizes,
// N = 1, broadcasting over dims 2 and 3, padded rows, offsets, permuted batch dims, the
// merged-batch path) computed with min_batch 0 on 1 and 2 threads, and compared with
// cpu_backend in reference mode. Thresholds as the parity cases' for mul_mat
// (ggml's test-backend-ops): NMSE 1e-7 for f32 weights (sgemm sums in another order than
// the reference, within f32 rounding), 5e-4 for f16 / bf16 weights. Outputs are poisoned
// with NaN before each compute, so an element sgemm leaves unwritten fails; every other
// byte of the context is compared before and after, so a stray write fails too.

#include "../../support/ref_oracle.hpp"

#include <backplane/backends/blas.hpp>
#include <backplane/backplane.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

using namespace backplane;
namespace bt = backplane::test;
using i64 = std::int64_t;
using extents = bt::extents;

// The contract, checked here as well as beside the adapter (STYLE.md).
static_assert(backplane::device<blas_device>);
static_assert(backplane::host_ptr_device<blas_device>);
static_assert(backplane::backend<blas_backend>);
static_assert(backplane::host_backend<blas_backend>);
static_assert(!backplane::async_backend<blas_backend>);

namespace {

constexpr elem_type f32 = elem_type::f32;
constexpr elem_type f16 = elem_type::f16;
constexpr elem_type bf16 = elem_type::bf16;

/// How an operand lies in memory; all but contiguous are views. Every one keeps rows
/// contiguous (what sgemm takes); the refused layouts are in the truth table.
enum class layout {
    contiguous,
    offset,      ///< contiguous, one element into a larger tensor
    padded_rows, ///< a window of a larger tensor: rows and matrices padded
    permuted,    ///< dims 1..3 from another order (rows far apart, batches interleaved)
};

std::string str(const extents& ne) {
    std::ostringstream s;
    s << '[' << ne[0] << ',' << ne[1] << ',' << ne[2] << ',' << ne[3] << ']';
    return s.str();
}

const char* to_string(layout l) {
    switch (l) {
    case layout::contiguous: return "contiguous";
    case layout::offset: return "offset";
    case layout::padded_rows: return "padded_rows";
    case layout::permuted: return "permuted";
    }
    return "?";
}

struct fixture {
    explicit fixture(std::uint32_t seed) : rng(seed) {}

    // Alignment 4 packs tensors tightly: a write past a node's end lands in the next
    // tensor, where the byte comparison sees it.
    context ctx{context_params{.no_alloc = false, .alignment = 4, .chunk_size = std::size_t{1} << 20}};
    std::mt19937 rng;

    tensor* leaf(elem_type t, const extents& ne, double lo = -1.0, double hi = 1.0) {
        tensor* x = ctx.new_tensor(t, std::span<const i64>(ne));
        bt::fill_random(*x, rng, lo, hi);
        return x;
    }

    /// A tensor of extents ne laid out as l, all of its underlying memory random.
    tensor* input(elem_type t, const extents& ne, layout l) {
        const std::size_t ts = type_size(t);
        switch (l) {
        case layout::contiguous:
            return leaf(t, ne);
        case layout::offset: {
            tensor* root = leaf(t, {ne[0] * ne[1] * ne[2] * ne[3] + 1, 1, 1, 1});
            const std::size_t row = ts * static_cast<std::size_t>(ne[0]);
            return view_4d(ctx, root, ne[0], ne[1], ne[2], ne[3], row, row * static_cast<std::size_t>(ne[1]),
                           row * static_cast<std::size_t>(ne[1] * ne[2]), ts);
        }
        case layout::padded_rows: {
            tensor* root = leaf(t, {ne[0] + 3, ne[1] + 1, ne[2] + 1, ne[3]});
            return view_4d(ctx, root, ne[0], ne[1], ne[2], ne[3], root->nb[1], root->nb[2], root->nb[3],
                           ts + root->nb[1] + root->nb[2]);
        }
        case layout::permuted: {
            tensor* root = leaf(t, {ne[0], ne[2], ne[3], ne[1]});
            return permute(ctx, root, 0, 2, 3, 1);
        }
        }
        return nullptr;
    }

    /// A tensor right after the newest one, to catch writes past its end.
    void guard() { leaf(f32, {16, 1, 1, 1}); }
};

/// NaN in every element of an f32 tensor.
void poison(tensor& t) {
    bt::for_each_index(t.ne, [&](i64 i0, i64 i1, i64 i2, i64 i3) {
        std::memset(static_cast<std::byte*>(t.data) + t.offset_of(i0, i1, i2, i3), 0xff, sizeof(float));
    });
}

bool all_nan(const tensor& t) {
    bool all = true;
    bt::for_each_index(t.ne, [&](i64 i0, i64 i1, i64 i2, i64 i3) { all = all && std::isnan(bt::get(t, i0, i1, i2, i3)); });
    return all;
}

/// The bytes of every tensor that owns memory in ctx, except those in `skip`.
struct snapshot {
    std::vector<const tensor*> tensors;
    std::vector<std::vector<std::byte>> bytes;

    snapshot(const context& ctx, const std::vector<const tensor*>& skip = {}) {
        for (const tensor& t : ctx) {
            if (t.is_view() || t.data == nullptr) continue;
            bool skipped = false;
            for (const tensor* s : skip) skipped = skipped || s == &t;
            if (skipped) continue;
            const auto* p = static_cast<const std::byte*>(t.data);
            tensors.push_back(&t);
            bytes.emplace_back(p, p + t.nbytes());
        }
    }
    /// Tensors whose bytes changed since.
    [[nodiscard]] std::vector<std::string> changed() const {
        std::vector<std::string> out;
        for (std::size_t k = 0; k < tensors.size(); ++k)
            if (std::memcmp(tensors[k]->data, bytes[k].data(), bytes[k].size()) != 0)
                out.push_back(std::string(backplane::to_string(tensors[k]->type)) + " " + str(tensors[k]->ne));
        return out;
    }
};

/// The CPU backend's reference kernels on g: the expected value of each output.
std::vector<bt::ref_tensor> reference(const graph& g, const std::vector<tensor*>& outs) {
    cpu_backend ref({.n_threads = 1, .reference = true});
    const status st = ref.compute(g);
    INFO("reference: " << st.describe());
    REQUIRE(st.ok());
    std::vector<bt::ref_tensor> expected;
    for (const tensor* o : outs) expected.push_back(bt::read(*o));
    return expected;
}

/// One mul_mat of this test.
struct product {
    tensor* out;
    std::string what;
};

std::string describe(const tensor* a, layout la, const tensor* b, layout lb) {
    std::ostringstream s;
    s << "mul_mat a=" << backplane::to_string(a->type) << str(a->ne) << ' ' << to_string(la) << " b=" << str(b->ne) << ' '
      << to_string(lb);
    return s.str();
}

/// One graph computing every product, and the expected value of each.
std::pair<graph, std::vector<bt::ref_tensor>> graph_and_reference(const std::vector<product>& ps) {
    graph g;
    std::vector<tensor*> outs;
    for (const product& p : ps) {
        g.build_forward(p.out);
        outs.push_back(p.out);
    }
    std::vector<bt::ref_tensor> expected = reference(g, outs);
    return {std::move(g), std::move(expected)};
}

/// Computes every product with blas (outputs poisoned first) and checks it against the
/// expected values and that nothing else changed. Returns the failures.
int check_products(fixture& f, const graph& g, const std::vector<product>& ps,
                   const std::vector<bt::ref_tensor>& expected, blas_backend& blas, double max_nmse) {
    std::vector<const tensor*> outs;
    for (const product& p : ps) {
        poison(*p.out);
        outs.push_back(p.out);
    }
    const snapshot before(f.ctx, outs);
    const status st = blas.compute(g);
    INFO("blas on " << blas.n_threads() << " threads: " << st.describe());
    REQUIRE(st.ok());
    int failures = 0;
    for (std::size_t i = 0; i < ps.size(); ++i) {
        const bt::comparison c = bt::compare(expected[i], *ps[i].out);
        if (!(c.nans == 0 && c.nmse <= max_nmse) && ++failures <= 20)
            FAIL_CHECK(ps[i].what << " on " << blas.n_threads() << " threads: nmse " << c.nmse << " (max " << max_nmse
                                  << "), nans " << c.nans << ", max abs " << c.max_abs_err << " at " << c.worst);
    }
    const std::vector<std::string> changed = before.changed();
    INFO("tensors written that are not outputs: " << changed.size() << (changed.empty() ? "" : ", first " + changed[0]));
    CHECK(changed.empty());
    return failures;
}

tensor* mm(context& ctx, tensor* a, tensor* b, const char* name = nullptr) {
    tensor* t = mul_mat(ctx, a, b);
    if (name != nullptr) t->name = name;
    return t;
}

} // namespace

// ---------------------------------------------------------------------------------------

TEST_CASE("blas: the device and the backend", "[blas]") {
    const blas_device& d = blas_device::instance();
    CHECK(d.name() == "BLAS");
    CHECK(d.kind() == device_kind::accel);
    CHECK_FALSE(d.description().empty());
    if constexpr (blas::detail::is_openblas) {
        INFO("description: " << d.description());
        CHECK(d.description().rfind("OpenBLAS ", 0) == 0);
        CHECK(d.description().find(", core ") != std::string_view::npos);
    }
    CHECK(d.memory().total > 0);
    CHECK(d.memory().free <= d.memory().total);
    const device_caps caps = d.caps();
    CHECK_FALSE(caps.async);
    CHECK_FALSE(caps.events);
    CHECK(caps.buffer_from_host_ptr);

    // the CPU's buffer type, by identity: what lets the scheduler's upgrade pass move
    // nodes between the two backends without copies
    blas_backend blas = d.make_backend({.n_threads = 1});
    cpu_backend cpu({.n_threads = 1});
    CHECK(&blas.buffer_type() == &cpu_buffer_type::instance());
    CHECK(&d.buffer_type() == &cpu.buffer_type());
    CHECK(buffer_type_ref(blas.buffer_type()) == buffer_type_ref(cpu.buffer_type()));
    CHECK(blas.supports_buffer_type(cpu.buffer_type()));
    CHECK(d.supports_buffer_type(cpu_buffer_type::instance()));
    CHECK(&blas.device() == &d);
    CHECK(blas.name() == "BLAS");
    CHECK(blas.synchronize().ok());

    // buffer_from_host_ptr wraps user memory as a CPU buffer
    std::vector<float> mem(64);
    result<buffer_ptr> buf = d.buffer_from_host_ptr(mem.data(), mem.size() * sizeof(float));
    REQUIRE(buf.ok());
    CHECK(buf->get()->base() == mem.data());
    CHECK(buf->get()->type() == buffer_type_ref(cpu_buffer_type::instance()));
    CHECK(d.buffer_from_host_ptr(nullptr, 16).error().code() == errc::invalid_argument);

    // parameters
    blas_backend dflt;
    CHECK(dflt.n_threads() >= 1);
    CHECK(dflt.min_batch() == 32);
    CHECK(blas_backend({.min_batch = -5}).min_batch() == 0);
}

TEST_CASE("blas: supports_op truth table", "[blas][supports]") {
    fixture f(4242);
    context& ctx = f.ctx;
    blas_backend dflt({.n_threads = 1});                  // min_batch 32
    blas_backend any({.n_threads = 1, .min_batch = 0});   // every size
    const blas_device& dev = blas_device::instance();

    struct row {
        std::string what;
        tensor* t;
        bool dflt;
        bool any;
    };
    std::vector<row> rows;
    auto expect = [&](std::string what, tensor* t, bool d, bool a) { rows.push_back({std::move(what), t, d, a}); };
    auto L = [&](elem_type t, extents ne) { return f.leaf(t, ne); };

    // types
    expect("f32 x f32", mm(ctx, L(f32, {64, 40, 1, 1}), L(f32, {64, 33, 1, 1})), true, true);
    expect("f16 x f32", mm(ctx, L(f16, {64, 40, 1, 1}), L(f32, {64, 33, 1, 1})), true, true);
    expect("bf16 x f32", mm(ctx, L(bf16, {64, 40, 1, 1}), L(f32, {64, 33, 1, 1})), true, true);
    expect("q8_0 x f32", mm(ctx, L(elem_type::q8_0, {64, 40, 1, 1}), L(f32, {64, 33, 1, 1})), false, false);
    expect("q4_0 x f32", mm(ctx, L(elem_type::q4_0, {64, 40, 1, 1}), L(f32, {64, 33, 1, 1})), false, false);
    expect("f32 x f16", mm(ctx, L(f32, {64, 40, 1, 1}), L(f16, {64, 33, 1, 1})), false, false);
    expect("f16 x bf16", mm(ctx, L(f16, {64, 40, 1, 1}), L(bf16, {64, 33, 1, 1})), false, false);
    // min_batch: M, N and K must all reach it
    expect("exactly 32", mm(ctx, L(f32, {32, 32, 1, 1}), L(f32, {32, 32, 1, 1})), true, true);
    expect("M = 31", mm(ctx, L(f32, {64, 31, 1, 1}), L(f32, {64, 64, 1, 1})), false, true);
    expect("N = 31", mm(ctx, L(f32, {64, 64, 1, 1}), L(f32, {64, 31, 1, 1})), false, true);
    expect("K = 31", mm(ctx, L(f32, {31, 64, 1, 1}), L(f32, {31, 64, 1, 1})), false, true);
    expect("N = 1", mm(ctx, L(f16, {64, 64, 1, 1}), L(f32, {64, 1, 1, 1})), false, true);
    expect("1 x 1 x 1", mm(ctx, L(f32, {1, 1, 1, 1}), L(f32, {1, 1, 1, 1})), false, true);
    // broadcasting over dims 2 and 3
    expect("broadcast", mm(ctx, L(f32, {32, 32, 2, 1}), L(f32, {32, 32, 6, 3})), true, true);
    // layouts with contiguous rows are taken in place
    expect("a padded rows", mm(ctx, f.input(f32, {33, 40, 2, 1}, layout::padded_rows), L(f32, {33, 40, 2, 1})), true, true);
    expect("b permuted", mm(ctx, L(bf16, {40, 40, 2, 2}), f.input(f32, {40, 33, 2, 2}, layout::permuted)), true, true);
    expect("b offset", mm(ctx, L(f32, {40, 40, 1, 1}), f.input(f32, {40, 33, 1, 1}, layout::offset)), true, true);
    // rows that are not contiguous are refused
    {
        tensor* bt_ = transpose(ctx, L(f32, {40, 64, 1, 1})); // [64, 40], nb[0] = a row
        expect("b transposed", mm(ctx, L(f32, {64, 40, 1, 1}), bt_), false, false);
        tensor* root = L(f32, {128, 40, 1, 1});
        tensor* every_other = view(ctx, root, {64, 40, 1, 1}, {8, root->nb[1], root->nb[2], root->nb[3]}, 0);
        expect("b every other element", mm(ctx, L(f32, {64, 40, 1, 1}), every_other), false, false);
        tensor* aroot = L(f16, {128, 40, 1, 1});
        tensor* a_every_other = view(ctx, aroot, {64, 40, 1, 1}, {4, aroot->nb[1], aroot->nb[2], aroot->nb[3]}, 0);
        expect("a every other element", mm(ctx, a_every_other, L(f32, {64, 40, 1, 1})), false, false);
        // a view whose row starts between two floats
        tensor* broot = L(f32, {64 * 40 + 1, 1, 1, 1});
        tensor* misaligned = view(ctx, broot, {64, 40, 1, 1}, {4, 256, 256 * 40, 256 * 40}, 2);
        expect("b misaligned", mm(ctx, L(f32, {64, 40, 1, 1}), misaligned), false, false);
    }
    // other ops, views and leafs
    tensor* x = L(f32, {64, 64, 1, 1});
    expect("add", add(ctx, x, x), false, false);
    expect("rms_norm", rms_norm(ctx, x), false, false);
    expect("cpy", cpy(ctx, x, L(f16, {64, 64, 1, 1})), false, false);
    expect("sum_rows", sum_rows(ctx, x), false, false);
    expect("leaf", x, true, true);
    expect("view", view_2d(ctx, x, 32, 2, x->nb[1], 0), true, true);
    expect("reshape", reshape(ctx, x, {4096}), true, true);
    expect("permute", permute(ctx, x, 1, 0, 2, 3), true, true);
    expect("transpose", transpose(ctx, x), true, true);
    // hand-assembled nodes that break the builder's rules: refused, never an abort
    {
        tensor* t = mm(ctx, L(f32, {64, 40, 1, 1}), L(f32, {64, 40, 1, 1}));
        t->ne[0] = 41; // dst shape that is no mul_mat of its sources
        expect("wrong dst shape", t, false, false);
        tensor* u = mm(ctx, L(f32, {64, 40, 1, 1}), L(f32, {64, 40, 1, 1}));
        u->src[1] = nullptr;
        expect("missing src", u, false, false);
        tensor* v = mm(ctx, L(f32, {64, 40, 1, 1}), L(f32, {64, 40, 1, 1}));
        v->type = f16;
        expect("f16 dst", v, false, false);
    }

    for (const row& r : rows) {
        INFO(r.what);
        CHECK(dflt.supports_op(*r.t) == r.dflt);
        CHECK(any.supports_op(*r.t) == r.any);
        CHECK(dev.supports_op(*r.t) == r.dflt); // the device answers for the default parameters
        CHECK(blas::supports_op(*r.t, 0) == r.any);
    }

    // min_batch can be changed on a backend
    tensor* m31 = mm(ctx, L(f32, {64, 31, 1, 1}), L(f32, {64, 64, 1, 1}));
    CHECK_FALSE(dflt.supports_op(*m31));
    dflt.set_min_batch(31);
    CHECK(dflt.supports_op(*m31));
    dflt.set_min_batch(-1);
    CHECK(dflt.min_batch() == 0);
}

TEST_CASE("blas parity: mul_mat against the CPU reference, f32 / f16 / bf16 weights", "[blas][parity]") {
    constexpr int shapes_per_type = 24;
    for (const elem_type ta : {f32, f16, bf16}) {
        DYNAMIC_SECTION("weights " << backplane::to_string(ta)) {
            fixture f(51000 + static_cast<std::uint32_t>(ta));
            auto pick = [&](std::initializer_list<i64> l) { return *(l.begin() + f.rng() % l.size()); };
            auto upto = [&](i64 n) { return 1 + static_cast<i64>(f.rng() % static_cast<std::uint32_t>(n)); };
            const layout layouts[] = {layout::contiguous, layout::offset, layout::padded_rows, layout::permuted};

            std::vector<product> ps;
            int n1 = 0, broadcast = 0, merged = 0;
            for (int s = 0; s < shapes_per_type; ++s) {
                const i64 k = pick({1, 3, 7, 17, 31, 33, 64, 65, 100, 129, 257});
                const i64 m = pick({1, 2, 5, 17, 33, 47, 65, 100});
                // every fourth shape is a batch of vectors (N = 1), as in decoding
                const i64 n = s % 4 == 0 ? 1 : pick({2, 3, 7, 16, 33, 40});
                const i64 a2 = upto(2), a3 = upto(2), r2 = upto(3), r3 = upto(2);
                const layout la = layouts[f.rng() % 4];
                // every third b contiguous: with r2 > 1 that is the merged-batch path
                const layout lb = s % 3 == 0 ? layout::contiguous : layouts[f.rng() % 4];
                tensor* a = f.input(ta, {k, m, a2, a3}, la);
                tensor* b = f.input(f32, {k, n, a2 * r2, a3 * r3}, lb);
                tensor* out = mm(f.ctx, a, b);
                f.guard();
                n1 += n == 1 ? 1 : 0;
                broadcast += r2 * r3 > 1 ? 1 : 0;
                merged += r2 > 1 && lb == layout::contiguous ? 1 : 0;
                ps.push_back({out, describe(a, la, b, lb)});
            }
            INFO(n1 << " with N = 1, " << broadcast << " broadcast, " << merged << " merged");
            CHECK(n1 >= 4);
            CHECK(broadcast >= 4);
            CHECK(merged >= 2);

            const auto [g, expected] = graph_and_reference(ps);
            const double max_nmse = ta == f32 ? 1e-7 : 5e-4; // by the weights' type
            for (const int n_threads : {1, 2}) {
                blas_backend blas({.n_threads = n_threads, .min_batch = 0});
                for (const product& p : ps) REQUIRE(blas.supports_op(*p.out));
                CHECK(check_products(f, g, ps, expected, blas, max_nmse) == 0);
            }
        }
    }
}

TEST_CASE("blas: big products with the default min_batch, weights converted on several threads", "[blas][parity]") {
    fixture f(52000);
    std::vector<product> ps;
    // K * M = 512K values: the f16 / bf16 conversion splits over 2 threads
    for (const elem_type ta : {f32, f16, bf16}) {
        tensor* a = f.input(ta, {1024, 512, 1, 1}, layout::contiguous);
        tensor* b = f.input(f32, {1024, 40, 1, 1}, layout::contiguous);
        ps.push_back({mm(f.ctx, a, b), describe(a, layout::contiguous, b, layout::contiguous)});
        f.guard();
    }
    // a batch of 32-row products sharing weights, merged into one sgemm
    {
        tensor* a = f.input(f16, {96, 64, 2, 1}, layout::contiguous);
        tensor* b = f.input(f32, {96, 32, 6, 2}, layout::contiguous);
        ps.push_back({mm(f.ctx, a, b), describe(a, layout::contiguous, b, layout::contiguous)});
        f.guard();
    }
    const auto [g, expected] = graph_and_reference(ps);
    blas_backend blas({.n_threads = 2});
    for (const product& p : ps) REQUIRE(blas.supports_op(*p.out));
    CHECK(check_products(f, g, ps, expected, blas, 5e-4) == 0);
    // f32 weights at their own, tighter bound
    CHECK(bt::compare(expected[0], *ps[0].out).nmse <= 1e-7);
}

TEST_CASE("blas: f16 and bf16 weights give exactly what their f32 values give", "[blas][parity]") {
    // The conversion to f32 is exact, so the same sgemm on the converted values must give
    // the same bits as on an f32 copy of the weights: a check far tighter than the NMSE
    // bound, which a wrong bit in a few converted values would pass.
    fixture f(52500);
    for (const elem_type ta : {f16, bf16}) {
        INFO("weights " << backplane::to_string(ta));
        const extents ne = {97, 45, 2, 1};
        tensor* a = f.input(ta, ne, layout::padded_rows);
        tensor* a32 = f.ctx.new_tensor(f32, std::span<const i64>(ne));
        bt::for_each_index(ne, [&](i64 i0, i64 i1, i64 i2, i64 i3) { bt::set(*a32, i0, i1, i2, i3, bt::get(*a, i0, i1, i2, i3)); });
        // values at the edges of f16's range: a subnormal, the largest finite, a negative
        // subnormal (no infinities: the sums must stay NaN-free)
        if (ta == f16) {
            const f16_t subnormal{0x0001}, largest{0x7bff}, tiny_negative{0x83ff};
            const std::pair<i64, f16_t> edge[] = {{0, subnormal}, {1, largest}, {2, tiny_negative}};
            for (auto [i, h] : edge) {
                bt::set(*a, i, 0, 0, 0, static_cast<double>(f16_to_f32(h)));
                bt::set(*a32, i, 0, 0, 0, static_cast<double>(f16_to_f32(h)));
            }
        }
        tensor* b = f.input(f32, {97, 40, 6, 1}, layout::contiguous);
        tensor* low = mm(f.ctx, a, b);
        tensor* high = mm(f.ctx, a32, b);
        graph g{low, high};
        blas_backend blas({.n_threads = 2, .min_batch = 0});
        poison(*low);
        poison(*high);
        REQUIRE(blas.compute(g).ok());
        const bt::comparison c = bt::compare(bt::read(*high), *low);
        CHECK(c.nans == 0);
        CHECK(c.mismatches == 0);
    }
}

TEST_CASE("blas: compute refuses an unsupported node before computing anything", "[blas][status]") {
    fixture f(53000);
    tensor* a = f.leaf(f32, {64, 48, 1, 1});
    tensor* b = f.leaf(f32, {64, 40, 1, 1});
    tensor* ok = mm(f.ctx, a, b, "product");
    tensor* c = f.leaf(f32, {48, 40, 1, 1});
    tensor* bad = add(f.ctx, ok, c);
    bad->name = "the_sum";
    graph g(bad);
    poison(*ok);
    poison(*bad);
    const snapshot before(f.ctx);

    blas_backend blas({.n_threads = 1});
    const status st = blas.compute(g);
    INFO(st.describe());
    CHECK(st.code() == errc::not_supported);
    CHECK(st.message().find("'the_sum'") != std::string::npos);
    CHECK(st.message().find("(add)") != std::string::npos);
    CHECK(st.message().find("mul_mat only") != std::string::npos);
    CHECK(before.changed().empty()); // the product before it was not computed
    CHECK(all_nan(*ok));

    // a mul_mat below min_batch is refused the same way, with the reason
    tensor* small = mm(f.ctx, f.leaf(f32, {64, 8, 1, 1}), f.leaf(f32, {64, 40, 1, 1}), "small");
    graph g2{ok, small};
    const status st2 = blas.compute(g2);
    INFO(st2.describe());
    CHECK(st2.code() == errc::not_supported);
    CHECK(st2.message().find("'small'") != std::string::npos);
    CHECK(st2.message().find("min_batch") != std::string::npos);
    CHECK(all_nan(*ok));

    // with min_batch 0 the same graph computes
    blas.set_min_batch(0);
    CHECK(blas.compute(g2).ok());
    CHECK_FALSE(all_nan(*ok));
}

TEST_CASE("blas: a node without host data is invalid_argument, and nothing is computed", "[blas][status]") {
    fixture f(54000);
    tensor* ok = mm(f.ctx, f.leaf(f32, {64, 48, 1, 1}), f.leaf(f32, {64, 40, 1, 1}), "with_data");
    poison(*ok);
    context meta(context_params{.no_alloc = true});
    tensor* na = meta.new_tensor(f32, {64, 48});
    tensor* nb = meta.new_tensor(f32, {64, 40});
    tensor* nodata = mm(meta, na, nb, "without_data");
    graph g{ok, nodata};

    blas_backend blas({.n_threads = 1});
    const status st = blas.compute(g);
    INFO(st.describe());
    CHECK(st.code() == errc::invalid_argument);
    CHECK(st.message().find("no data") != std::string::npos);
    CHECK(st.message().find("'without_data'") != std::string::npos);
    CHECK(all_nan(*ok));

    // a null node
    tensor* nodes[] = {ok, nullptr};
    CHECK(blas.compute(graph_view(std::span<tensor* const>(nodes))).code() == errc::invalid_argument);
    CHECK(all_nan(*ok));
}

TEST_CASE("blas: set_n_threads", "[blas][threads]") {
    blas_backend blas({.n_threads = 2, .min_batch = 0});
    CHECK(blas.n_threads() == 2);
    const status zero = blas.set_n_threads(0);
    CHECK(zero.code() == errc::invalid_argument);
    CHECK(zero.message().find("set_n_threads(0)") != std::string::npos);
    CHECK(blas.set_n_threads(-3).code() == errc::invalid_argument);
    CHECK(blas.n_threads() == 2); // unchanged
    CHECK(blas.set_n_threads(1).ok());
    CHECK(blas.n_threads() == 1);

    // and it still computes (on one thread now)
    fixture f(55000);
    tensor* a = f.leaf(f16, {40, 33, 1, 1});
    tensor* b = f.leaf(f32, {40, 5, 1, 1});
    tensor* out = mm(f.ctx, a, b);
    graph g(out);
    const std::vector<bt::ref_tensor> expected = reference(g, {out});
    poison(*out);
    REQUIRE(blas.compute(g).ok());
    CHECK(bt::compare(expected[0], *out).nmse <= 5e-4);
}

TEST_CASE("blas: a graph of views only computes nothing", "[blas][views]") {
    fixture f(56000);
    tensor* x = f.leaf(f32, {8, 6, 2, 1});
    tensor* r = reshape(f.ctx, x, {48, 2});
    tensor* v = view_2d(f.ctx, x, 4, 3, x->nb[1], x->nb[0]);
    tensor* p = permute(f.ctx, x, 2, 0, 1, 3);
    tensor* t = transpose(f.ctx, r);
    graph g{r, v, p, t};
    REQUIRE(g.nodes().size() == 4);
    const snapshot before(f.ctx);
    blas_backend blas({.n_threads = 1}); // default min_batch: nothing here is a product
    CHECK(blas.compute(g).ok());
    CHECK(before.changed().empty());
    CHECK(blas.work_size() == 0);

    // views of tensors without data: nothing to read, nothing to check
    context meta(context_params{.no_alloc = true});
    tensor* y = meta.new_tensor(f32, {8, 6});
    graph g2{transpose(meta, y), reshape(meta, y, {48})};
    CHECK(blas.compute(g2).ok());

    // an empty graph
    CHECK(blas.compute(graph_view{}).ok());
}

TEST_CASE("blas: tensors in CPU buffers, shared with the CPU backend", "[blas][buffers]") {
    blas_backend blas({.n_threads = 2});
    context ctx(context_params{.no_alloc = true});
    tensor* a = ctx.new_tensor(bf16, {64, 48, 2});
    tensor* b = ctx.new_tensor(f32, {64, 40, 4});
    tensor* out = mul_mat(ctx, a, b);
    result<buffer_list> bufs = alloc_tensors(ctx, blas.buffer_type());
    REQUIRE(bufs.ok());
    REQUIRE(out->buffer != nullptr);
    CHECK(out->buffer->is_host());
    std::mt19937 rng(57000);
    bt::fill_random(*a, rng);
    bt::fill_random(*b, rng);
    graph g(out);
    REQUIRE(blas.supports_op(*out));
    const std::vector<bt::ref_tensor> expected = reference(g, {out});
    poison(*out);
    const status st = blas.compute(g);
    INFO(st.describe());
    REQUIRE(st.ok());
    CHECK(bt::compare(expected[0], *out).nmse <= 5e-4);
}

TEST_CASE("blas: the work buffer is kept between computes and moves with the backend", "[blas][work]") {
    fixture f(58000);
    tensor* big = mm(f.ctx, f.leaf(f16, {64, 48, 3, 1}), f.leaf(f32, {64, 40, 3, 1}));
    tensor* small = mm(f.ctx, f.leaf(bf16, {32, 40, 1, 1}), f.leaf(f32, {32, 40, 1, 1}));
    tensor* plain = mm(f.ctx, f.leaf(f32, {64, 48, 1, 1}), f.leaf(f32, {64, 40, 1, 1}));
    graph gbig(big), gsmall(small), gplain(plain);

    blas_backend blas({.n_threads = 1});
    REQUIRE(blas.compute(gplain).ok());
    CHECK(blas.work_size() == 0); // f32 weights are used in place
    REQUIRE(blas.compute(gbig).ok());
    CHECK(blas.work_size() == 64 * 48 * sizeof(float)); // one weight matrix at a time
    REQUIRE(blas.compute(gsmall).ok());
    CHECK(blas.work_size() == 64 * 48 * sizeof(float)); // kept, not shrunk

    const std::vector<bt::ref_tensor> expected = reference(gbig, {big});
    blas_backend moved(std::move(blas));
    CHECK(moved.work_size() == 64 * 48 * sizeof(float));
    CHECK(blas.work_size() == 0); // NOLINT(bugprone-use-after-move): a moved-from backend is usable
    poison(*big);
    REQUIRE(moved.compute(gbig).ok());
    CHECK(bt::compare(expected[0], *big).nmse <= 5e-4);
    poison(*big);
    REQUIRE(blas.compute(gbig).ok()); // NOLINT(bugprone-use-after-move)
    CHECK(bt::compare(expected[0], *big).nmse <= 5e-4);
    blas = std::move(moved);
    CHECK(blas.work_size() == 64 * 48 * sizeof(float));
}
