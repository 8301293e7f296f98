// The copy utilities and the conformance runner on a Vulkan device (lavapipe where there
// is no GPU): tensor_copy in every direction among host data, a CPU buffer, Vulkan and the
// non-host test device, strided views into Vulkan memory, tensor_copy_async on the Vulkan
// stream, graph_copy of the llama reference graph onto Vulkan, compare_backends CPU vs
// Vulkan, and a slice of the catalogue. Skips with a message where no Vulkan device exists.

#include "../support/llama_cpu.hpp"
#include "../support/llama_graph.hpp"
#include "../support/ref_oracle.hpp"
#include "../support/test_backend.hpp"

#include <backplane/backends/vulkan.hpp>
#include <backplane/backplane.hpp>
#include <backplane/conformance.hpp>
#include <backplane/enabled.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <optional>
#include <random>
#include <vector>

using namespace backplane;
namespace cf = backplane::conformance;

static_assert(is_enabled_backend<vulkan_backend>);

namespace {

std::optional<vulkan_device> open_vulkan() {
    auto dev = vulkan_device::open({.index = 0});
    if (!dev) {
        WARN("no Vulkan device, skipping: " << dev.error().describe());
        return std::nullopt;
    }
    return std::move(*dev);
}

std::vector<std::uint8_t> random_bytes(std::size_t n, std::uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<std::uint8_t> v(n);
    for (auto& b : v) b = static_cast<std::uint8_t>(rng());
    return v;
}

std::vector<std::uint8_t> bytes_of(const tensor& t) {
    std::vector<std::uint8_t> v(t.nbytes());
    REQUIRE(tensor_get(t, v.data(), 0, v.size()).ok());
    return v;
}

} // namespace

TEST_CASE("tensor_copy: every direction among host data, CPU, Vulkan and the test device") {
    auto vk = open_vulkan();
    if (!vk) return;
    test::test_device td({.name = "TD"});
    context host;
    context meta{context_params{.no_alloc = true}};
    std::vector<buffer_ptr> bufs;
    const buffer_type_ref types[] = {cpu_buffer_type::instance(), vk->buffer_type(), td.buffer_type()};
    const char* names[] = {"host data", "CPU", "Vulkan", "test device"};
    auto make = [&](int w, elem_type t) -> tensor* {
        if (w == 0) return host.new_tensor(t, {96, 7, 2});
        tensor* x = meta.new_tensor(t, {96, 7, 2});
        const buffer_type_ref bt = types[w - 1];
        auto b = bt.allocate(bt.alloc_size(*x) + 512);
        REQUIRE(b);
        tensor_allocator ta(**b);
        REQUIRE(ta.allocate(*x).ok());
        bufs.push_back(std::move(*b));
        return x;
    };
    for (elem_type t : {elem_type::f32, elem_type::q4_0})
        for (int from = 0; from < 4; ++from)
            for (int to = 0; to < 4; ++to) {
                INFO(names[from] << " -> " << names[to] << " " << to_string(t));
                tensor* src = make(from, t);
                tensor* dst = make(to, t);
                const auto data = random_bytes(src->nbytes(), static_cast<std::uint32_t>(from * 4 + to));
                REQUIRE(tensor_set(*src, data.data(), 0, data.size()).ok());
                REQUIRE(tensor_copy(*src, *dst).ok());
                CHECK(bytes_of(*dst) == data);
            }

    // a transposed view of Vulkan memory written from the host: the holes keep their bytes
    tensor* root = make(2, elem_type::f32);
    const std::vector<std::uint8_t> fill(root->nbytes(), 0x5a);
    REQUIRE(tensor_set(*root, fill.data(), 0, fill.size()).ok());
    tensor* v = transpose(meta, view_2d(meta, root, 96, 3, 2 * root->nb[1], 0)); // rows 0, 2, 4
    const auto vals = random_bytes(3 * 384, 99);
    tensor* sv = transpose(host, view_2d(host, host.new_tensor(elem_type::f32, {96, 6}), 96, 3, 2 * 96 * 4, 0));
    REQUIRE(same_layout(*sv, *v));
    auto* sroot = static_cast<std::uint8_t*>(sv->view_src->data);
    for (std::size_t r = 0; r < 3; ++r) std::memcpy(sroot + 2 * r * 384, vals.data() + r * 384, 384);
    REQUIRE(tensor_copy(*sv, *v).ok());
    const auto got = bytes_of(*root);
    for (std::size_t r = 0; r < 14; ++r) {
        INFO("row " << r);
        const bool copied = r % 2 == 0 && r < 6;
        for (std::size_t i = 0; i < 384; ++i) {
            const std::uint8_t want = copied ? vals[(r / 2) * 384 + i] : std::uint8_t{0x5a};
            if (got[r * 384 + i] != want) {
                FAIL_CHECK("byte " << i << " of row " << r);
                break;
            }
        }
    }
}

TEST_CASE("tensor_copy_async: Vulkan to Vulkan on the stream, host to Vulkan by the fallback or the stream") {
    auto vk = open_vulkan();
    if (!vk) return;
    auto be = vk->make_backend();
    REQUIRE(be);
    cpu_backend cpu;
    context meta{context_params{.no_alloc = true}};
    tensor* a = meta.new_tensor(elem_type::f32, {1000, 3});
    tensor* b = meta.new_tensor(elem_type::f32, {1000, 3});
    auto bufs = alloc_tensors(meta, vk->buffer_type());
    REQUIRE(bufs);
    context host;
    tensor* h = host.new_tensor(elem_type::f32, {1000, 3});
    const auto data = random_bytes(h->nbytes(), 1);
    std::memcpy(h->data, data.data(), data.size());
    REQUIRE(tensor_copy_async(cpu, *be, *h, *a).ok());
    REQUIRE(tensor_copy_async(*be, *be, *a, *b).ok());
    REQUIRE(be->synchronize().ok());
    CHECK(bytes_of(*b) == data);
}

TEST_CASE("graph_copy: the llama reference graph copied onto Vulkan computes the same logits") {
    auto vk = open_vulkan();
    if (!vk) return;
    auto be = vk->make_backend();
    REQUIRE(be);
    const auto p = test::small_llama();
    const auto expected = test::llama_on_cpu(p, 42);

    test::llama_instance s(p); // weights in CPU buffers, graph not allocated yet
    graph_allocator ga(cpu_buffer_type::instance());
    REQUIRE(ga.alloc_graph(s.g).ok());
    REQUIRE(test::fill_llama(s.model, s.inputs, 42).ok());
    auto copy = graph_copy(*be, s.g, {.guard_bytes = 256});
    REQUIRE(copy);
    REQUIRE(be->compute(copy->graph()).ok());
    REQUIRE(be->synchronize().ok());
    CHECK(copy->check_guards().ok());
    const auto got = tensor_get_all<float>(copy->at(*s.g.back())).value();
    CHECK(test::nmse_of(expected, got) < 1e-6);

    // node by node, CPU vs Vulkan: every computed node within its threshold
    cpu_backend cpu({.n_threads = 2});
    std::size_t over = 0, compared = 0;
    auto r = compare_backends(cpu, *be, s.g, [&](std::size_t, const tensor& x, const tensor& y) {
        const auto e = tensor_read_f32(x).value();
        const auto a = tensor_read_f32(y).value();
        ++compared;
        const double n = test::nmse_of(e, a);
        if (!(n <= cf::default_max_nmse(x) * 10)) {
            ++over;
            UNSCOPED_INFO(x.name << " " << to_string(x.op) << ": nmse " << n);
        }
        return true;
    });
    REQUIRE(r);
    CHECK(compared > 50);
    CHECK(over == 0);
}

TEST_CASE("conformance: a slice of the catalogue on Vulkan passes against the reference") {
    auto vk = open_vulkan();
    if (!vk) return;
    auto be = vk->make_backend();
    REQUIRE(be);
    cpu_backend ref({.n_threads = 1, .reference = true});
    int run = 0;
    for (const cf::op_family& f : cf::catalogue()) {
        const std::vector<elem_type> types(static_cast<std::size_t>(f.n_types), elem_type::f32);
        if (!cf::claimed(ref, f, types) || !cf::supports(*be, f, types)) continue;
        for (const cf::case_spec& spec : cf::cases_for(f, types, 2, 8)) {
            const cf::case_result r = cf::run_case(ref, *be, spec);
            if (r.result == cf::outcome::unsupported) continue;
            INFO(cf::to_string(spec) << ": " << r.message);
            CHECK(r.result == cf::outcome::pass);
            ++run;
        }
    }
    CHECK(run >= 30);
}
