// The meta backend: split states, propagation, memory, reductions and the reference llama
// graph against one CPU, over CPU parts; where the Vulkan backend is built, over two
// Vulkan devices (two logical devices of one driver: lavapipe in CI) and a mixed
// {Vulkan, CPU} pair too (skipped with a message where there is no Vulkan device).

#include "meta_llama_check.hpp"

#if BACKPLANE_TEST_HAVE_VULKAN
#include <backplane/backends/vulkan.hpp>
#endif

#include <catch2/catch.hpp>

#include <algorithm>
#include <numeric>
#include <random>

using namespace backplane;
using backplane::meta::split_state;

TEST_CASE("split_state: even splits, granules, segments and weights", "[meta]") {
    const split_state s = split_state::even(1, 512, 3, 64);
    CHECK(s.is_split());
    CHECK(s.axis() == 1);
    CHECK(s.sizes() == std::vector<std::int64_t>{192, 192, 128});
    CHECK(s.start(0, 2) == 384);
    CHECK(s.local_extent(1) == 192);
    CHECK(s.to_string() == "axis1 {192, 192, 128}");

    const split_state qkv = split_state::even(1, 3 * 256, 2, 32, 3);
    CHECK(qkv.n_segments() == 3);
    CHECK(qkv.start(1, 1) == 256 + 128);
    CHECK(qkv.local_start(2, 1) == 256);
    CHECK(qkv.local_extent(0) == 384);
    CHECK(qkv.to_string() == "axis1 {3 x {128, 128}}");

    const double w[] = {3.0, 1.0};
    const split_state weighted = split_state::even(0, 64, 2, 8, 1, w);
    CHECK(weighted.sizes() == std::vector<std::int64_t>{48, 16});

    CHECK_THROWS_WITH(split_state::even(1, 100, 2, 64), Catch::Contains("not a multiple"));
    CHECK_THROWS_WITH(split_state::even(1, 128, 4, 64), Catch::Contains("cannot feed 4 devices"));
    CHECK_THROWS_WITH(split_state::even(4, 128, 2), Catch::Contains("axis 4"));
    CHECK_THROWS_WITH(split_state::split(0, 2, {3, 0}), Catch::Contains("at least 1"));

    CHECK(!s.check(elem_type::f32, {512, 512, 1, 1}, 2).ok());     // 3 devices' state on 2
    CHECK(!s.check(elem_type::f32, {512, 256, 1, 1}, 3).ok());     // wrong extent
    CHECK(split_state::even(0, 96, 2, 16).check(elem_type::q8_0, {96, 4, 1, 1}, 2).message().find("blocks") !=
          std::string::npos);
}

TEST_CASE("propagation rules cover every core op", "[meta]") {
    for (std::size_t i = 1; i < op_kind_count; ++i) {
        const auto op = static_cast<op_kind>(i);
        const bool covered = std::any_of(std::begin(meta::rules), std::end(meta::rules),
                                         [&](const meta::rule& r) { return r.op == op; });
        INFO(to_string(op));
        CHECK(covered);
    }
}

namespace {

struct meta_setup {
    meta_device dev;
    meta_backend be;
    explicit meta_setup(int n, meta::meta_params p = {})
        : dev(meta_device::make(test::cpu_parts(n), std::move(p)).value()), be(dev.make_backend().value()) {}
};

/// One output computed by one CPU (ro) and by the meta device (mo), each the output of a
/// graph of its own whose memory lives as long as this; `state` is mo's split state in
/// the meta plan.
struct single_output_run {
    graph rgraph, mgraph;
    graph_allocator rga{cpu_buffer_type::instance()}, mga;
    std::string state;
    single_output_run(meta_setup& m, tensor* ro, tensor* mo) : rgraph(ro), mgraph(mo), mga(m.be.buffer_type()) {
        ro->set_output();
        mo->set_output();
        REQUIRE(rga.alloc_graph(rgraph).ok());
        REQUIRE(mga.alloc_graph(mgraph).ok());
        cpu_backend cpu = cpu_device::instance().make_backend();
        REQUIRE(cpu.compute(rgraph).ok());
        auto plan = m.be.plan(mgraph);
        INFO(plan.error().describe());
        REQUIRE(plan.ok());
        state = plan->state_of(mo)->to_string();
        const status st = m.be.compute(mgraph);
        INFO(st.describe());
        REQUIRE(st.ok());
        REQUIRE(m.be.synchronize().ok());
    }
};

} // namespace

TEST_CASE("meta on 2, 3 and 4 CPU devices: the llama graph equals one CPU", "[meta]") {
    test::llama_params p{.n_layer = 2, .n_embd = 256, .n_head = 8, .n_ff = 384, .n_tokens = 7, .n_vocab = 1000};
    p.token_input = GENERATE(false, true);
    const std::uint32_t seed = 1234;
    const std::vector<float> ref = test::llama_on_cpu(p, seed);

    const int n = GENERATE(2, 3, 4);
    INFO("devices: " << n << ", token input: " << p.token_input);
    meta_setup m(n, {.split = [&](const tensor& t, int nd) { return test::split_llama(t, nd, p.head_dim()); }});
    test::meta_llama ml(p, m.dev, m.be);
    REQUIRE(test::fill_llama(ml.model, ml.inputs, seed).ok());
    CHECK(test::nmse_of(ref, test::compute_meta_llama(m.be, ml, p)) < 1e-6);
}

TEST_CASE("meta memory: weights hold 1/n per device plus the mirrored ones, compute buffers follow each "
          "device's graph",
          "[meta]") {
    test::llama_params p{.n_layer = 2, .n_embd = 256, .n_head = 8, .n_ff = 512, .n_tokens = 16, .n_vocab = 1024};
    const int n = GENERATE(2, 4);
    INFO("devices: " << n);
    meta_setup m(n, {.split = [&](const tensor& t, int nd) { return test::split_llama(t, nd, p.head_dim()); }});
    test::meta_llama ml(p, m.dev, m.be);
    REQUIRE(test::fill_llama(ml.model, ml.inputs, 7).ok());

    std::size_t split_bytes = 0, mirrored_bytes = 0;
    for (const tensor* w : ml.model.all_weights())
        (test::split_llama(*w, n, p.head_dim()).is_split() ? split_bytes : mirrored_bytes) += w->nbytes();
    REQUIRE(ml.weights.size() == 1);
    auto* mb = ml.weights[0].get_if<meta_buffer>();
    REQUIRE(mb != nullptr);
    const std::size_t align = m.dev.buffer_type().alignment();
    const std::size_t slack = ml.model.all_weights().size() * align + 2 * align;
    for (int d = 0; d < n; ++d) {
        const std::size_t held = mb->device_bytes(d);
        INFO("device " << d << " holds " << held << " bytes; split " << split_bytes << ", mirrored " << mirrored_bytes);
        CHECK(held >= split_bytes / static_cast<std::size_t>(n) + mirrored_bytes);
        CHECK(held <= split_bytes / static_cast<std::size_t>(n) + mirrored_bytes + slack);
    }

    // compute memory: each device's own graph, less than the whole graph on one CPU
    graph_allocator whole(cpu_buffer_type::instance());
    test::llama_instance ref(p);
    REQUIRE(whole.reserve(ref.g).ok());
    const std::size_t one = whole.buffer_size(0);
    auto plan = m.be.plan(ml.g);
    REQUIRE(plan.ok());
    REQUIRE(m.be.compute(ml.g).ok());
    for (int d = 0; d < n; ++d) {
        INFO("device " << d << ": " << m.be.compute_buffer_bytes(d) << " bytes of compute buffers, one CPU " << one);
        CHECK(plan->compute_bytes[static_cast<std::size_t>(d)] <= m.be.compute_buffer_bytes(d));
        CHECK(m.be.compute_buffer_bytes(d) < one * 3 / 4);
    }
}

namespace {

/// Small integers in [-3, 3] as f32: their sums are exact.
std::vector<float> small_integers(std::size_t count, std::uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<float> v(count);
    for (float& x : v) x = static_cast<float>(static_cast<int>(rng() % 7) - 3);
    return v;
}

/// A case's tensors twice, made by one function: in host memory for one CPU's reference
/// graph (context rw; rg for that graph's nodes) and in the meta device's memory (mw; mg).
template <class Tensors> struct twins {
    context rw, rg{context_params{.no_alloc = true}}, mw{context_params{.no_alloc = true}},
        mg{context_params{.no_alloc = true}};
    Tensors r, mt;
    buffer_list buffers; ///< mt's memory
    template <class Make>
    twins(meta_setup& m, Make make)
        : r(make(rw)), mt(make(mw)), buffers(alloc_tensors(mw, m.dev.buffer_type()).value()) {}
};

/// The same values in a tensor and its twin: f32 as they are, f16 rounded.
void set_same(tensor& r, tensor& mt, const std::vector<float>& v) {
    if (r.type != elem_type::f16) {
        REQUIRE(tensor_set(r, v).ok());
        REQUIRE(tensor_set(mt, v).ok());
        return;
    }
    std::vector<f16_t> h(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) h[i] = f32_to_f16(v[i]);
    REQUIRE(tensor_set(r, h).ok());
    REQUIRE(tensor_set(mt, h).ok());
}

} // namespace

TEST_CASE("meta reductions are exact for f32 sums of integers, by ring and by recursive doubling", "[meta]") {
    const int n = GENERATE(2, 3, 4);
    const bool ring = GENERATE(false, true);
    INFO("devices: " << n << (ring ? ", ring" : ", recursive doubling"));
    const std::int64_t K = 96, M = 40, N = 9;
    meta::meta_params params;
    params.ring_min_bytes = ring ? 0 : ~std::size_t{0};
    params.split = [&](const tensor& t, int nd) {
        return t.name == "x" ? split_state::mirrored() : split_state::even(0, t.ne[0], nd);
    };
    meta_setup m(n, std::move(params));

    context wctx({.no_alloc = true});
    tensor* a = wctx.new_tensor_2d(elem_type::f32, K, M);
    tensor* b = wctx.new_tensor_2d(elem_type::f32, K, N);
    a->name = "a";
    b->name = "b";
    auto wbuf = alloc_tensors(wctx, m.dev.buffer_type()).value();
    const auto av = small_integers(static_cast<std::size_t>(K * M), 1), bv = small_integers(static_cast<std::size_t>(K * N), 2);
    REQUIRE(tensor_set(*a, av).ok());
    REQUIRE(tensor_set(*b, bv).ok());
    // a round trip through the devices' slices gives the values back, whole and in part
    CHECK(tensor_get_all<float>(*a).value() == av);
    std::vector<float> part(50);
    REQUIRE(tensor_get(*a, part.data(), 70 * 4, part.size() * 4).ok()); // across a device boundary
    CHECK(std::equal(part.begin(), part.end(), av.begin() + 70));
    REQUIRE(tensor_set(*a, part.data(), 70 * 4, part.size() * 4).ok());
    CHECK(tensor_get_all<float>(*a).value() == av);

    context gctx({.no_alloc = true});
    tensor* c = mul_mat(gctx, a, b); // split along K on both: partial sums, reduced as an output
    c->name = "c";
    c->set_output();
    tensor* s = sum_rows(gctx, a); // a row cut along dimension 0: partial too
    s->name = "s";
    s->set_output();
    graph g{c, s};
    graph_allocator ga(m.be.buffer_type());
    REQUIRE(ga.alloc_graph(g).ok());
    auto plan = m.be.plan(g);
    REQUIRE(plan.ok());
    CHECK(plan->reduced.size() == 2);
    const status st = m.be.compute(g);
    INFO(st.describe());
    REQUIRE(st.ok());
    REQUIRE(m.be.synchronize().ok());

    std::vector<float> want(static_cast<std::size_t>(M * N)), want_s(static_cast<std::size_t>(M));
    for (std::int64_t j = 0; j < N; ++j)
        for (std::int64_t i = 0; i < M; ++i) {
            float acc = 0;
            for (std::int64_t k = 0; k < K; ++k)
                acc += av[static_cast<std::size_t>(i * K + k)] * bv[static_cast<std::size_t>(j * K + k)];
            want[static_cast<std::size_t>(j * M + i)] = acc;
        }
    for (std::int64_t i = 0; i < M; ++i)
        for (std::int64_t k = 0; k < K; ++k) want_s[static_cast<std::size_t>(i)] += av[static_cast<std::size_t>(i * K + k)];
    CHECK(tensor_get_all<float>(*c).value() == want);
    CHECK(tensor_get_all<float>(*s).value() == want_s);

    // bytes moved: recursive doubling moves the whole tensor log2(n) times per device (plus
    // the folds), the ring 2 (n - 1) / n of it
    const auto* gc = dynamic_cast<const meta::generic_collective*>(&m.be.collective());
    REQUIRE(gc != nullptr);
    CHECK(gc->uses_ring(c->nbytes(), n, c->nelements()) == (ring && n > 2));
    CHECK(m.be.stats().bytes_moved > 0);
}

TEST_CASE("meta: sum of a split tensor is a partial sum, mean, argsort and top_k follow a row split", "[meta]") {
    const int n = GENERATE(2, 3);
    INFO("devices: " << n);
    const std::int64_t K = 30, M = 12;
    meta::meta_params params;
    params.split = [](const tensor& t, int nd) {
        return t.name == "cols" ? split_state::even(0, t.ne[0], nd) : split_state::even(1, t.ne[1], nd);
    };
    meta_setup m(n, std::move(params));

    context wctx({.no_alloc = true});
    tensor* cols = wctx.new_tensor_2d(elem_type::f32, K, M);
    tensor* rows = wctx.new_tensor_2d(elem_type::f32, K, M);
    cols->name = "cols";
    rows->name = "rows";
    auto wbuf = alloc_tensors(wctx, m.dev.buffer_type()).value();
    const auto v = small_integers(static_cast<std::size_t>(K * M), 3); // exact sums, many ties
    REQUIRE(tensor_set(*cols, v).ok());
    REQUIRE(tensor_set(*rows, v).ok());

    context gctx({.no_alloc = true});
    tensor* outs[] = {sum(gctx, cols), sum(gctx, rows), mean(gctx, rows), argsort(gctx, rows, sort_order::desc),
                      top_k(gctx, rows, 4)};
    for (tensor* o : outs) o->set_output();
    graph g{outs[0], outs[1], outs[2], outs[3], outs[4]};
    graph_allocator ga(m.be.buffer_type());
    REQUIRE(ga.alloc_graph(g).ok());
    auto plan = m.be.plan(g);
    INFO(plan.error().describe());
    REQUIRE(plan.ok());
    CHECK(plan->reduced.size() == 2); // the two sums
    REQUIRE(m.be.compute(g).ok());
    REQUIRE(m.be.synchronize().ok());

    const float total = std::accumulate(v.begin(), v.end(), 0.0f);
    std::vector<float> means;
    std::vector<std::int32_t> order, top;
    for (std::int64_t r = 0; r < M; ++r) {
        const auto row = v.begin() + r * K;
        means.push_back(std::accumulate(row, row + K, 0.0f) / static_cast<float>(K));
        std::vector<std::int32_t> idx(static_cast<std::size_t>(K));
        std::iota(idx.begin(), idx.end(), 0);
        std::stable_sort(idx.begin(), idx.end(), [&](std::int32_t x, std::int32_t y) { return row[x] > row[y]; });
        order.insert(order.end(), idx.begin(), idx.end());
        top.insert(top.end(), idx.begin(), idx.begin() + 4);
    }
    CHECK(tensor_get_all<float>(*outs[0]).value() == std::vector<float>{total});
    CHECK(tensor_get_all<float>(*outs[1]).value() == std::vector<float>{total});
    CHECK(tensor_get_all<float>(*outs[2]).value() == means);
    CHECK(tensor_get_all<std::int32_t>(*outs[3]).value() == order);
    CHECK(tensor_get_all<std::int32_t>(*outs[4]).value() == top);
}

TEST_CASE("meta plan errors name the op, the tensors and their states", "[meta][errors]") {
    meta::meta_params params;
    params.split = [](const tensor& t, int nd) {
        if (t.name == "rows") return split_state::even(0, t.ne[0], nd);
        if (t.name == "cols") return split_state::even(1, t.ne[1], nd);
        if (t.name == "part") return split_state::partial();
        return split_state::mirrored();
    };
    meta_setup m(2, std::move(params));
    context wctx({.no_alloc = true});
    tensor* rows = wctx.new_tensor_2d(elem_type::f32, 64, 8);
    rows->name = "rows";
    tensor* cols = wctx.new_tensor_2d(elem_type::f32, 64, 8);
    cols->name = "cols";
    tensor* part = wctx.new_tensor_2d(elem_type::f32, 64, 8);
    part->name = "part";
    auto wbuf = alloc_tensors(wctx, m.dev.buffer_type()).value();
    context host;
    tensor* outside = host.new_tensor_2d(elem_type::f32, 64, 8);
    outside->name = "outside";

    const auto fails_with = [&](tensor* out, std::vector<std::string> words, errc code = errc::not_supported) {
        graph g(out);
        graph_allocator ga(m.be.buffer_type());
        REQUIRE(ga.alloc_graph(g).ok());
        auto planned = m.be.plan(g);
        REQUIRE_FALSE(planned.ok());
        const status st = m.be.compute(g);
        REQUIRE_FALSE(st.ok());
        CHECK(st.code() == code);
        CHECK(st.message() == planned.error().message());
        for (const auto& w : words) {
            INFO(st.message());
            CHECK_THAT(st.message(), Catch::Contains(w));
        }
    };
    context gctx({.no_alloc = true});
    // a norm needs whole rows
    fails_with(rms_norm(gctx, rows), {"rms_norm", "'rows'", "axis0 {32, 32}", "(S) -> S, A in {1,2,3}"});
    // so does a fused glu (x and g are the halves of a row)
    fails_with(swiglu(gctx, rows), {"glu", "'rows'", "axis0 {32, 32}", "(S) -> S, A in {1,2,3}"});
    // a view holding one index of the split dimension
    fails_with(view_1d(gctx, cols, 64, 0), {"view", "single index", "axis1"});
    // joining along the split dimension
    fails_with(concat(gctx, cols, cols, 1), {"concat", "'cols'"});
    // a partial leaf cannot be reduced where a consumer needs whole values
    fails_with(silu(gctx, part), {"silu", "'part'", "partial"});
    // a tensor outside the meta device's buffers
    fails_with(add(gctx, cols, outside), {"'outside'", "not in a buffer of Meta(CPU, CPU)"}, errc::invalid_argument);

    // writing a partial tensor needs to say how; reading it sums the devices' copies
    const auto v = small_integers(64 * 8, 3);
    const status w = tensor_set(*part, v);
    CHECK(w.code() == errc::invalid_argument);
    CHECK_THAT(w.message(), Catch::Contains("meta_set_partial"));
    for (auto how : {meta::partial_write::first_device, meta::partial_write::divide}) {
        REQUIRE(meta_set_partial(*part, v.data(), how).ok());
        CHECK(tensor_get_all<float>(*part).value() == v);
    }
    CHECK(meta_set_partial(*cols, v.data(), meta::partial_write::divide).code() == errc::invalid_argument);
    // an intermediate that is not an output has no storage to read
    tensor* mid = add(gctx, cols, cols);
    mid->name = "mid";
    tensor* fin = scale(gctx, mid, 2.0f);
    fin->set_output();
    graph g(fin);
    graph_allocator ga(m.be.buffer_type());
    REQUIRE(ga.alloc_graph(g).ok());
    REQUIRE(m.be.compute(g).ok());
    std::vector<float> out(64 * 8);
    CHECK_THAT(tensor_get(*mid, out.data(), 0, mid->nbytes()).message(), Catch::Contains("flagged output"));
    REQUIRE(tensor_get(*fin, out.data(), 0, fin->nbytes()).ok());
}

TEST_CASE("meta segments: a fused QKV weight split per segment, taken apart by views", "[meta]") {
    const std::int64_t E = 128, D = 32, H = E / D, T = 5;
    const int n = GENERATE(2, 4);
    INFO("devices: " << n);
    meta::meta_params params;
    params.split = [&](const tensor& t, int nd) {
        return t.name == "wqkv" ? split_state::even(1, t.ne[1], nd, D, 3) : split_state::mirrored();
    };
    meta_setup m(n, std::move(params));

    // the same graph twice: on the meta device and on one CPU
    const auto build = [&](context& wctx, context& gctx, tensor*& wqkv, tensor*& x) {
        wqkv = wctx.new_tensor_2d(elem_type::f32, E, 3 * E);
        wqkv->name = "wqkv";
        x = wctx.new_tensor_2d(elem_type::f32, E, T);
        x->name = "x";
        (void)gctx;
    };
    const auto graph_of = [&](context& gctx, tensor* wqkv, tensor* x) {
        tensor* qkv = mul_mat(gctx, wqkv, x); // [3E, T], axis0 in 3 segments
        tensor* q = cont(gctx, view_2d(gctx, qkv, E, T, qkv->nb[1], 0));
        tensor* k3 = view_3d(gctx, qkv, D, H, T, D * 4, qkv->nb[1], static_cast<std::size_t>(E) * 4); // heads of K
        tensor* k = reshape(gctx, cont(gctx, k3), {E, T});
        tensor* v = cont(gctx, view_2d(gctx, qkv, E, T, qkv->nb[1], static_cast<std::size_t>(2 * E) * 4));
        tensor* out = add(gctx, q, mul(gctx, k, v));
        out->set_output();
        return graph(out);
    };
    const auto wv = small_integers(static_cast<std::size_t>(E * 3 * E), 11);
    const auto xv = small_integers(static_cast<std::size_t>(E * T), 12);

    context rw, rg({.no_alloc = true});
    tensor *rwqkv = nullptr, *rx = nullptr;
    build(rw, rg, rwqkv, rx);
    REQUIRE(tensor_set(*rwqkv, wv).ok());
    REQUIRE(tensor_set(*rx, xv).ok());
    graph rgraph = graph_of(rg, rwqkv, rx);
    graph_allocator rga(cpu_buffer_type::instance());
    REQUIRE(rga.alloc_graph(rgraph).ok());
    cpu_backend cpu = cpu_device::instance().make_backend();
    REQUIRE(cpu.compute(rgraph).ok());

    context mw({.no_alloc = true}), mg({.no_alloc = true});
    tensor *wqkv = nullptr, *x = nullptr;
    build(mw, mg, wqkv, x);
    auto wbuf = alloc_tensors(mw, m.dev.buffer_type()).value();
    REQUIRE(tensor_set(*wqkv, wv).ok());
    REQUIRE(tensor_set(*x, xv).ok());
    CHECK(tensor_get_all<float>(*wqkv).value() == wv);
    graph mgraph = graph_of(mg, wqkv, x);
    graph_allocator mga(m.be.buffer_type());
    REQUIRE(mga.alloc_graph(mgraph).ok());
    auto plan = m.be.plan(mgraph);
    INFO(plan.error().describe());
    REQUIRE(plan.ok());
    CHECK(plan->reduced.empty()); // every piece stays on its device
    CHECK(plan->state_of(mgraph.node(0))->n_segments() == 3);
    REQUIRE(m.be.compute(mgraph).ok());
    REQUIRE(m.be.synchronize().ok());
    CHECK(tensor_get_all<float>(*mgraph.back()).value() == tensor_get_all<float>(*rgraph.back()).value());

    // a second graph, then the first again: both plans are kept
    tensor* other = scale(mg, mul_mat(mg, wqkv, x), 0.5f);
    other->set_output();
    graph g2(other);
    graph_allocator ga2(m.be.buffer_type());
    REQUIRE(ga2.alloc_graph(g2).ok());
    REQUIRE(m.be.compute(g2).ok());
    REQUIRE(mga.alloc_graph(mgraph).ok());
    REQUIRE(m.be.compute(mgraph).ok());
    REQUIRE(m.be.synchronize().ok());
    CHECK(m.be.stats().plans == 2);
    CHECK(tensor_get_all<float>(*mgraph.back()).value() == tensor_get_all<float>(*rgraph.back()).value());
}

namespace {

/// Computes rgraph on one CPU and mgraph on m's meta device; their last n nodes (the
/// outputs) must be equal.
void check_same_outputs(meta_setup& m, graph& rgraph, graph& mgraph, std::size_t n) {
    graph_allocator rga(cpu_buffer_type::instance()), mga(m.be.buffer_type());
    REQUIRE(rga.alloc_graph(rgraph).ok());
    REQUIRE(mga.alloc_graph(mgraph).ok());
    cpu_backend cpu = cpu_device::instance().make_backend();
    REQUIRE(cpu.compute(rgraph).ok());
    const status st = m.be.compute(mgraph);
    INFO(st.describe());
    REQUIRE(st.ok());
    REQUIRE(m.be.synchronize().ok());
    for (std::size_t i = 0; i < n; ++i) {
        INFO("output " << i);
        const tensor* rt = rgraph.nodes()[rgraph.n_nodes() - n + i];
        const tensor* mtt = mgraph.nodes()[mgraph.n_nodes() - n + i];
        CHECK(tensor_get_all<float>(*mtt).value() == tensor_get_all<float>(*rt).value());
    }
}

} // namespace

TEST_CASE("meta broadcasting: mirrored operands cut to each device's range, repeated or stretched", "[meta]") {
    const int n = GENERATE(2, 3);
    INFO("devices: " << n);
    meta::meta_params params;
    params.split = [](const tensor& t, int nd) {
        if (t.name == "a") return split_state::even(1, t.ne[1], nd);     // [48, 12, 6]: rows split
        if (t.name == "h") return split_state::even(2, t.ne[2], nd, 2);  // [16, 5, 6]: "heads" in pairs
        return split_state::mirrored();
    };
    meta_setup m(n, std::move(params));
    struct tensors {
        tensor *a, *same, *bias, *h, *kv, *kv_h;
    };
    const auto make = [](context& w) {
        tensors t{};
        t.a = w.new_tensor_3d(elem_type::f32, 48, 12, 6);
        t.same = w.new_tensor_3d(elem_type::f32, 48, 12, 6); // cut along dim 1 like a
        t.bias = w.new_tensor_3d(elem_type::f32, 48, 1, 6);  // extent 1 along dim 1: used whole
        t.h = w.new_tensor_3d(elem_type::f32, 16, 5, 6);
        t.kv = w.new_tensor_3d(elem_type::f32, 16, 7, 6);   // mul_mat's a, cut with h's heads
        t.kv_h = w.new_tensor_3d(elem_type::f32, 16, 7, 3); // stretched: 2 heads of h per head of kv_h
        t.a->name = "a";
        t.same->name = "same";
        t.bias->name = "bias";
        t.h->name = "h";
        t.kv->name = "kv";
        t.kv_h->name = "kv_h";
        return t;
    };
    const auto build = [](context& g, const tensors& t) {
        tensor* x = add(g, mul(g, t.a, t.same), t.bias);
        tensor* y = mul_mat(g, t.kv, t.h);
        tensor* z = mul_mat(g, t.kv_h, t.h);
        tensor* u = swiglu(g, t.a);            // fused: whole rows on each device
        tensor* w = geglu_split(g, t.a, t.same); // split: the gate cut like a
        for (tensor* o : {x, y, z, u, w}) o->set_output();
        return graph{x, y, z, u, w};
    };
    twins<tensors> tw(m, make);
    const tensors &r = tw.r, &mt = tw.mt;
    std::uint32_t seed = 20;
    for (auto [rt, mtt] : {std::pair{r.a, mt.a}, {r.same, mt.same}, {r.bias, mt.bias}, {r.h, mt.h}, {r.kv, mt.kv},
                           {r.kv_h, mt.kv_h}})
        set_same(*rt, *mtt, small_integers(static_cast<std::size_t>(rt->nelements()), seed++));
    graph rgraph = build(tw.rg, r), mgraph = build(tw.mg, mt);
    check_same_outputs(m, rgraph, mgraph, 5);
}

TEST_CASE("meta soft_max with ALiBi and sinks, rope with frequency factors: split rows and heads", "[meta]") {
    meta::meta_params params;
    params.split = [](const tensor& t, int nd) {
        if (t.name == "s") return split_state::even(1, t.ne[1], nd);  // [16, 6, 4]: rows split
        if (t.name == "q") return split_state::even(1, t.ne[1], nd);  // [16, 4, 6]: heads split
        if (t.name == "hs") return split_state::even(2, t.ne[2], nd); // [16, 6, 4]: heads split
        return split_state::mirrored();
    };
    meta_setup m(2, std::move(params));
    struct tensors {
        tensor *s, *mask, *sinks, *q, *pos, *ff, *hs;
    };
    const auto make = [](context& w) {
        tensors t{};
        t.s = w.new_tensor_3d(elem_type::f32, 16, 6, 4);
        t.mask = w.new_tensor_2d(elem_type::f32, 16, 6);
        t.sinks = w.new_tensor_1d(elem_type::f32, 4);
        t.q = w.new_tensor_3d(elem_type::f32, 16, 4, 6);
        t.pos = w.new_tensor_1d(elem_type::i32, 6);
        t.ff = w.new_tensor_1d(elem_type::f32, 8);
        t.hs = w.new_tensor_3d(elem_type::f32, 16, 6, 4);
        t.s->name = "s";
        t.q->name = "q";
        t.hs->name = "hs";
        return t;
    };
    const auto build = [](context& g, const tensors& t) {
        tensor* x = soft_max_add_sinks(soft_max_ext(g, t.s, t.mask, 0.5f, 8.0f), t.sinks);
        tensor* y = rope_ext(g, t.q, t.pos, t.ff, 16, rope_mode::neox, 4096, 10000.0f, 0.5f, 1.0f, 1.0f, 32.0f, 1.0f);
        for (tensor* o : {x, y}) o->set_output();
        return graph{x, y};
    };
    twins<tensors> tw(m, make);
    const tensors &r = tw.r, &mt = tw.mt;
    std::uint32_t seed = 40;
    for (auto [rt, mtt] : {std::pair{r.s, mt.s}, {r.mask, mt.mask}, {r.sinks, mt.sinks}, {r.q, mt.q}, {r.ff, mt.ff}}) {
        auto v = small_integers(static_cast<std::size_t>(rt->nelements()), seed++);
        if (rt == r.ff)
            for (float& x : v) x = 1.0f + std::abs(x); // frequency factors >= 1
        set_same(*rt, *mtt, v);
    }
    const std::vector<std::int32_t> positions{0, 5, 17, 100, 4000, 9000};
    REQUIRE(tensor_set(*r.pos, positions).ok());
    REQUIRE(tensor_set(*mt.pos, positions).ok());
    graph rgraph = build(tw.rg, r), mgraph = build(tw.mg, mt);
    check_same_outputs(m, rgraph, mgraph, 2);

    // ALiBi and sinks read each head's global index: no split of the heads
    context eg({.no_alloc = true});
    tensor* bad = soft_max_add_sinks(soft_max(eg, mt.hs), mt.sinks);
    graph g(bad);
    graph_allocator ga(m.be.buffer_type());
    REQUIRE(ga.alloc_graph(g).ok());
    const status e = m.be.compute(g);
    REQUIRE_FALSE(e.ok());
    CHECK(e.code() == errc::not_supported);
    CHECK_THAT(e.message(), Catch::Contains("soft_max") && Catch::Contains("'hs'"));
}

TEST_CASE("meta set_rows: a KV cache split by heads, or mirrored, is written in each device's piece", "[meta]") {
    const int n = GENERATE(2, 4);
    const bool split = GENERATE(true, false);
    INFO("devices: " << n << ", split: " << split);
    meta::meta_params params;
    params.split = [split](const tensor& t, int nd) {
        if (split && (t.name == "cache" || t.name == "k")) return split_state::even(0, t.ne[0], nd, 8); // heads of 8
        return split_state::mirrored();
    };
    meta_setup m(n, std::move(params));
    struct tensors {
        tensor *cache, *k, *idx;
    };
    const auto make = [](context& w) {
        tensors t{};
        t.cache = w.new_tensor_2d(elem_type::f16, 32, 10); // 4 heads of 8, 10 cells
        t.k = w.new_tensor_2d(elem_type::f32, 32, 3);      // 3 new tokens
        t.idx = w.new_tensor_1d(elem_type::i64, 3);
        t.cache->name = "cache";
        t.k->name = "k";
        t.idx->name = "idx";
        return t;
    };
    twins<tensors> tw(m, make);
    const tensors &r = tw.r, &mt = tw.mt;
    set_same(*r.cache, *mt.cache, small_integers(32 * 10, 41));
    set_same(*r.k, *mt.k, small_integers(32 * 3, 42));
    const std::vector<std::int64_t> cells = {7, 2, 9};
    REQUIRE(tensor_set(*r.idx, cells).ok());
    REQUIRE(tensor_set(*mt.idx, cells).ok());
    graph rgraph(set_rows(tw.rg, r.cache, r.k, r.idx));
    graph mgraph(set_rows(tw.mg, mt.cache, mt.k, mt.idx));
    cpu_backend cpu = cpu_device::instance().make_backend();
    REQUIRE(cpu.compute(rgraph).ok());
    auto plan = m.be.plan(mgraph);
    INFO(plan.error().describe());
    REQUIRE(plan.ok());
    CHECK(plan->reduced.empty());
    const status st = m.be.compute(mgraph);
    INFO(st.describe());
    REQUIRE(st.ok());
    REQUIRE(m.be.synchronize().ok());
    CHECK(tensor_read_f32(*mt.cache).value() == tensor_read_f32(*r.cache).value());
}

TEST_CASE("meta mul_mat_id: every expert's rows split over the devices", "[meta]") {
    const int n = GENERATE(2, 3);
    INFO("devices: " << n);
    meta::meta_params params;
    params.split = [](const tensor& t, int nd) {
        if (t.name == "experts") return split_state::even(1, t.ne[1], nd);
        return split_state::mirrored();
    };
    meta_setup m(n, std::move(params));
    struct tensors {
        tensor *experts, *x, *ids;
    };
    const auto make = [](context& w) {
        tensors t{};
        t.experts = w.new_tensor_3d(elem_type::f32, 16, 12, 4); // 4 experts of [16, 12]
        t.x = w.new_tensor_3d(elem_type::f32, 16, 1, 5);        // 5 tokens
        t.ids = w.new_tensor_2d(elem_type::i32, 2, 5);          // 2 experts each
        t.experts->name = "experts";
        t.x->name = "x";
        t.ids->name = "ids";
        return t;
    };
    twins<tensors> tw(m, make);
    const tensors &r = tw.r, &mt = tw.mt;
    set_same(*r.experts, *mt.experts, small_integers(16 * 12 * 4, 51));
    set_same(*r.x, *mt.x, small_integers(16 * 5, 52));
    const std::vector<std::int32_t> iv = {0, 3, 1, 1, 2, 0, 3, 2, 1, 0};
    REQUIRE(tensor_set(*r.ids, iv).ok());
    REQUIRE(tensor_set(*mt.ids, iv).ok());
    tensor* ro = mul_mat_id(tw.rg, r.experts, r.x, r.ids);
    tensor* mo = mul_mat_id(tw.mg, mt.experts, mt.x, mt.ids);
    const single_output_run run(m, ro, mo);
    CHECK(run.state.rfind("axis0", 0) == 0);
    CHECK(tensor_get_all<float>(*mo).value() == tensor_get_all<float>(*ro).value());
}

TEST_CASE("meta conv_2d: the kernel's output channels split over the devices", "[meta]") {
    const int n = GENERATE(2, 3);
    INFO("devices: " << n);
    meta::meta_params params;
    params.split = [](const tensor& t, int nd) {
        if (t.name == "kernel") return split_state::even(3, t.ne[3], nd);
        return split_state::mirrored();
    };
    meta_setup m(n, std::move(params));
    struct tensors {
        tensor *kernel, *image;
    };
    const auto make = [](context& w) {
        tensors t{};
        t.kernel = w.new_tensor_4d(elem_type::f32, 3, 3, 2, 6); // 3 x 3, 2 channels into 6
        t.image = w.new_tensor_4d(elem_type::f32, 7, 5, 2, 2);  // 7 x 5, 2 channels, 2 images
        t.kernel->name = "kernel";
        t.image->name = "image";
        return t;
    };
    twins<tensors> tw(m, make);
    const tensors &r = tw.r, &mt = tw.mt;
    set_same(*r.kernel, *mt.kernel, small_integers(3 * 3 * 2 * 6, 61));
    set_same(*r.image, *mt.image, small_integers(7 * 5 * 2 * 2, 62));
    tensor* ro = conv_2d_direct(tw.rg, r.kernel, r.image, 1, 2, 1, 1, 1, 1);
    tensor* mo = conv_2d_direct(tw.mg, mt.kernel, mt.image, 1, 2, 1, 1, 1, 1);
    const single_output_run run(m, ro, mo);
    CHECK(run.state.rfind("axis2", 0) == 0);
    CHECK(tensor_get_all<float>(*mo).value() == tensor_get_all<float>(*ro).value());
}

TEST_CASE("meta conv_transpose_1d and conv_transpose_2d: output channels or images split over the devices", "[meta]") {
    const int n = GENERATE(2, 3);
    const int form = GENERATE(0, 1, 2); // 1-D kernel split, 2-D kernel split, 2-D images split
    INFO("devices: " << n << ", form " << form);
    meta::meta_params params;
    params.split = [form](const tensor& t, int nd) {
        if (t.name == "kernel" && form < 2) return split_state::even(form == 0 ? 1 : 2, t.ne[form == 0 ? 1 : 2], nd);
        if (t.name == "image" && form == 2) return split_state::even(3, t.ne[3], nd);
        return split_state::mirrored();
    };
    meta_setup m(n, std::move(params));
    struct tensors {
        tensor *kernel, *image;
    };
    const auto make = [form](context& w) {
        tensors t{};
        if (form == 0) {
            t.kernel = w.new_tensor_3d(elem_type::f32, 3, 6, 2); // 3 taps, 2 channels into 6
            t.image = w.new_tensor_2d(elem_type::f32, 7, 2);
        } else {
            t.kernel = w.new_tensor_4d(elem_type::f32, 3, 2, 6, 2); // 3 x 2, 2 channels into 6
            t.image = w.new_tensor_4d(elem_type::f32, 5, 4, 2, 6);  // 5 x 4, 2 channels, 6 images
        }
        t.kernel->name = "kernel";
        t.image->name = "image";
        return t;
    };
    twins<tensors> tw(m, make);
    const tensors &r = tw.r, &mt = tw.mt;
    set_same(*r.kernel, *mt.kernel, small_integers(static_cast<std::size_t>(r.kernel->nelements()), 63));
    set_same(*r.image, *mt.image, small_integers(static_cast<std::size_t>(r.image->nelements()), 64));
    tensor* ro = form == 0 ? conv_transpose_1d(tw.rg, r.kernel, r.image, 2) : conv_transpose_2d_p0(tw.rg, r.kernel, r.image, 2);
    tensor* mo = form == 0 ? conv_transpose_1d(tw.mg, mt.kernel, mt.image, 2) : conv_transpose_2d_p0(tw.mg, mt.kernel, mt.image, 2);
    const single_output_run run(m, ro, mo);
    CHECK(run.state.rfind(form == 0 ? "axis1" : form == 1 ? "axis2" : "axis3", 0) == 0);
    CHECK(tensor_get_all<float>(*mo).value() == tensor_get_all<float>(*ro).value());
}

TEST_CASE("meta win_part and win_unpart: channels split over the devices", "[meta]") {
    const int n = GENERATE(2, 3);
    INFO("devices: " << n);
    meta::meta_params params;
    params.split = [](const tensor& t, int nd) {
        if (t.name == "image") return split_state::even(0, t.ne[0], nd);
        return split_state::mirrored();
    };
    meta_setup m(n, std::move(params));
    struct tensors {
        tensor* image;
    };
    const auto make = [](context& w) {
        tensors t{};
        t.image = w.new_tensor_3d(elem_type::f32, 6, 7, 5); // 6 channels, 7 x 5
        t.image->name = "image";
        return t;
    };
    twins<tensors> tw(m, make);
    const tensors &r = tw.r, &mt = tw.mt;
    set_same(*r.image, *mt.image, small_integers(6 * 7 * 5, 65));
    tensor* ro = win_unpart(tw.rg, scale(tw.rg, win_part(tw.rg, r.image, 3), 2.0f), 7, 5, 3);
    tensor* mo = win_unpart(tw.mg, scale(tw.mg, win_part(tw.mg, mt.image, 3), 2.0f), 7, 5, 3);
    const single_output_run run(m, ro, mo);
    CHECK(run.state.rfind("axis0", 0) == 0);
    CHECK(tensor_get_all<float>(*mo).value() == tensor_get_all<float>(*ro).value());
}

TEST_CASE("meta im2col: the input's images split over the devices, 1-D and 2-D", "[meta]") {
    const int n = GENERATE(2, 3);
    const bool two_d = GENERATE(true, false);
    INFO("devices: " << n << (two_d ? ", 2-D" : ", 1-D"));
    meta::meta_params params;
    params.split = [two_d](const tensor& t, int nd) {
        const int axis = two_d ? 3 : 2;
        if (t.name == "image") return split_state::even(axis, t.ne[static_cast<std::size_t>(axis)], nd);
        return split_state::mirrored();
    };
    meta_setup m(n, std::move(params));
    struct tensors {
        tensor *kernel, *image;
    };
    const auto make = [two_d](context& w) {
        tensors t{};
        t.kernel = two_d ? w.new_tensor_4d(elem_type::f16, 3, 2, 2, 4) : w.new_tensor_3d(elem_type::f16, 3, 2, 4);
        t.image = two_d ? w.new_tensor_4d(elem_type::f32, 7, 5, 2, 6) : w.new_tensor_3d(elem_type::f32, 9, 2, 6); // 6 images
        t.kernel->name = "kernel";
        t.image->name = "image";
        return t;
    };
    twins<tensors> tw(m, make);
    const tensors &r = tw.r, &mt = tw.mt;
    set_same(*r.image, *mt.image, small_integers(static_cast<std::size_t>(r.image->nelements()), 66));
    tensor* ro = im2col(tw.rg, r.kernel, r.image, 2, 1, 1, two_d ? 1 : 0, 1, 1, two_d, elem_type::f32);
    tensor* mo = im2col(tw.mg, mt.kernel, mt.image, 2, 1, 1, two_d ? 1 : 0, 1, 1, two_d, elem_type::f32);
    const single_output_run run(m, ro, mo);
    CHECK(run.state.rfind(two_d ? "axis3" : "axis2", 0) == 0);
    CHECK(tensor_get_all<float>(*mo).value() == tensor_get_all<float>(*ro).value());
}

TEST_CASE("meta flash_attn_ext: heads split with k and v split or cut in groups, the mask one plane", "[meta]") {
    const int n = GENERATE(2, 4);
    const bool kv_split = GENERATE(true, false);
    INFO("devices: " << n << ", k and v split: " << kv_split);
    meta::meta_params params;
    params.split = [kv_split](const tensor& t, int nd) {
        if (t.name == "q" || (kv_split && (t.name == "k" || t.name == "v"))) return split_state::even(2, t.ne[2], nd);
        return split_state::mirrored();
    };
    meta_setup m(n, std::move(params));
    struct tensors {
        tensor *q, *k, *v, *mask, *sinks;
    };
    const auto make = [](context& w) {
        tensors t{};
        t.q = w.new_tensor_3d(elem_type::f32, 16, 3, 8);     // 3 queries, 8 heads
        t.k = w.new_tensor_3d(elem_type::f16, 16, 70, 4);    // 70 positions, 4 key/value heads (GQA)
        t.v = w.new_tensor_3d(elem_type::f16, 8, 70, 4);
        t.mask = w.new_tensor_2d(elem_type::f16, 70, 3);
        t.sinks = w.new_tensor_1d(elem_type::f32, 8);
        t.q->name = "q";
        t.k->name = "k";
        t.v->name = "v";
        return t;
    };
    twins<tensors> tw(m, make);
    const tensors &r = tw.r, &mt = tw.mt;
    std::uint32_t seed = 60;
    for (auto [rt, mtt] : {std::pair{r.q, mt.q}, {r.k, mt.k}, {r.v, mt.v}, {r.mask, mt.mask}, {r.sinks, mt.sinks}}) {
        auto v = small_integers(static_cast<std::size_t>(rt->nelements()), seed++);
        if (rt->type == elem_type::f16)
            for (float& x : v) x *= 0.25f; // keys, values and the mask in quarters
        set_same(*rt, *mtt, v);
    }
    tensor* ro = flash_attn_ext(tw.rg, r.q, r.k, r.v, r.mask, 0.25f);
    tensor* mo = flash_attn_ext(tw.mg, mt.q, mt.k, mt.v, mt.mask, 0.25f);
    const single_output_run run(m, ro, mo);
    CHECK(run.state.rfind("axis1", 0) == 0); // the heads: the result's dimension 1
    const auto want = tensor_get_all<float>(*ro).value(), got = tensor_get_all<float>(*mo).value();
    REQUIRE(got.size() == want.size());
    for (std::size_t i = 0; i < want.size(); ++i) CHECK(got[i] == Approx(want[i]).margin(1e-5));

    // sinks read each head's global index: no split of the heads
    context eg({.no_alloc = true});
    tensor* bad = flash_attn_ext_add_sinks(flash_attn_ext(eg, mt.q, mt.k, mt.v, mt.mask, 0.25f), mt.sinks);
    graph g(bad);
    graph_allocator ga(m.be.buffer_type());
    REQUIRE(ga.alloc_graph(g).ok());
    const status e = m.be.compute(g);
    REQUIRE_FALSE(e.ok());
    CHECK(e.code() == errc::not_supported);
    CHECK_THAT(e.message(), Catch::Contains("flash_attn_ext") && Catch::Contains("'q'"));
}

TEST_CASE("meta device through the run-time face: any_device and any_backend", "[meta]") {
    auto dev = meta_device::make(test::cpu_parts(2)).value();
    CHECK(dev.description() == "Meta(CPU, CPU)");
    CHECK(dev.memory().total == 2 * cpu_device::instance().memory().total);
    CHECK_FALSE(meta_device::make({}).ok());
    const any_device any = any_device::make(dev);
    CHECK(any.name() == "Meta");
    auto be = any.make_backend();
    REQUIRE(be.ok());
    CHECK(be->buffer_type() == buffer_type_ref(dev.buffer_type()));

    // everything mirrored (no split callback): the same result on both devices, read from one
    context wctx({.no_alloc = true});
    tensor* a = wctx.new_tensor_2d(elem_type::f32, 8, 4);
    auto wbuf = alloc_tensors(wctx, be->buffer_type()).value();
    const auto v = small_integers(32, 9);
    REQUIRE(tensor_set(*a, v).ok());
    context gctx({.no_alloc = true});
    tensor* out = scale(gctx, a, 3.0f);
    out->set_output();
    graph g(out);
    graph_allocator ga(be->buffer_type());
    REQUIRE(ga.alloc_graph(g).ok());
    REQUIRE(be->compute(g).ok());
    REQUIRE(be->synchronize().ok());
    const auto got = tensor_get_all<float>(*out).value();
    for (std::size_t i = 0; i < v.size(); ++i) CHECK(got[i] == 3.0f * v[i]);
}

#if BACKPLANE_TEST_HAVE_VULKAN

namespace vk_meta {

std::optional<any_device> vulkan_part(const char* name) {
    auto dev = vulkan_device::open({.index = 0, .name = name});
    if (!dev) {
        WARN("no Vulkan device, skipping: " << dev.error().describe());
        return std::nullopt;
    }
    return any_device::make(std::move(*dev));
}

void check_llama(std::vector<any_device> parts) {
    test::llama_params p{.n_layer = 1, .n_embd = 128, .n_head = 4, .n_ff = 256, .n_tokens = 5, .n_vocab = 512, .token_input = true};
    const std::uint32_t seed = 77;
    const std::vector<float> ref = test::llama_on_cpu(p, seed);

    const int n = static_cast<int>(parts.size());
    auto dev = meta_device::make(std::move(parts),
                                 {.split = [&](const tensor& t, int nd) { return test::split_llama(t, nd, p.head_dim()); }})
                   .value();
    auto be = dev.make_backend().value();
    test::meta_llama ml(p, dev, be);
    REQUIRE(test::fill_llama(ml.model, ml.inputs, seed).ok());
    const status st = be.compute(ml.g);
    INFO(st.describe());
    REQUIRE(st.ok());
    REQUIRE(be.synchronize().ok());
    CHECK(test::nmse_of(ref, tensor_get_all<float>(*ml.g.back()).value()) < 1e-6);
    CHECK(be.stats().reductions == 2 * static_cast<std::uint64_t>(p.n_layer));
    CHECK(be.stats().bytes_moved > 0);
    // each device holds its share of the weights, in its own memory
    auto* mb = ml.weights[0].get_if<meta_buffer>();
    REQUIRE(mb != nullptr);
    for (int d = 0; d < n; ++d) CHECK(mb->device_bytes(d) > 0);
}

} // namespace vk_meta

TEST_CASE("meta on two Vulkan devices: the llama graph equals one CPU", "[meta][vulkan]") {
    auto a = vk_meta::vulkan_part("Vulkan0a");
    auto b = vk_meta::vulkan_part("Vulkan0b");
    if (!a || !b) return;
    vk_meta::check_llama({*a, *b});
}

TEST_CASE("meta on a mixed pair {Vulkan, CPU}: the llama graph equals one CPU", "[meta][vulkan]") {
    auto a = vk_meta::vulkan_part("Vulkan0");
    if (!a) return;
    vk_meta::check_llama({*a, any_device::borrow(cpu_device::instance())});
}

#endif // BACKPLANE_TEST_HAVE_VULKAN
