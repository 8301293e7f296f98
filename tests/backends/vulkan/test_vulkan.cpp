// The Vulkan backend (label vulkan): devices, memory with and without staging, and
// errors as statuses; its ops are checked by the parity cases (test_vulkan_parity.cpp).
// Runs on whatever Vulkan driver is present (lavapipe in CI); skips with a message where
// there is none. Every validation-layer message fails the test.

#include <backplane/backends/vulkan.hpp>
#include <backplane/backplane.hpp>
#include <backplane/core/convert.hpp>

#include "../../support/ref_oracle.hpp"

#include <catch2/catch.hpp>

#include "../../support/vulkan_test_support.hpp"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

using namespace backplane;
using backplane::test::open_or_skip;

TEST_CASE("vulkan: the instance lists its devices and each one opens", "[vulkan]") {
    auto list = vulkan::physical_devices();
    if (!list) {
        WARN("no Vulkan here, skipping: " << list.error().describe());
        return;
    }
    REQUIRE_FALSE(list->empty());
    for (const auto& info : *list) {
        auto dev = vulkan_device::open({.index = info.index});
        REQUIRE(dev);
        CHECK(dev->name() == "Vulkan" + std::to_string(info.index));
        CHECK(dev->description().find(info.name) != std::string_view::npos);
        CHECK(dev->kind() == info.kind);
        CHECK(dev->memory().total > 0);
        CHECK(dev->buffer_type().name() == dev->name());
        CHECK_FALSE(dev->buffer_type().is_host());
        CHECK(dev->host_buffer_type().is_host());
        CHECK(dev->supports_buffer_type(buffer_type_ref(dev->buffer_type())));
        CHECK_FALSE(dev->supports_buffer_type(buffer_type_ref(cpu_buffer_type::instance())));
    }
    auto missing = vulkan_device::open({.index = list->size()});
    REQUIRE_FALSE(missing);
    CHECK(missing.error().code() == errc::not_supported);
    CHECK(vulkan::validation_message_count() == 0);
}

TEST_CASE("vulkan: memory round trips, mapped and staged", "[vulkan]") {
    for (const bool staging : {false, true}) {
        auto dev = open_or_skip(staging);
        if (!dev) return;
        INFO("staging forced: " << staging);
        if (staging) CHECK_FALSE(dev->maps_device_memory());
        context ctx(context_params{.no_alloc = true});
        tensor* a = ctx.new_tensor_1d(elem_type::f32, 1000);
        tensor* b = ctx.new_tensor_1d(elem_type::f32, 1000);
        auto bufs = alloc_tensors(ctx, dev->buffer_type());
        REQUIRE(bufs);
        std::vector<float> v(1000), w(1000);
        std::mt19937 rng(1);
        for (float& x : v) x = static_cast<float>(test::uniform01(rng)) - 0.5f;
        REQUIRE(tensor_set(*a, v.data(), 0, 4000));
        REQUIRE(tensor_get(*a, w.data(), 0, 4000));
        CHECK(v == w);
        // a byte range, unaligned
        REQUIRE(tensor_get(*a, w.data(), 6, 13));
        CHECK(std::memcmp(reinterpret_cast<const std::byte*>(v.data()) + 6, w.data(), 13) == 0);
        // memset on and off 4-byte boundaries
        REQUIRE(tensor_memset(*b, 0, 0, 4000));
        REQUIRE(tensor_memset(*b, 0x3f, 5, 7));
        std::vector<std::uint8_t> bytes(4000);
        REQUIRE(tensor_get(*b, bytes.data(), 0, 4000));
        for (std::size_t i = 0; i < 4000; ++i) CHECK(bytes[i] == (i >= 5 && i < 12 ? 0x3f : 0));
        // device-side copy
        REQUIRE(b->buffer->copy_tensor(*a, *b));
        REQUIRE(tensor_get(*b, w.data(), 0, 4000));
        CHECK(v == w);
        // out of range is a status
        CHECK(tensor_get(*a, w.data(), 3990, 20).code() == errc::out_of_range);
    }
    CHECK(vulkan::validation_message_count() == 0);
}

TEST_CASE("vulkan: errors are statuses", "[vulkan][errors]") {
    auto dev = open_or_skip(false);
    if (!dev) return;
    auto be = dev->make_backend();
    REQUIRE(be);
    SECTION("a node whose tensors are in host memory") {
        context ctx(context_params{.no_alloc = false});
        tensor* a = ctx.new_tensor_1d(elem_type::f32, 8);
        graph g(relu(ctx, a));
        const status s = be->compute(g);
        CHECK(s.code() == errc::invalid_argument);
        CHECK(s.message().find("not in this device's memory") != std::string::npos);
    }
    SECTION("an op it does not compute") {
        context ctx(context_params{.no_alloc = true});
        tensor* a = ctx.new_tensor_2d(elem_type::f16, 8, 8); // element-wise ops are f32 only
        tensor* y = relu(ctx, a);
        graph g(y);
        auto bufs = alloc_tensors(ctx, dev->buffer_type());
        REQUIRE(bufs);
        CHECK_FALSE(be->supports_op(*y));
        const status s = be->compute(g);
        CHECK(s.code() == errc::not_supported);
        CHECK(s.message().find("not supported") != std::string::npos);
    }
    SECTION("a tensor larger than one storage-buffer binding") {
        const std::size_t limit = dev->max_storage_buffer_range();
        const auto n = static_cast<std::int64_t>(limit / 4 + 1024); // just over the limit
        context ctx(context_params{.no_alloc = true});
        tensor* a = ctx.new_tensor_1d(elem_type::f32, n);
        tensor* y = relu(ctx, a);
        graph g(y);
        CHECK_FALSE(be->supports_op(*y)); // the scheduler computes it elsewhere
        auto bufs = alloc_tensors(ctx, dev->buffer_type());
        if (!bufs) { // a device with less memory than twice its binding limit
            CHECK(bufs.error().code() == errc::alloc_failed);
        } else {
            const status s = be->compute(g);
            CHECK(s.code() == errc::not_supported);
            CHECK(s.message().find("storage-buffer binding") != std::string::npos);
        }
    }
    SECTION("a buffer larger than the device's memory") {
        auto r = dev->buffer_type().allocate(std::size_t{1} << 50);
        REQUIRE_FALSE(r);
        CHECK(r.error().code() == errc::alloc_failed);
    }
    CHECK(vulkan::validation_message_count() == 0);
}

TEST_CASE("vulkan: flash_attn_ext is claimed for heads up to 1024 values, with 16-bit storage", "[vulkan][features]") {
    using vulkan::detail::features;
    using vulkan::detail::supports;
    context ctx(context_params{.no_alloc = true});
    const auto attention = [&](std::int64_t dk, std::int64_t dv, elem_type t) {
        tensor* q = ctx.new_tensor(elem_type::f32, {dk, 3, 4, 1});
        tensor* k = ctx.new_tensor(t, {dk, 9, 2, 1});
        tensor* v = ctx.new_tensor(t, {dv, 9, 2, 1});
        tensor* mask = ctx.new_tensor(elem_type::f16, {9, 3, 1, 1});
        return flash_attn_ext_add_sinks(flash_attn_ext(ctx, q, k, v, mask, 0.125f, 8.0f, 30.0f),
                                        ctx.new_tensor(elem_type::f32, {4}));
    };
    features full;
    full.storage16 = true;
    full.shared_memory = 32768;
    full.max_invocations = 1024;
    for (const elem_type t : {elem_type::f32, elem_type::f16, elem_type::bf16, elem_type::q8_0, elem_type::q4_0}) {
        INFO(to_string(t));
        CHECK(supports(*attention(128, 64, t), full));
        CHECK(supports(*attention(1024, 1024, t), full));
        CHECK_FALSE(supports(*attention(1056, 64, t), full)); // q's row beyond shared memory's
        CHECK_FALSE(supports(*attention(64, 1056, t), full)); // the accumulator's
    }
    features no16 = full;
    no16.storage16 = false; // k, v and the mask are read as 16-bit words
    CHECK_FALSE(supports(*attention(64, 64, elem_type::f32), no16));
    features small = full;
    small.shared_memory = 4096;
    CHECK_FALSE(supports(*attention(64, 64, elem_type::f32), small));
}

TEST_CASE("vulkan: supports_op follows the device's features", "[vulkan][features]") {
    // plans are pure functions of the node and the features: no device needed
    using vulkan::detail::features;
    using vulkan::detail::supports;
    context ctx(context_params{.no_alloc = true});
    tensor* w16 = ctx.new_tensor_2d(elem_type::f16, 64, 64);
    tensor* wq = ctx.new_tensor_2d(elem_type::q8_0, 64, 64);
    tensor* w32 = ctx.new_tensor_2d(elem_type::f32, 64, 64);
    tensor* x = ctx.new_tensor_2d(elem_type::f32, 64, 8);
    tensor* idx = ctx.new_tensor_1d(elem_type::i32, 4);
    const std::vector<tensor*> need16 = {mul_mat(ctx, w16, x), mul_mat(ctx, wq, x), get_rows(ctx, w16, idx),
                                         get_rows(ctx, wq, idx), cpy(ctx, w32, w16), sum_rows(ctx, w16)};
    tensor* f32_only = mul_mat(ctx, w32, x);
    tensor* rows = get_rows(ctx, w32, idx);

    features full; // what a desktop GPU offers
    full.fp16 = full.int8 = full.storage16 = full.storage8 = true;
    full.subgroup_size = 32;
    full.shared_memory = 49152;
    full.max_invocations = 1024;
    features no16 = full;
    no16.storage16 = false;
    for (tensor* t : need16) {
        INFO(to_string(t->op) << " of " << to_string(t->src[0]->type));
        CHECK(supports(*t, full));
        CHECK_FALSE(supports(*t, no16)); // reads 16-bit words
    }
    CHECK(supports(*f32_only, no16));
    CHECK(supports(*rows, no16));
    // mxfp4's 17-byte blocks are read as bytes: 8-bit storage too; the other quantized
    // types' blocks are 16-bit words
    tensor* wx = ctx.new_tensor_2d(elem_type::mxfp4, 64, 64);
    tensor* wk = ctx.new_tensor_2d(elem_type::q4_K, 256, 4);
    features no8 = full;
    no8.storage8 = false;
    for (tensor* t : {mul_mat(ctx, wx, x), get_rows(ctx, wx, idx), concat(ctx, wx, wx, 1)}) {
        INFO(to_string(t->op) << " of mxfp4");
        CHECK(supports(*t, full));
        CHECK_FALSE(supports(*t, no8));
        CHECK_FALSE(supports(*t, no16));
    }
    tensor* k_rows = get_rows(ctx, wk, idx);
    CHECK(supports(*k_rows, no8));
    CHECK_FALSE(supports(*k_rows, no16));
    // a device without the shared memory or invocations any mul_mat kernel needs
    features tiny = full;
    tiny.shared_memory = 256;
    CHECK_FALSE(supports(*f32_only, tiny));
    CHECK(supports(*rows, tiny)); // get_rows needs no shared memory
    features few = full;
    few.max_invocations = 8;
    CHECK_FALSE(supports(*f32_only, few));
    // a binding limit below a tensor's size
    features small = full;
    small.max_binding = 1024;
    CHECK_FALSE(supports(*f32_only, small));
    // argsort and top_k sort a row in one workgroup's shared memory: 1024 values in 8 KiB,
    // 4096 in 32 KiB; longer rows are refused
    features shared16k = full;
    shared16k.shared_memory = 16384;
    for (const std::int64_t n : {1024, 1025, 4096, 4097}) {
        tensor* a = ctx.new_tensor_2d(elem_type::f32, n, 3);
        for (tensor* t : {argsort(ctx, a, sort_order::desc), top_k(ctx, a, 5)}) {
            INFO(to_string(t->op) << " of rows of " << n);
            CHECK(supports(*t, full) == (n <= 4096));
            CHECK(supports(*t, shared16k) == (n <= 1024));
        }
    }
    tensor* s16 = argsort(ctx, w16);
    CHECK(supports(*s16, full));
    CHECK_FALSE(supports(*s16, no16));
}

TEST_CASE("vulkan: the embedded shaders are sorted and found by name", "[vulkan][spirv]") {
    const auto all = vulkan::spirv::all();
    REQUIRE(std::size(all) > 0);
    for (std::size_t i = 0; i < std::size(all); ++i) {
        INFO(all[i].name);
        if (i > 0) CHECK(all[i - 1].name < all[i].name); // find's binary search relies on it
        CHECK(vulkan::spirv::find(all[i].name) == &all[i]);
        CHECK(all[i].n_words > 5); // a SPIR-V header at least
        CHECK(all[i].words[0] == 0x07230203u);
    }
    CHECK(vulkan::spirv::find("") == nullptr);
    CHECK(vulkan::spirv::find("no_such_shader") == nullptr);
    CHECK(vulkan::spirv::find("zzz") == nullptr);
    CHECK(vulkan::spirv::find("cpy_f32_f32") != nullptr);
}

TEST_CASE("vulkan: quantized types dequantize and quantize bit for bit as core does", "[vulkan][quant]") {
    // The parity cases compare quantized results by NMSE; this checks every bit: every
    // quantized type to f32 (cpy and get_rows) against core's dequantizers, and f32 to
    // each type Vulkan quantizes into against core's quantizers.
    auto dev = open_or_skip(false);
    if (!dev) return;
    auto be = dev->make_backend();
    REQUIRE(be);
    constexpr std::int64_t width = 512, rows = 3; // whole blocks of every type
    std::vector<float> x(static_cast<std::size_t>(width * rows));
    std::mt19937 rng(11);
    for (std::size_t i = 0; i < x.size(); ++i) {
        const std::size_t block = i / 32;
        // magnitudes from 1e-3 to 1e3 by block; one block of zeros, one of equal values
        const float scale = std::pow(10.0f, static_cast<float>(block % 7) - 3.0f);
        x[i] = block == 5 ? 0.0f : block == 9 ? 0.375f : scale * (2.0f * static_cast<float>(test::uniform01(rng)) - 1.0f);
    }
    const auto run = [&](tensor* out) {
        graph g(out);
        REQUIRE(be->supports_op(*out));
        REQUIRE(be->compute(g));
        REQUIRE(be->synchronize());
    };
    for (const elem_type t : all_elem_types) {
        if (!is_quantized(t) || !converts_from_float(t)) continue; // the lattice i-quants: read on the CPU only
        INFO("type " << to_string(t));
        const std::size_t bytes = row_size(t, width) * rows;
        std::vector<std::byte> q(bytes);
        for (std::int64_t r = 0; r < rows; ++r)
            from_float_row(t, x.data() + r * width, q.data() + static_cast<std::size_t>(r) * row_size(t, width), width);
        std::vector<float> want(x.size());
        for (std::int64_t r = 0; r < rows; ++r)
            to_float_row(t, q.data() + static_cast<std::size_t>(r) * row_size(t, width), want.data() + r * width, width);

        context ctx(context_params{.no_alloc = true});
        tensor* qt = ctx.new_tensor_2d(t, width, rows);
        tensor* f = ctx.new_tensor_2d(elem_type::f32, width, rows);
        tensor* idx = ctx.new_tensor_1d(elem_type::i32, rows);
        tensor* picked = get_rows(ctx, qt, idx);
        tensor* xs = ctx.new_tensor_2d(elem_type::f32, width, rows);
        tensor* qt2 = ctx.new_tensor_2d(t, width, rows);
        auto buf = alloc_tensors(ctx, dev->buffer_type());
        REQUIRE(buf);
        REQUIRE(tensor_set(*qt, q.data(), 0, bytes));
        REQUIRE(tensor_set(*xs, x.data(), 0, x.size() * sizeof(float)));
        const std::int32_t order[rows] = {2, 0, 1};
        REQUIRE(tensor_set(*idx, order, 0, sizeof order));

        std::vector<float> got(x.size());
        run(cpy(ctx, qt, f));
        REQUIRE(tensor_get(*f, got.data(), 0, got.size() * sizeof(float)));
        CHECK(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0);
        run(picked);
        REQUIRE(tensor_get(*picked, got.data(), 0, got.size() * sizeof(float)));
        for (std::int64_t r = 0; r < rows; ++r)
            CHECK(std::memcmp(got.data() + r * width, want.data() + order[r] * width, width * sizeof(float)) == 0);

        tensor* quantize = cpy(ctx, xs, qt2);
        if (!be->supports_op(*quantize)) continue; // q8_K: the CPU's
        run(quantize);
        std::vector<std::byte> got_q(bytes);
        REQUIRE(tensor_get(*qt2, got_q.data(), 0, bytes));
        CHECK(std::memcmp(got_q.data(), q.data(), bytes) == 0);
    }
    CHECK(vulkan::validation_message_count() == 0);
}

namespace {

/// Rows of super-blocks of 256 values, each of one kind: normal values at a scale from
/// 1e-3 to 1e3, zeros, tiny values (1e-8), one outlier a thousand times the rest, sub-blocks
/// of 32 alternately zero and not, or small integers.
std::vector<float> kquant_test_rows(unsigned seed, std::size_t n) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> x(n);
    for (std::size_t b = 0; b < n / 256; ++b) {
        float* v = x.data() + 256 * b;
        const float scale = std::pow(10.0f, static_cast<float>(rng() % 7) - 3.0f);
        const auto kind = static_cast<int>((b + seed) % 6);
        for (int j = 0; j < 256; ++j) {
            switch (kind) {
            case 0: v[j] = scale * normal(rng); break;
            case 1: v[j] = 0.0f; break;
            case 2: v[j] = 1e-8f * normal(rng); break;
            case 3: v[j] = scale * normal(rng); break;
            case 4: v[j] = (j / 32) % 2 ? 0.0f : scale * normal(rng); break;
            default: v[j] = static_cast<float>(static_cast<int>(rng() % 17) - 8); break;
            }
        }
        if (kind == 3) v[rng() % 256] = 1000.0f * scale;
    }
    return x;
}

} // namespace

TEST_CASE("vulkan: cpy and set_rows quantize into mxfp4 and the K-quants bit for bit as core does",
          "[vulkan][quant]") {
    auto dev = open_or_skip(false);
    if (!dev) return;
    auto be = dev->make_backend();
    REQUIRE(be);
    constexpr std::int64_t width = 1024, rows = 4;
    const elem_type types[] = {elem_type::mxfp4, elem_type::q2_K, elem_type::q3_K,
                               elem_type::q4_K,  elem_type::q5_K, elem_type::q6_K};
    const auto run = [&](tensor* out) {
        graph g(out);
        REQUIRE(be->supports_op(*out));
        REQUIRE(be->compute(g));
        REQUIRE(be->synchronize());
    };
    for (const elem_type t : types)
        for (const unsigned seed : {1u, 2u, 3u}) {
            INFO("type " << to_string(t) << ", seed " << seed);
            const std::vector<float> x = kquant_test_rows(seed, static_cast<std::size_t>(width * rows));
            const std::size_t rb = row_size(t, width), bytes = rb * rows;
            std::vector<std::byte> want(bytes);
            for (std::int64_t r = 0; r < rows; ++r)
                from_float_row(t, x.data() + r * width, want.data() + static_cast<std::size_t>(r) * rb, width);

            context ctx(context_params{.no_alloc = true});
            tensor* xs = ctx.new_tensor_2d(elem_type::f32, width, rows);
            tensor* q = ctx.new_tensor_2d(t, width, rows);
            tensor* q_rows = ctx.new_tensor_2d(t, width, rows);
            tensor* idx = ctx.new_tensor_1d(elem_type::i32, rows);
            tensor* copied = cpy(ctx, xs, q);
            tensor* scattered = set_rows(ctx, q_rows, xs, idx);
            auto buf = alloc_tensors(ctx, dev->buffer_type());
            REQUIRE(buf);
            REQUIRE(tensor_set(*xs, x.data(), 0, x.size() * sizeof(float)));
            const std::int32_t order[rows] = {2, 0, 3, 1};
            REQUIRE(tensor_set(*idx, order, 0, sizeof order));

            std::vector<std::byte> got(bytes);
            run(copied);
            REQUIRE(tensor_get(*q, got.data(), 0, bytes));
            CHECK(std::memcmp(got.data(), want.data(), bytes) == 0);
            run(scattered);
            REQUIRE(tensor_get(*q_rows, got.data(), 0, bytes));
            for (std::int64_t r = 0; r < rows; ++r)
                CHECK(std::memcmp(got.data() + static_cast<std::size_t>(order[r]) * rb,
                                  want.data() + static_cast<std::size_t>(r) * rb, rb) == 0);
        }
    CHECK(vulkan::validation_message_count() == 0);
}
