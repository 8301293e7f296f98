// tensor_set_2d / tensor_get_2d and their async forms: strided row copies between host
// memory and a tensor, on context data, a CPU buffer and the test device's private
// memory (whose bytes fault on host access), with the range checks.

#include <backplane/backends/cpu.hpp>
#include <backplane/core.hpp>
#include <backplane/memory/alloc_tensors.hpp>
#include <backplane/memory/tensor_io.hpp>

#include "../support/test_backend.hpp"

#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <numeric>
#include <vector>

using namespace backplane;
using backplane::test::test_device;

namespace {

constexpr std::int64_t ne0 = 8, ne1 = 6; // an [8, 6] f32 tensor: 6 rows of 32 bytes
constexpr std::size_t row_bytes = ne0 * sizeof(float);

/// Host rows of 10 floats (a stride of 40 bytes), row r holding 100 r + c.
std::vector<float> host_rows(std::size_t n) {
    std::vector<float> h(n * 10, -1.0f);
    for (std::size_t r = 0; r < n; ++r)
        for (std::size_t c = 0; c < 10; ++c) h[r * 10 + c] = static_cast<float>(100 * r + c);
    return h;
}

/// Writes rows 1, 3, 5 of t (tensor stride two rows) from host rows 0, 1, 2 (stride 10
/// floats), then reads them back into a host array of stride 12 floats; the other rows of
/// t keep 0 and the host gaps keep -2.
template <class Set, class Get>
void check_every_other_row(tensor& t, Set set, Get get) {
    REQUIRE(tensor_set(t, std::vector<float>(ne0 * ne1, 0.0f)));
    const std::vector<float> h = host_rows(3);
    REQUIRE(set(t, h.data(), row_bytes, row_bytes, 3, 2 * t.nb[1], 10 * sizeof(float)));

    auto all = tensor_get_all<float>(t);
    REQUIRE(all);
    for (std::int64_t r = 0; r < ne1; ++r)
        for (std::int64_t c = 0; c < ne0; ++c) {
            const float want = r % 2 == 1 ? static_cast<float>(100 * (r / 2) + c) : 0.0f;
            INFO("row " << r << " column " << c);
            CHECK((*all)[static_cast<std::size_t>(r * ne0 + c)] == want);
        }

    std::vector<float> back(3 * 12, -2.0f);
    REQUIRE(get(t, back.data(), row_bytes, row_bytes, 3, 2 * t.nb[1], 12 * sizeof(float)));
    for (std::size_t r = 0; r < 3; ++r)
        for (std::size_t c = 0; c < 12; ++c) {
            INFO("host row " << r << " column " << c);
            CHECK(back[r * 12 + c] == (c < ne0 ? static_cast<float>(100 * r + c) : -2.0f));
        }
}

status set_2d(tensor& t, const void* p, std::size_t o, std::size_t s, std::size_t n, std::size_t ts, std::size_t hs) {
    return tensor_set_2d(t, p, o, s, n, ts, hs);
}
status get_2d(const tensor& t, void* p, std::size_t o, std::size_t s, std::size_t n, std::size_t ts,
              std::size_t hs) {
    return tensor_get_2d(t, p, o, s, n, ts, hs);
}

} // namespace

TEST_CASE("tensor_set_2d and tensor_get_2d copy strided rows of context data and CPU buffers", "[alloc][io2d]") {
    SECTION("context data") {
        context ctx;
        tensor* t = ctx.new_tensor(elem_type::f32, {ne0, ne1});
        check_every_other_row(*t, set_2d, get_2d);
    }
    SECTION("a CPU buffer") {
        context ctx({.no_alloc = true});
        tensor* t = ctx.new_tensor(elem_type::f32, {ne0, ne1});
        auto bufs = alloc_tensors(ctx, cpu_buffer_type::instance());
        REQUIRE(bufs);
        check_every_other_row(*t, set_2d, get_2d);
    }
}

TEST_CASE("tensor_set_2d and tensor_get_2d work on private device memory, one transfer per row", "[alloc][io2d]") {
    test_device dev({.name = "TEST2D"});
    context ctx({.no_alloc = true});
    tensor* t = ctx.new_tensor(elem_type::f32, {ne0, ne1});
    auto bufs = alloc_tensors(ctx, dev.buffer_type());
    REQUIRE(bufs);
    REQUIRE_FALSE(t->buffer->is_host());
    check_every_other_row(*t, set_2d, get_2d);
    // the whole-tensor write and read of the check, then three rows each way
    CHECK(dev.counters().n_sets() == 1 + 3);
    CHECK(dev.counters().n_gets() == 1 + 3);
}

TEST_CASE("the async 2-D copies queue one transfer per row on an async stream", "[alloc][io2d]") {
    test_device dev({.name = "TEST2D"});
    auto b = dev.make_backend();
    context ctx({.no_alloc = true});
    tensor* t = ctx.new_tensor(elem_type::f32, {ne0, ne1});
    auto bufs = alloc_tensors(ctx, dev.buffer_type());
    REQUIRE(bufs);
    auto set = [&](tensor& x, const void* p, std::size_t o, std::size_t s, std::size_t n, std::size_t ts,
                   std::size_t hs) {
        b.pause(); // queued, not run: the rows land only when the stream runs
        status st = tensor_set_2d_async(b, x, p, o, s, n, ts, hs);
        CHECK(b.counters().n_sets() == 0);
        if (st) st = b.synchronize();
        return st;
    };
    auto get = [&](const tensor& x, void* p, std::size_t o, std::size_t s, std::size_t n, std::size_t ts,
                   std::size_t hs) {
        status st = tensor_get_2d_async(b, x, p, o, s, n, ts, hs);
        return st ? b.synchronize() : st;
    };
    check_every_other_row(*t, set, get);
    CHECK(b.counters().n_sets() == 3);
    CHECK(b.counters().n_gets() == 3);
    CHECK(dev.counters().n_sets() == 1); // only check_every_other_row's own tensor_set
}

TEST_CASE("the async 2-D copies fall back to synchronous copies on the CPU backend", "[alloc][io2d]") {
    cpu_backend cpu;
    context ctx({.no_alloc = true});
    tensor* t = ctx.new_tensor(elem_type::f32, {ne0, ne1});
    auto bufs = alloc_tensors(ctx, cpu.buffer_type());
    REQUIRE(bufs);
    auto set = [&](tensor& x, const void* p, std::size_t o, std::size_t s, std::size_t n, std::size_t ts,
                   std::size_t hs) { return tensor_set_2d_async(cpu, x, p, o, s, n, ts, hs); };
    auto get = [&](const tensor& x, void* p, std::size_t o, std::size_t s, std::size_t n, std::size_t ts,
                   std::size_t hs) { return tensor_get_2d_async(cpu, x, p, o, s, n, ts, hs); };
    check_every_other_row(*t, set, get);
}

TEST_CASE("2-D copies outside the tensor are statuses that change nothing", "[alloc][io2d]") {
    test_device dev({.name = "TEST2D"});
    context ctx({.no_alloc = true});
    tensor* t = ctx.new_tensor(elem_type::f32, {ne0, ne1});
    t->name = "t";
    auto bufs = alloc_tensors(ctx, dev.buffer_type());
    REQUIRE(bufs);
    REQUIRE(tensor_set(*t, std::vector<float>(ne0 * ne1, 7.0f)));
    dev.reset_counters();
    std::vector<float> h(ne0 * ne1 * 2, 1.0f);
    constexpr std::size_t max = std::numeric_limits<std::size_t>::max();
    const std::size_t n = t->nbytes();

    // 6 rows of 32 bytes with a stride of 64 need 5 * 64 + 32 = 352 > 192 bytes: the last
    // row does not fit, and not even the rows that would fit are written
    status s = tensor_set_2d(*t, h.data(), 0, row_bytes, 6, 2 * row_bytes, row_bytes);
    CHECK(s.code() == errc::out_of_range);
    CHECK_THAT(s.message(), Catch::Contains("6 rows of 32 bytes") && Catch::Contains("tensor stride of 64") &&
                                Catch::Contains("tensor 't' of 192 bytes"));
    // strides and offsets whose products or sums would wrap around
    CHECK(tensor_set_2d(*t, h.data(), 0, row_bytes, 3, max / 2, row_bytes).code() == errc::out_of_range);
    CHECK(tensor_set_2d(*t, h.data(), 0, row_bytes, max, row_bytes, row_bytes).code() == errc::out_of_range);
    s = tensor_get_2d(*t, h.data(), max - 4, row_bytes, 1, 0, 0);
    CHECK(s.code() == errc::out_of_range);
    CHECK_THAT(s.message(), Catch::Contains("byte offset 18446744073709551611") &&
                                !Catch::Contains(std::to_string((max - 4) + row_bytes)));
    CHECK(tensor_get_2d(*t, h.data(), n, 1, 1, 0, 0).code() == errc::out_of_range);
    // a host stride that wraps the address space
    CHECK(tensor_get_2d(*t, h.data(), 0, 4, 2, 4, max - 8).code() == errc::out_of_range);
    // a null host pointer, an unallocated tensor
    CHECK(tensor_set_2d(*t, nullptr, 0, 4, 1, 0, 0).code() == errc::invalid_argument);
    context ctx2({.no_alloc = true});
    tensor* u = ctx2.new_tensor(elem_type::f32, {4});
    CHECK(tensor_set_2d(*u, h.data(), 0, 4, 1, 0, 0).code() == errc::invalid_argument);
    // nothing to copy is no error (ggml's n_copies = 0)
    CHECK(tensor_set_2d(*t, h.data(), 0, row_bytes, 0, row_bytes, row_bytes));
    CHECK(tensor_set_2d(*t, h.data(), 0, 0, 3, row_bytes, row_bytes));
    // the async form checks the same way before queueing anything
    auto b = dev.make_backend();
    CHECK(tensor_set_2d_async(b, *t, h.data(), 0, row_bytes, 6, 2 * row_bytes, row_bytes).code() ==
          errc::out_of_range);
    REQUIRE(b.synchronize());
    CHECK(b.counters().n_sets() == 0);
    CHECK(dev.counters().n_sets() == 0);
    // the exact fit passes: rows 0, 2, 4
    CHECK(tensor_set_2d(*t, h.data(), 0, row_bytes, 3, 2 * row_bytes, row_bytes));
    auto all = tensor_get_all<float>(*t);
    REQUIRE(all);
    CHECK((*all)[0] == 1.0f);
    CHECK((*all)[ne0] == 7.0f);
}
