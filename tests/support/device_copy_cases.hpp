#pragma once
// The copy utilities and the conformance runner on one device of a real backend (Vulkan,
// CUDA): the bodies the backends' test files share, each taking an opened device.

#include "llama_cpu.hpp"
#include "llama_graph.hpp"
#include "ref_oracle.hpp"
#include "test_backend.hpp"

#include <backplane/backplane.hpp>
#include <backplane/conformance.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace backplane::test {

namespace cf = backplane::conformance;

inline std::vector<std::uint8_t> random_bytes(std::size_t n, std::uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<std::uint8_t> v(n);
    for (auto& b : v)
        b = static_cast<std::uint8_t>(rng());
    return v;
}

/// All of t's bytes, read through its buffer.
inline std::vector<std::uint8_t> bytes_of(const tensor& t) {
    std::vector<std::uint8_t> v(t.nbytes());
    REQUIRE(tensor_get(t, v.data(), 0, v.size()).ok());
    return v;
}

/// tensor_copy in every direction among host data, a CPU buffer, the device and the
/// non-host test device (f32 and q4_0), then a strided view of device memory written from
/// the host: its holes keep their bytes.
template <class Device> void copies_every_direction(const Device& dev, const char* name) {
    test_device td({.name = "TD"});
    context host;
    context meta{context_params{.no_alloc = true}};
    std::vector<buffer_ptr> bufs;
    const buffer_type_ref types[] = {cpu_buffer_type::instance(), dev.buffer_type(),
                                     td.buffer_type()};
    const char* names[] = {"host data", "CPU", name, "test device"};
    auto make = [&](int w, elem_type t) -> tensor* {
        if (w == 0)
            return host.new_tensor(t, {96, 7, 2});
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
                const auto data =
                    random_bytes(src->nbytes(), static_cast<std::uint32_t>(from * 4 + to));
                REQUIRE(tensor_set(*src, data.data(), 0, data.size()).ok());
                REQUIRE(tensor_copy(*src, *dst).ok());
                CHECK(bytes_of(*dst) == data);
            }

    // a transposed view of device memory written from the host: the holes keep their bytes
    tensor* root = make(2, elem_type::f32);
    const std::vector<std::uint8_t> fill(root->nbytes(), 0x5a);
    REQUIRE(tensor_set(*root, fill.data(), 0, fill.size()).ok());
    tensor* v = transpose(meta, view_2d(meta, root, 96, 3, 2 * root->nb[1], 0)); // rows 0, 2, 4
    const auto vals = random_bytes(3 * 384, 99);
    tensor* sv = transpose(
        host, view_2d(host, host.new_tensor(elem_type::f32, {96, 6}), 96, 3, 2 * 96 * 4, 0));
    REQUIRE(same_layout(*sv, *v));
    auto* sroot = static_cast<std::uint8_t*>(sv->view_src->data);
    for (std::size_t r = 0; r < 3; ++r)
        std::memcpy(sroot + 2 * r * 384, vals.data() + r * 384, 384);
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

/// tensor_copy_async: host to device, then device to device on the device's stream.
template <class Device> void copy_async_on_stream(const Device& dev, const char* name) {
    (void)name;
    auto be = dev.make_backend();
    REQUIRE(be);
    cpu_backend cpu;
    context meta{context_params{.no_alloc = true}};
    tensor* a = meta.new_tensor(elem_type::f32, {1000, 3});
    tensor* b = meta.new_tensor(elem_type::f32, {1000, 3});
    auto bufs = alloc_tensors(meta, dev.buffer_type());
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

/// graph_copy of the llama reference graph onto the device (with guard bytes) computes the
/// CPU's logits; compare_backends CPU vs the device, node by node, within thresholds.
template <class Device> void llama_graph_copy(const Device& dev, const char* name) {
    (void)name;
    auto be = dev.make_backend();
    REQUIRE(be);
    const auto p = small_llama();
    const auto expected = llama_on_cpu(p, 42);

    llama_instance s(p); // weights in CPU buffers, graph not allocated yet
    graph_allocator ga(cpu_buffer_type::instance());
    REQUIRE(ga.alloc_graph(s.g).ok());
    REQUIRE(fill_llama(s.model, s.inputs, 42).ok());
    auto copy = graph_copy(*be, s.g, {.guard_bytes = 256});
    REQUIRE(copy);
    REQUIRE(be->compute(copy->graph()).ok());
    REQUIRE(be->synchronize().ok());
    CHECK(copy->check_guards().ok());
    const auto got = tensor_get_all<float>(copy->at(*s.g.back())).value();
    CHECK(nmse_of(expected, got) < 1e-6);

    // node by node, CPU vs device: every computed node within its threshold
    cpu_backend cpu({.n_threads = 2});
    std::size_t over = 0, compared = 0;
    auto r = compare_backends(cpu, *be, s.g, [&](std::size_t, const tensor& x, const tensor& y) {
        const auto e = tensor_read_f32(x).value();
        const auto a = tensor_read_f32(y).value();
        ++compared;
        const double n = nmse_of(e, a);
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

/// A slice of the catalogue (f32 operands, two shapes per family) passes on the device.
template <class Device> void catalogue_slice(const Device& dev, const char* name) {
    (void)name;
    auto be = dev.make_backend();
    REQUIRE(be);
    cpu_backend ref({.n_threads = 1, .reference = true});
    int run = 0;
    for (const cf::op_cases& f : cf::catalogue()) {
        const std::vector<elem_type> types(static_cast<std::size_t>(f.n_types), elem_type::f32);
        if (!cf::claimed(ref, f, types) || !cf::supports(*be, f, types))
            continue;
        for (const cf::case_spec& spec : cf::cases_for(f, types, 2, 8)) {
            const cf::case_result r = cf::run_case(ref, *be, spec);
            if (r.result == cf::outcome::unsupported)
                continue;
            INFO(cf::to_string(spec) << ": " << r.message);
            CHECK(r.result == cf::outcome::pass);
            ++run;
        }
    }
    CHECK(run >= 30);
}

} // namespace backplane::test
