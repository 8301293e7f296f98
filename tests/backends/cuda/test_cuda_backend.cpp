// The CUDA device and stream: without a GPU, every entry point is a clear status (and
// the kernel library is linked and answers); with one, the device's description and
// memory, async transfers and device-side copies, events between streams, timing,
// CUDA graphs captured on the second sight of a graph and replayed after, errors naming
// their node, and the scheduler with {cuda, cpu} on the llama-like reference graph equal
// to the CPU alone, with cuBLAS and with the own kernels. Then the copy utilities and
// the conformance runner on the device (tensor_copy, graph_copy, compare_backends, a
// slice of the catalogue), and misuse (tests/support/device_safety_cases.hpp): memory
// freed or a stream destroyed while work is queued, a get_rows index out of range
// (errc::out_of_range at synchronize, as on the CPU).

#include <backplane/backends/cuda.hpp>
#include <backplane/backplane.hpp>
#include <backplane/enabled.hpp>
#include <backplane/runtime.hpp>
#include <backplane/sched.hpp>

#include "../../support/device_copy_cases.hpp"
#include "../../support/device_safety_cases.hpp"
#include "../../support/llama_cpu.hpp"
#include "../../support/ref_oracle.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

using namespace backplane;

namespace {

std::optional<cuda_device> open_or_skip(int index = 0) {
    auto dev = cuda_device::open({.index = index});
    if (!dev) {
        WARN("no usable CUDA device " << index << ", skipping: " << dev.error().describe());
        return std::nullopt;
    }
    return std::move(*dev);
}

std::vector<float> random_floats(std::size_t n, std::uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<float> v(n);
    for (float& x : v) x = static_cast<float>(test::uniform01(rng)) * 2.0f - 1.0f;
    return v;
}

std::vector<float> read(const tensor& t) {
    auto v = tensor_get_all<float>(t);
    REQUIRE(v);
    return std::move(*v);
}

} // namespace

TEST_CASE("cuda backend: without a GPU every entry point is a status", "[cuda]") {
    // the kernel library is linked and speaks this header's interface, GPU or not
    const auto& k = cuda::detail::kernel_table_instance();
    CHECK(k.version == cuda::detail::kernel_api_version);
    REQUIRE(k.launch != nullptr);
    REQUIRE(k.scratch_bytes != nullptr);
    tensor leaf;
    CHECK(k.launch(leaf, {}) == cudaErrorNotSupported); // a leaf is no kernel's
    CHECK(k.scratch_bytes(leaf, {}) == 0);

    auto devs = cuda::physical_devices();
    if (devs) {
        auto bad = cuda_device::open({.index = static_cast<int>(devs->size())});
        REQUIRE_FALSE(bad);
        CHECK(bad.error().code() == errc::invalid_argument);
        CHECK_THAT(bad.error().message(), Catch::Contains("no device"));
        return;
    }
    WARN("no usable CUDA device, checking the error paths: " << devs.error().message());
    auto dev = cuda_device::open();
    REQUIRE_FALSE(dev);
    CHECK(dev.error().code() == errc::not_supported);
    auto all = cuda_device::all();
    REQUIRE_FALSE(all);
    CHECK(all.error().code() == errc::not_supported);
    // the registry lists the entry with no device, and says why
    auto reg = registry::global().reg("CUDA");
    REQUIRE(reg);
    CHECK(reg->devices().empty());
    CHECK(reg->enumeration_status().code() == errc::not_supported);
    CHECK_FALSE(registry::global().device("CUDA0"));
    auto best = registry::global().best_device();
    REQUIRE(best);
    CHECK(best->name() != "CUDA0");
}

TEST_CASE("cuda: flash_attn_ext is claimed while q's and v's rows fit the kernel's shared memory", "[cuda]") {
    using namespace backplane;
    context ctx(context_params{.no_alloc = true});
    const auto attention = [&](std::int64_t dk, std::int64_t dv, elem_type t) {
        tensor* q = ctx.new_tensor(elem_type::f32, {dk, 3, 4, 1});
        tensor* k = ctx.new_tensor(t, {dk, 9, 2, 1});
        tensor* v = ctx.new_tensor(t, {dv, 9, 2, 1});
        return flash_attn_ext(ctx, q, k, v, ctx.new_tensor(elem_type::f16, {9, 3, 1, 1}), 0.125f);
    };
    for (const elem_type t : {elem_type::f32, elem_type::f16, elem_type::bf16, elem_type::q8_0, elem_type::q4_0}) {
        INFO(to_string(t));
        CHECK(cuda::supports_op(*attention(576, 512, t)));
        CHECK(cuda::supports_op(*attention(4032, 4032, t))); // D_k + D_v = flash_attn_max_head_floats
        CHECK_FALSE(cuda::supports_op(*attention(4064, 4032, t)));
    }
    static_assert(4032 + 4032 == cuda::flash_attn_max_head_floats);
}

TEST_CASE("cuda device: description, memory, features, registry", "[cuda]") {
    auto dev = open_or_skip();
    if (!dev) return;
    CHECK(dev->name() == "CUDA0");
    CHECK(dev->kind() == (dev->properties().integrated ? device_kind::igpu : device_kind::gpu));
    CHECK_THAT(std::string(dev->description()), Catch::Contains("compute capability"));
    const memory_info m = dev->memory();
    CHECK(m.total > 0);
    CHECK(m.free <= m.total);
    bool cc = false;
    for (const auto& f : dev->features()) cc = cc || f.name == "compute_capability";
    CHECK(cc);
    CHECK(dev->caps().events);
    CHECK(dev->supports_buffer_type(buffer_type_ref(dev->buffer_type())));
    CHECK_FALSE(dev->supports_buffer_type(buffer_type_ref(cpu_buffer_type::instance())));
    // the registry's device is the same GPU
    auto any = registry::global().device("cuda0");
    REQUIRE(any);
    CHECK(any->get_if<cuda_device>() != nullptr);
    auto best = registry::global().best_device();
    REQUIRE(best);
    CHECK(best->kind() != device_kind::cpu);
}

TEST_CASE("cuda stream: async set, copy and get, and transfer errors", "[cuda][stream]") {
    auto dev = open_or_skip();
    if (!dev) return;
    auto be = dev->make_backend();
    REQUIRE(be);
    context ctx(context_params{.no_alloc = true});
    tensor* a = ctx.new_tensor_1d(elem_type::f32, 3000);
    tensor* b = ctx.new_tensor_1d(elem_type::f32, 3000);
    auto bufs = alloc_tensors(ctx, dev->buffer_type());
    REQUIRE(bufs);
    auto v = random_floats(3000, 1);
    const std::size_t bytes = v.size() * sizeof(float);
    REQUIRE(be->set_tensor_async(*a, v.data(), 0, bytes));
    v.assign(v.size(), 0.0f); // the source was read before set_tensor_async returned
    REQUIRE(be->copy_tensor_async(*a, *b));
    std::vector<float> got(3000, -1.0f);
    REQUIRE(be->get_tensor_async(*b, got.data(), 0, bytes));
    REQUIRE(be->synchronize());
    CHECK(got == random_floats(3000, 1));
    // a byte range
    std::vector<float> part(10);
    REQUIRE(be->get_tensor_async(*a, part.data(), 100 * sizeof(float), 10 * sizeof(float)));
    REQUIRE(be->synchronize());
    for (std::size_t i = 0; i < 10; ++i) CHECK(part[i] == got[100 + i]);
    // out of range, or not device memory
    const status oor = be->set_tensor_async(*a, got.data(), 4, bytes);
    CHECK(oor.code() == errc::out_of_range);
    context host(context_params{});
    tensor* h = host.new_tensor_1d(elem_type::f32, 4);
    const status not_mine = be->get_tensor_async(*h, got.data(), 0, 16);
    CHECK(not_mine.code() == errc::invalid_argument);
    CHECK_THAT(not_mine.message(), Catch::Contains("not in this device's memory"));
    CHECK_FALSE(be->copy_tensor_async(*h, *b)); // host memory: the caller copies
}

TEST_CASE("cuda stream: CUDA graphs are captured on the second sight and replayed after", "[cuda][stream][graphs]") {
    auto dev = open_or_skip();
    if (!dev) return;
    for (const bool graphs : {true, false}) {
        INFO("cuda graphs: " << graphs);
        auto be = dev->make_backend({.cuda_graphs = graphs});
        REQUIRE(be);
        context ctx(context_params{.no_alloc = true});
        tensor* x = ctx.new_tensor_1d(elem_type::f32, 1 << 14);
        tensor* y = ctx.new_tensor_1d(elem_type::f32, 1 << 14);
        tensor* step = cpy(ctx, scale(ctx, silu(ctx, add(ctx, x, y)), 0.5f, 1.0f), x); // x = silu(x + y) / 2 + 1
        graph g(step);
        auto bufs = alloc_tensors(ctx, dev->buffer_type());
        REQUIRE(bufs);
        const auto vx = random_floats(1 << 14, 2), vy = random_floats(1 << 14, 3);
        REQUIRE(tensor_set(*x, vx.data(), 0, vx.size() * sizeof(float)));
        REQUIRE(tensor_set(*y, vy.data(), 0, vy.size() * sizeof(float)));
        for (int i = 0; i < 4; ++i) REQUIRE(be->compute(g)); // queued back to back
        REQUIRE(be->synchronize());
        const auto s = be->stats();
        CHECK(s.computes == 4);
        if (graphs) {
            CHECK(s.captures == 1);
            CHECK(s.replays == 2);
            CHECK(s.launches == 4); // the first sight, node by node
        } else {
            CHECK(s.captures == 0);
            CHECK(s.launches == 16);
        }
        const auto got = read(*x);
        for (std::size_t i = 0; i < got.size(); ++i) {
            float want = vx[i];
            for (int k = 0; k < 4; ++k) {
                const float t = want + vy[i];
                want = t / (1.0f + std::exp(-t)) * 0.5f + 1.0f;
            }
            REQUIRE(std::abs(got[i] - want) <= 1e-5f * (1.0f + std::abs(want)));
        }
    }
}

TEST_CASE("cuda stream: events order two streams, timing spans a compute", "[cuda][stream]") {
    auto dev = open_or_skip();
    if (!dev) return;
    auto ba = dev->make_backend();
    auto bb = dev->make_backend();
    REQUIRE(ba);
    REQUIRE(bb);
    context ctx(context_params{.no_alloc = true});
    tensor* x = ctx.new_tensor_1d(elem_type::f32, 1 << 20);
    tensor* r = relu(ctx, x);
    tensor* s = sqr(ctx, r);
    auto bufs = alloc_tensors(ctx, dev->buffer_type());
    REQUIRE(bufs);
    const auto v = random_floats(1 << 20, 4);
    REQUIRE(ba->set_tensor_async(*x, v.data(), 0, v.size() * sizeof(float)));
    graph ga(r), gb;
    gb.build_forward(s);
    ba->set_timing(true);
    REQUIRE(ba->compute(graph_view(ga)));
    auto e = ba->make_event();
    REQUIRE(e);
    REQUIRE(ba->record(*e));
    REQUIRE(bb->wait(*e)); // s = r^2 runs on b after r on a
    REQUIRE(bb->compute(graph_view(gb).subview(gb.n_nodes() - 1, gb.n_nodes())));
    REQUIRE(bb->synchronize());
    REQUIRE(e->synchronize());
    const auto got = read(*s);
    for (std::size_t i = 0; i < got.size(); ++i) REQUIRE(got[i] == std::max(v[i], 0.0f) * std::max(v[i], 0.0f));
    const auto span = ba->last_compute_time();
    REQUIRE(span);
    CHECK(span->end_ns >= span->start_ns);
}

TEST_CASE("cuda: quantizing copies write core's bytes for every quantized type", "[cuda][quants]") {
    // tests/backends/cuda/test_cuda_quants.cpp checks the quantizers compiled for the host;
    // this runs them on the device: cpy of seeded values (several scales per row, a
    // few outliers) from f32 to each type, against core's from_float_row byte for byte
    auto dev = open_or_skip();
    if (!dev) return;
    auto be = dev->make_backend({.cuda_graphs = false});
    REQUIRE(be);
    constexpr elem_type types[] = {elem_type::q8_0, elem_type::q4_0,   elem_type::q4_1,  elem_type::q5_0,
                                   elem_type::q5_1, elem_type::iq4_nl, elem_type::mxfp4, elem_type::q2_K,
                                   elem_type::q3_K, elem_type::q4_K,   elem_type::q5_K,  elem_type::q6_K};
    constexpr std::int64_t n = 256 * 64;
    std::mt19937 rng(0x5eed0u);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> x(n);
    for (std::int64_t i = 0; i < n; ++i)
        x[i] = normal(rng) * std::ldexp(1.0f, static_cast<int>(i / 512 % 9) - 4) * (i % 97 == 5 ? 50.0f : 1.0f);
    for (const elem_type t : types) {
        SECTION(std::string(to_string(t))) {
            context ctx(context_params{.no_alloc = true});
            tensor* src = ctx.new_tensor_1d(elem_type::f32, n);
            tensor* dst = ctx.new_tensor_1d(t, n);
            graph g(cpy(ctx, src, dst));
            auto bufs = alloc_tensors(ctx, dev->buffer_type());
            REQUIRE(bufs);
            REQUIRE(tensor_set(*src, x.data(), 0, x.size() * sizeof(float)));
            REQUIRE(be->compute(g));
            REQUIRE(be->synchronize());
            const std::size_t bytes = row_size(t, n), bb = type_size(t);
            std::vector<unsigned char> got(bytes), want(bytes);
            REQUIRE(tensor_get(*dst, got.data(), 0, bytes));
            from_float_row(t, x.data(), want.data(), n);
            std::size_t bad = 0, first = bytes;
            for (std::size_t b = 0; b < bytes; b += bb)
                if (std::memcmp(got.data() + b, want.data() + b, bb) != 0 && bad++ == 0) first = b;
            if (bad != 0) {
                const auto hex = [&](const std::vector<unsigned char>& v) {
                    std::string h;
                    char two[3];
                    for (std::size_t i = first; i < first + std::min<std::size_t>(bb, 24); ++i) {
                        std::snprintf(two, sizeof two, "%02x", v[i]);
                        h += two;
                    }
                    return h;
                };
                const std::string g_hex = hex(got), w_hex = hex(want);
                INFO(bad << " of " << bytes / bb << " blocks differ; block " << first / bb << " device " << g_hex
                          << " core " << w_hex);
                CHECK(bad == 0);
            }
        }
    }
}

TEST_CASE("cuda backend: a node it cannot run is named, and nothing is queued", "[cuda]") {
    auto dev = open_or_skip();
    if (!dev) return;
    auto be = dev->make_backend();
    REQUIRE(be);
    context ctx(context_params{.no_alloc = true});
    tensor* a = ctx.new_tensor_1d(elem_type::f32, 64);
    tensor* b = silu(ctx, a);
    b->name = "the_silu";
    auto bufs = alloc_tensors(ctx, dev->buffer_type());
    REQUIRE(bufs);
    // a source in host memory
    context host(context_params{});
    tensor* h = host.new_tensor_1d(elem_type::f32, 64);
    tensor* hn = silu(host, h);
    graph gh(hn);
    const status s1 = be->compute(gh);
    CHECK(s1.code() == errc::invalid_argument);
    CHECK_THAT(s1.message(), Catch::Contains("not in this device's memory"));
    // a node assembled by hand that breaks the shape rules
    b->ne[0] = 63;
    graph g(b);
    const status s2 = be->compute(g);
    CHECK(s2.code() == errc::not_supported);
    CHECK_THAT(s2.message(), Catch::Contains("the_silu"));
    CHECK(be->stats().computes == 0);
}

TEST_CASE("cuda backend: peer copies between two GPUs", "[cuda][multi]") {
    auto devs = cuda::physical_devices();
    if (!devs || devs->size() < 2) {
        WARN("fewer than two CUDA devices, skipping the peer copies");
        return;
    }
    auto d0 = open_or_skip(0);
    auto d1 = open_or_skip(1);
    REQUIRE(d0);
    REQUIRE(d1);
    auto b1 = d1->make_backend();
    REQUIRE(b1);
    context c0(context_params{.no_alloc = true}), c1(context_params{.no_alloc = true});
    tensor* a = c0.new_tensor_1d(elem_type::f32, 5000);
    tensor* b = c1.new_tensor_1d(elem_type::f32, 5000);
    auto m0 = alloc_tensors(c0, d0->buffer_type());
    auto m1 = alloc_tensors(c1, d1->buffer_type());
    REQUIRE(m0);
    REQUIRE(m1);
    const auto v = random_floats(5000, 5);
    REQUIRE(tensor_set(*a, v.data(), 0, v.size() * sizeof(float)));
    REQUIRE(b1->copy_tensor_async(*a, *b));
    REQUIRE(b1->synchronize());
    CHECK(read(*b) == v);
}

namespace {

/// Layers [0, split) and the global weights on the GPU, the rest on the CPU; three runs
/// (the second captures the splits' CUDA graphs, the third replays them).
std::vector<float> llama_on_cuda_cpu(const test::llama_params& p, const cuda_device& dev, cuda_backend& be,
                                     int split) {
    test::llama_instance s(p, buffer_type_ref(dev.buffer_type()), split, true);
    cpu_backend cpu({.n_threads = 2});
    scheduler sched(scheduler_params{}, be, cpu);
    std::vector<float> out;
    for (int run = 0; run < 3; ++run) {
        REQUIRE(sched.alloc_graph(s.g));
        REQUIRE(test::fill_llama(s.model, s.inputs, 7));
        const status st = sched.compute(s.g);
        INFO(st.describe());
        REQUIRE(st);
        out = read(*s.g.back());
    }
    return out;
}

} // namespace

TEST_CASE("cuda + scheduler: the llama graph split between CUDA and the CPU equals the CPU", "[cuda][sched][llama]") {
    auto dev = open_or_skip();
    if (!dev) return;
    const test::llama_params p = test::small_llama();
    const auto expected = test::llama_on_cpu(p, 7);
    for (const bool cublas : {true, false}) {
        INFO("cuBLAS: " << cublas);
        auto be = dev->make_backend({.cublas = cublas});
        REQUIRE(be);
        for (const int split : {2, p.n_layer}) {
            INFO("layers on the GPU: " << split);
            const auto got = llama_on_cuda_cpu(p, *dev, *be, split);
            REQUIRE(got.size() == expected.size());
            for (float v : got) REQUIRE(std::isfinite(v));
            const double e = test::nmse_of(expected, got);
            INFO("nmse " << e);
            CHECK(e <= 1e-6);
        }
        CHECK(be->stats().replays > 0);
    }
}

// ---------------------------------------------------------------------------------------
// The copy utilities and the conformance runner on this device
// (tests/support/device_copy_cases.hpp): tensor_copy in every direction,
// tensor_copy_async, graph_copy of the llama graph, compare_backends, a slice of the
// catalogue.

static_assert(is_enabled_backend<cuda_backend>);

TEST_CASE("cuda: tensor_copy in every direction among host data, CPU, CUDA and the test device") {
    if (auto dev = open_or_skip())
        test::copies_every_direction(*dev, "CUDA");
}

TEST_CASE("cuda: tensor_copy_async on the CUDA stream") {
    if (auto dev = open_or_skip())
        test::copy_async_on_stream(*dev, "CUDA");
}

TEST_CASE(
    "cuda: graph_copy of the llama reference graph computes the same logits, node by node too") {
    if (auto dev = open_or_skip())
        test::llama_graph_copy(*dev, "CUDA");
}

TEST_CASE("cuda: a slice of the catalogue passes against the reference") {
    if (auto dev = open_or_skip())
        test::catalogue_slice(*dev, "CUDA");
}

TEST_CASE("cuda lifetime: buffers freed while a compute and a read that use them are queued are freed after the work",
          "[cuda][lifetime]") {
    auto dev = open_or_skip();
    if (!dev) return;
    auto be = dev->make_backend();
    REQUIRE(be);
    test::check_free_while_queued(*dev, *be, false); // cudaMemGetInfo counts other processes too
}

TEST_CASE("cuda lifetime: a backend destroyed with work queued waits for it and queued transfers keep their memory",
          "[cuda][lifetime]") {
    auto dev = open_or_skip();
    if (!dev) return;
    test::check_destroy_while_queued(*dev);
}

TEST_CASE("cuda get_rows and set_rows: an index out of range is errc::out_of_range at synchronize as on the CPU",
          "[cuda][get_rows][set_rows][errors]") {
    auto dev = open_or_skip();
    if (!dev) return;
    test::check_get_rows_out_of_range(*dev);
    test::check_set_rows_out_of_range(*dev);
}

TEST_CASE("cuda add_id: an expert id out of range is errc::out_of_range at synchronize as on the CPU",
          "[cuda][add_id][errors]") {
    auto dev = open_or_skip();
    if (!dev) return;
    test::check_add_id_out_of_range(*dev);
}

TEST_CASE("cuda ssm_scan: a state id out of range is errc::out_of_range at synchronize as on the CPU",
          "[cuda][ssm_scan][errors]") {
    auto dev = open_or_skip();
    if (!dev) return;
    test::check_ssm_scan_out_of_range(*dev);
}

TEST_CASE("cuda mul_mat_id: an expert id out of range is errc::out_of_range at synchronize as on the CPU",
          "[cuda][mul_mat_id][errors]") {
    auto dev = open_or_skip();
    if (!dev) return;
    test::check_mul_mat_id_out_of_range(*dev);
}

TEST_CASE("cuda get_rows: an out-of-range index fails a scheduler's compute", "[cuda][get_rows][errors]") {
    auto dev = open_or_skip();
    if (!dev) return;
    test::check_get_rows_out_of_range_scheduled(*dev);
}
