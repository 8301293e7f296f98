// Buffers through their runtime handle: the CPU buffer type, host buffers wrapping user
// memory, and the range checks the handle does for every backend.

#include <backplane/core.hpp>
#include <backplane/memory/buffer.hpp>
#include <backplane/memory/host_buffer.hpp>
#include <backplane/memory/tensor_alloc.hpp>

#include "../support/alloc_failing_buffer_type.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <vector>

using namespace backplane;

namespace {

buffer_ptr cpu_buffer(std::size_t size) {
    auto r = buffer_type_ref(cpu_buffer_type::instance()).allocate(size);
    REQUIRE(r.ok());
    return std::move(*r);
}

/// Places t in buf with a fresh tensor_allocator (first tensor of the buffer).
void place(buffer_handle& buf, tensor& t) {
    tensor_allocator ta(buf);
    REQUIRE(ta.allocate(t).ok());
}

std::vector<float> iota_floats(std::size_t n, float start) {
    std::vector<float> v(n);
    std::iota(v.begin(), v.end(), start);
    return v;
}

} // namespace

TEST_CASE("cpu buffer type allocates aligned host buffers through its reference", "[alloc][buffer]") {
    const buffer_type_ref bt(cpu_buffer_type::instance());
    CHECK(bt.name() == "CPU");
    CHECK(bt.is_host());
    CHECK(bt.alignment() == host_alignment);
    CHECK(bt.get_if<cpu_buffer_type>() == &cpu_buffer_type::instance());
    CHECK(bt.get_if<test::failing_buffer_type>() == nullptr);
    CHECK(bt == buffer_type_ref(cpu_buffer_type::instance()));

    for (std::size_t size :
         {std::size_t{0}, std::size_t{1}, std::size_t{63}, std::size_t{1000}, std::size_t{1} << 20}) {
        buffer_ptr buf = cpu_buffer(size);
        CHECK(buf->size() == size);
        REQUIRE(buf->base() != nullptr);
        CHECK(reinterpret_cast<std::uintptr_t>(buf->base()) % host_alignment == 0);
        CHECK(buf->type() == bt);
        CHECK(buf->is_host());
        CHECK(buf->usage() == buffer_usage::any);
    }
    // two zero-size buffers still have distinct addresses
    buffer_ptr a = cpu_buffer(0), b = cpu_buffer(0);
    CHECK(a->base() != b->base());
}

TEST_CASE("cpu buffer type reports an impossible size as alloc_failed", "[alloc][buffer]") {
    const buffer_type_ref bt(cpu_buffer_type::instance());
    auto r = bt.allocate(std::numeric_limits<std::size_t>::max() - 8);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code() == errc::alloc_failed);
}

TEST_CASE("set, get and memset of tensor ranges through the handle", "[alloc][buffer]") {
    context ctx({.no_alloc = true});
    tensor* t = ctx.new_tensor_2d(elem_type::f32, 8, 4);
    t->name = "t";
    buffer_ptr buf = cpu_buffer(t->nbytes());
    place(*buf, *t);
    REQUIRE(t->buffer == buf.get());
    REQUIRE(t->data == buf->base());

    const auto src = iota_floats(32, 1.0f);
    REQUIRE(buf->set_tensor(*t, src.data(), 0, t->nbytes()).ok());
    std::vector<float> back(32, -1.0f);
    REQUIRE(buf->get_tensor(*t, back.data(), 0, t->nbytes()).ok());
    CHECK(back == src);
    // the bytes really are at t->data
    CHECK(std::memcmp(t->data, src.data(), t->nbytes()) == 0);

    // a partial write at an offset touches only its range
    const std::array<float, 3> three{-7.0f, -8.0f, -9.0f};
    REQUIRE(buf->set_tensor(*t, three.data(), 5 * sizeof(float), sizeof(three)).ok());
    REQUIRE(buf->get_tensor(*t, back.data(), 0, t->nbytes()).ok());
    for (std::size_t i = 0; i < 32; ++i) {
        const float want = (i >= 5 && i < 8) ? three[i - 5] : src[i];
        CHECK(back[i] == want);
    }

    // partial read
    std::array<float, 2> two{};
    REQUIRE(buf->get_tensor(*t, two.data(), 30 * sizeof(float), sizeof(two)).ok());
    CHECK(two[0] == src[30]);
    CHECK(two[1] == src[31]);

    // memset of one row
    REQUIRE(buf->memset_tensor(*t, 0, 8 * sizeof(float), 8 * sizeof(float)).ok());
    REQUIRE(buf->get_tensor(*t, back.data(), 0, t->nbytes()).ok());
    for (std::size_t i = 8; i < 16; ++i) CHECK(back[i] == 0.0f);
    CHECK(back[7] == -9.0f);
    CHECK(back[16] == src[16]);

    // zero-size accesses at the end are fine and do nothing
    CHECK(buf->set_tensor(*t, src.data(), t->nbytes(), 0).ok());
    CHECK(buf->get_tensor(*t, back.data(), t->nbytes(), 0).ok());
}

TEST_CASE("clear sets every byte of the buffer", "[alloc][buffer]") {
    buffer_ptr buf = cpu_buffer(300);
    REQUIRE(buf->clear(0xAB).ok());
    const auto* p = static_cast<const std::uint8_t*>(buf->base());
    CHECK(std::all_of(p, p + 300, [](std::uint8_t b) { return b == 0xAB; }));
    REQUIRE(buf->clear(0).ok());
    CHECK(std::all_of(p, p + 300, [](std::uint8_t b) { return b == 0; }));
}

TEST_CASE("out-of-range and foreign accesses are statuses and change nothing", "[alloc][buffer]") {
    context ctx({.no_alloc = true});
    tensor* t = ctx.new_tensor_1d(elem_type::f32, 16);
    t->name = "victim";
    tensor* other = ctx.new_tensor_1d(elem_type::f32, 16);
    other->name = "other";
    buffer_ptr buf = cpu_buffer(t->nbytes());
    buffer_ptr buf2 = cpu_buffer(other->nbytes());
    place(*buf, *t);
    place(*buf2, *other);
    REQUIRE(buf->memset_tensor(*t, 0x11, 0, t->nbytes()).ok());

    std::vector<std::uint8_t> junk(256, 0xEE);
    const std::size_t n = t->nbytes();
    constexpr std::size_t huge = std::numeric_limits<std::size_t>::max();

    SECTION("offset past the end") {
        const status s = buf->set_tensor(*t, junk.data(), n + 1, 0);
        CHECK(s.code() == errc::out_of_range);
        CHECK(s.message().find("victim") != std::string::npos);
        CHECK(buf->get_tensor(*t, junk.data(), n + 4, 4).code() == errc::out_of_range);
        CHECK(buf->memset_tensor(*t, 0, n, 1).code() == errc::out_of_range);
    }
    SECTION("size past the end") {
        CHECK(buf->set_tensor(*t, junk.data(), 4, n).code() == errc::out_of_range);
        CHECK(buf->get_tensor(*t, junk.data(), 0, n + 1).code() == errc::out_of_range);
        CHECK(buf->memset_tensor(*t, 0, 8, n - 4).code() == errc::out_of_range);
    }
    SECTION("offset + size overflowing size_t") {
        CHECK(buf->set_tensor(*t, junk.data(), 8, huge - 4).code() == errc::out_of_range);
        CHECK(buf->memset_tensor(*t, 0, huge, 2).code() == errc::out_of_range);
    }
    SECTION("a tensor of another buffer") {
        const status s = buf->set_tensor(*other, junk.data(), 0, 4);
        CHECK(s.code() == errc::invalid_argument);
        CHECK(s.message().find("other") != std::string::npos);
        CHECK(buf->get_tensor(*other, junk.data(), 0, 4).code() == errc::invalid_argument);
        CHECK(buf->memset_tensor(*other, 0, 0, 4).code() == errc::invalid_argument);
    }
    SECTION("a tensor with no data") {
        tensor* loose = ctx.new_tensor_1d(elem_type::f32, 4);
        place_tensor(*loose, *buf, nullptr); // claims the buffer but has no address
        CHECK(buf->set_tensor(*loose, junk.data(), 0, 4).code() == errc::invalid_argument);
    }
    SECTION("a tensor whose data lies outside its buffer") {
        tensor* liar = ctx.new_tensor_1d(elem_type::f32, 16);
        place_tensor(*liar, *buf, static_cast<std::byte*>(buf->base()) + 4); // 64 bytes from base+4 > 64
        CHECK(buf->set_tensor(*liar, junk.data(), 0, liar->nbytes()).code() == errc::out_of_range);
    }

    // whatever failed wrote nothing
    std::vector<std::uint8_t> now(n);
    REQUIRE(buf->get_tensor(*t, now.data(), 0, n).ok());
    CHECK(std::all_of(now.begin(), now.end(), [](std::uint8_t b) { return b == 0x11; }));
}

TEST_CASE("get_if recovers the concrete buffer", "[alloc][buffer]") {
    buffer_ptr buf = cpu_buffer(128);
    host_buffer* hb = buf->get_if<host_buffer>();
    REQUIRE(hb != nullptr);
    CHECK(hb->base() == buf->base());
    CHECK(hb->size() == 128);
    CHECK(hb->owned());
    CHECK(buf->get_if<test::failing_buffer_type::buffer_t>() == nullptr);

    test::failing_buffer_type fbt;
    auto r = buffer_type_ref(fbt).allocate(64);
    REQUIRE(r.ok());
    CHECK((*r)->get_if<host_buffer>() == nullptr);
    CHECK((*r)->get_if<test::failing_buffer_type::buffer_t>() != nullptr);
    CHECK((*r)->type().get_if<test::failing_buffer_type>() == &fbt);
}

TEST_CASE("a host buffer can wrap user memory", "[alloc][buffer]") {
    alignas(64) std::array<float, 64> storage{};
    {
        auto r = make_buffer(host_buffer::from_ptr(storage.data(), sizeof(storage)), cpu_buffer_type::instance());
        REQUIRE(r.ok());
        buffer_ptr buf = std::move(*r);
        CHECK(buf->base() == storage.data());
        CHECK(buf->size() == sizeof(storage));
        CHECK(buf->type() == buffer_type_ref(cpu_buffer_type::instance()));
        REQUIRE(buf->get_if<host_buffer>() != nullptr);
        CHECK_FALSE(buf->get_if<host_buffer>()->owned());

        context ctx({.no_alloc = true});
        tensor* a = ctx.new_tensor_1d(elem_type::f32, 16);
        tensor* b = ctx.new_tensor_1d(elem_type::f32, 16);
        tensor_allocator ta(*buf);
        REQUIRE(ta.allocate(*a).ok());
        REQUIRE(ta.allocate(*b).ok());
        CHECK(a->data == storage.data());
        CHECK(b->data == storage.data() + 16); // 64 bytes on: already aligned

        const auto src = iota_floats(16, 100.0f);
        REQUIRE(buf->set_tensor(*b, src.data(), 0, b->nbytes()).ok());
        CHECK(storage[16] == 100.0f);
        CHECK(storage[31] == 115.0f);
        CHECK(storage[15] == 0.0f);
        storage[0] = 42.0f; // and the user's writes are visible through the handle
        float first = 0;
        REQUIRE(buf->get_tensor(*a, &first, 0, sizeof(float)).ok());
        CHECK(first == 42.0f);
    }
    // the handle is gone; the user's memory is untouched and still usable
    storage[1] = 1.0f;
    CHECK(storage[16] == 100.0f);
}

TEST_CASE("buffer usage flag", "[alloc][buffer]") {
    buffer_ptr buf = cpu_buffer(16);
    CHECK(buf->usage() == buffer_usage::any);
    buf->set_usage(buffer_usage::weights);
    CHECK(buf->usage() == buffer_usage::weights);
    buf->set_usage(buffer_usage::compute);
    CHECK(buf->usage() == buffer_usage::compute);
    CHECK(to_string(buffer_usage::weights) == "weights");
}

TEST_CASE("host buffers copy between tensors device-side", "[alloc][buffer]") {
    context ctx({.no_alloc = true});
    tensor* a = ctx.new_tensor_1d(elem_type::f32, 8);
    tensor* b = ctx.new_tensor_1d(elem_type::f32, 8);
    tensor* c = ctx.new_tensor_1d(elem_type::f32, 4);
    buffer_ptr buf = cpu_buffer(256);
    tensor_allocator ta(*buf);
    REQUIRE(ta.allocate(*a).ok());
    REQUIRE(ta.allocate(*b).ok());
    REQUIRE(ta.allocate(*c).ok());
    const auto src = iota_floats(8, 3.0f);
    REQUIRE(buf->set_tensor(*a, src.data(), 0, a->nbytes()).ok());
    CHECK(buf->copy_tensor(*a, *b));
    std::vector<float> back(8);
    REQUIRE(buf->get_tensor(*b, back.data(), 0, b->nbytes()).ok());
    CHECK(back == src);
    CHECK_FALSE(buf->copy_tensor(*a, *c)); // sizes differ: the caller must stage it
}
