// tensor_allocator (bump placement in one buffer), init_view, and alloc_tensors (every
// tensor of a context in buffers of one buffer type).

#include <backplane/core.hpp>
#include <backplane/memory/alloc_tensors.hpp>
#include <backplane/memory/host_buffer.hpp>
#include <backplane/memory/tensor_alloc.hpp>

#include "../support/alloc_failing_buffer_type.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using namespace backplane;
using test::failing_buffer_type;

namespace {

std::size_t round_up(std::size_t n, std::size_t a) {
    return (n + a - 1) / a * a;
}

std::uintptr_t addr(const void* p) {
    return reinterpret_cast<std::uintptr_t>(p);
}

bool contains_message(const status& s, const std::string& what) {
    return s.message().find(what) != std::string::npos;
}

/// True when the byte ranges [a, a + na) and [b, b + nb) intersect.
bool overlaps(const void* a, std::size_t na, const void* b, std::size_t nb) {
    return na != 0 && nb != 0 && addr(a) < addr(b) + nb && addr(b) < addr(a) + na;
}

buffer_ptr allocate(buffer_type_ref bt, std::size_t size) {
    auto r = bt.allocate(size);
    REQUIRE(r.ok());
    return std::move(*r);
}

} // namespace

TEST_CASE("tensor_allocator packs tensors at aligned addresses", "[alloc][tensor_alloc]") {
    const std::size_t alignment = GENERATE(32, 64, 256);
    failing_buffer_type bt({.alignment = alignment});
    context ctx({.no_alloc = true});
    std::vector<tensor*> ts;
    for (std::int64_t n : {3, 100, 64, 1, 17, 256}) ts.push_back(ctx.new_tensor_1d(elem_type::f32, n));
    ts.push_back(ctx.new_tensor_2d(elem_type::q8_0, 64, 3)); // 2 blocks of 34 bytes per row

    std::size_t expect_total = 0;
    for (tensor* t : ts) expect_total += round_up(t->nbytes(), alignment);
    buffer_ptr buf = allocate(bt, expect_total);
    tensor_allocator ta(*buf);
    CHECK(ta.used() == 0); // the buffer type returns aligned bases
    CHECK(ta.available() == expect_total);

    std::byte* expect = static_cast<std::byte*>(buf->base());
    for (tensor* t : ts) {
        REQUIRE(ta.allocate(*t).ok());
        CHECK(t->buffer == buf.get());
        CHECK(t->data == expect);
        CHECK(addr(t->data) % alignment == 0);
        CHECK(buf->contains(t->data, t->nbytes()));
        expect += round_up(t->nbytes(), alignment);
    }
    CHECK(ta.used() == expect_total);
    CHECK(ta.available() == 0);
    CHECK(bt.init_calls() == ts.size()); // the buffer saw every tensor
}

TEST_CASE("tensor_allocator takes the buffer type's alloc_size", "[alloc][tensor_alloc]") {
    failing_buffer_type bt({.alignment = 16, .extra_bytes = 40});
    context ctx({.no_alloc = true});
    tensor* a = ctx.new_tensor_1d(elem_type::f32, 4); // 16 bytes + 40 padding -> 64
    tensor* b = ctx.new_tensor_1d(elem_type::f32, 4);
    buffer_ptr buf = allocate(bt, 128);
    tensor_allocator ta(*buf);
    REQUIRE(ta.allocate(*a).ok());
    REQUIRE(ta.allocate(*b).ok());
    CHECK(addr(b->data) - addr(a->data) == 64);
    CHECK(ta.used() == 128);
}

TEST_CASE("tensor_allocator aligns the first tensor of a misaligned buffer", "[alloc][tensor_alloc]") {
    alignas(64) static std::byte storage[512];
    auto r = make_buffer(host_buffer::from_ptr(storage + 4, 500), cpu_buffer_type::instance());
    REQUIRE(r.ok());
    buffer_handle& buf = **r;
    tensor_allocator ta(buf);
    CHECK(ta.used() == 60); // storage + 64 is the first aligned address
    context ctx({.no_alloc = true});
    tensor* t = ctx.new_tensor_1d(elem_type::f32, 8);
    REQUIRE(ta.allocate(*t).ok());
    CHECK(t->data == storage + 64);
    CHECK(ta.used() == 60 + 64);
}

TEST_CASE("tensor_allocator reports running out of space", "[alloc][tensor_alloc]") {
    context ctx({.no_alloc = true});
    tensor* small = ctx.new_tensor_1d(elem_type::f32, 16); // 64 bytes
    tensor* big = ctx.new_tensor_1d(elem_type::f32, 32);   // 128 bytes
    big->name = "too_big";
    tensor* tiny = ctx.new_tensor_1d(elem_type::f32, 8); // 32 bytes
    buffer_ptr buf = allocate(cpu_buffer_type::instance(), 160);
    tensor_allocator ta(*buf);
    REQUIRE(ta.allocate(*small).ok());
    const std::size_t used = ta.used();

    const status s = ta.allocate(*big);
    CHECK(s.code() == errc::alloc_failed);
    CHECK(contains_message(s, "too_big"));
    CHECK(contains_message(s, "128")); // what it needs
    CHECK(contains_message(s, "96"));  // what was left
    CHECK(contains_message(s, "160")); // the buffer
    CHECK(big->data == nullptr);
    CHECK(big->buffer == nullptr);
    CHECK(ta.used() == used);

    REQUIRE(ta.allocate(*tiny).ok()); // what fits still fits
    CHECK(ta.used() == 128);
}

TEST_CASE("tensor_allocator refuses a tensor that already has data", "[alloc][tensor_alloc]") {
    context host;
    tensor* t = host.new_tensor_1d(elem_type::f32, 4);
    void* before = t->data;
    buffer_ptr buf = allocate(cpu_buffer_type::instance(), 64);
    tensor_allocator ta(*buf);
    CHECK(ta.allocate(*t).code() == errc::invalid_argument);
    CHECK(t->data == before);
    CHECK(ta.used() == 0);
}

TEST_CASE("views are placed inside their source", "[alloc][tensor_alloc]") {
    failing_buffer_type bt;
    context ctx({.no_alloc = true});
    tensor* a = ctx.new_tensor_2d(elem_type::f32, 8, 4);
    tensor* row2 = view_1d(ctx, a, 8, 2 * a->nb[1]);
    tensor* tr = transpose(ctx, a);
    tensor* rs = reshape(ctx, a, {32});
    REQUIRE(row2->data == nullptr); // a had no data when the views were made

    SECTION("init_view before the source has data fails and changes nothing") {
        const status s = init_view(*row2);
        CHECK(s.code() == errc::invalid_argument);
        CHECK(row2->data == nullptr);
    }
    SECTION("a tensor that is no view") {
        CHECK(init_view(*a).code() == errc::invalid_argument);
    }
    SECTION("through tensor_allocator, without taking space") {
        buffer_ptr buf = allocate(bt, a->nbytes());
        tensor_allocator ta(*buf);
        REQUIRE(ta.allocate(*a).ok());
        const std::size_t used = ta.used();
        for (tensor* v : {row2, tr, rs}) {
            REQUIRE(ta.allocate(*v).ok());
            CHECK(v->buffer == buf.get());
        }
        CHECK(ta.used() == used);
        CHECK(row2->data == static_cast<std::byte*>(a->data) + 2 * a->nb[1]);
        CHECK(tr->data == a->data);
        CHECK(rs->data == a->data);
        CHECK(bt.init_calls() == 4);

        // the view reads what was written to its source
        std::vector<float> v(32);
        for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
        REQUIRE(buf->set_tensor(*a, v.data(), 0, a->nbytes()).ok());
        std::vector<float> row(8);
        REQUIRE(buf->get_tensor(*row2, row.data(), 0, row2->nbytes()).ok());
        CHECK(row.front() == 16.0f);
        CHECK(row.back() == 23.0f);
    }
    SECTION("a view reaching past its source is out of range") {
        buffer_ptr buf = allocate(bt, a->nbytes());
        tensor_allocator ta(*buf);
        REQUIRE(ta.allocate(*a).ok());
        row2->view_offs = a->nbytes() - 16; // corrupt: 32 bytes from 16 before the end
        CHECK(init_view(*row2).code() == errc::out_of_range);
        CHECK(row2->data == nullptr);
    }
}

TEST_CASE("alloc_tensors places every tensor of a context in one buffer", "[alloc][alloc_tensors]") {
    const buffer_type_ref bt(cpu_buffer_type::instance());
    context ctx({.no_alloc = true});
    std::vector<tensor*> roots;
    std::mt19937 rng(1234);
    for (int i = 0; i < 20; ++i) {
        const std::int64_t ne0 = 1 + static_cast<std::int64_t>(rng() % 50);
        const std::int64_t ne1 = 1 + static_cast<std::int64_t>(rng() % 5);
        tensor* t = ctx.new_tensor_2d(i % 3 == 0 ? elem_type::i32 : elem_type::f32, ne0, ne1);
        t->name = "w" + std::to_string(i);
        roots.push_back(t);
    }
    tensor* v = view_1d(ctx, roots[4], roots[4]->ne[0], roots[4]->nb[1]);
    tensor* p = transpose(ctx, roots[5]);

    auto r = alloc_tensors(ctx, bt, buffer_usage::weights);
    REQUIRE(r.ok());
    buffer_list& list = *r;
    REQUIRE(list.size() == 1);
    buffer_handle& buf = list[0];
    CHECK(buf.usage() == buffer_usage::weights);
    std::size_t expect_total = 0;
    for (tensor* t : roots) expect_total += round_up(t->nbytes(), host_alignment);
    CHECK(list.total_bytes() == expect_total);

    for (tensor* t : roots) {
        REQUIRE(t->data != nullptr);
        CHECK(t->buffer == &buf);
        CHECK(list.contains(t->buffer));
        CHECK(addr(t->data) % host_alignment == 0);
        CHECK(buf.contains(t->data, t->nbytes()));
    }
    for (std::size_t i = 0; i < roots.size(); ++i)
        for (std::size_t j = i + 1; j < roots.size(); ++j)
            CHECK_FALSE(overlaps(roots[i]->data, roots[i]->nbytes(), roots[j]->data, roots[j]->nbytes()));
    CHECK(v->data == static_cast<std::byte*>(roots[4]->data) + roots[4]->nb[1]);
    CHECK(v->buffer == &buf);
    CHECK(p->data == roots[5]->data);

    // every tensor keeps its own bytes: write a distinct pattern to each, read all back
    for (std::size_t i = 0; i < roots.size(); ++i)
        REQUIRE(buf.memset_tensor(*roots[i], static_cast<std::uint8_t>(i + 1), 0, roots[i]->nbytes()).ok());
    for (std::size_t i = 0; i < roots.size(); ++i) {
        std::vector<std::uint8_t> back(roots[i]->nbytes());
        REQUIRE(buf.get_tensor(*roots[i], back.data(), 0, back.size()).ok());
        CHECK(std::all_of(back.begin(), back.end(), [&](std::uint8_t b) { return b == i + 1; }));
    }
    // and the view reads its source's bytes
    std::vector<std::uint8_t> vb(v->nbytes());
    REQUIRE(buf.get_tensor(*v, vb.data(), 0, vb.size()).ok());
    CHECK(std::all_of(vb.begin(), vb.end(), [](std::uint8_t b) { return b == 5; }));

    list.set_usage(buffer_usage::compute);
    CHECK(buf.usage() == buffer_usage::compute);
    REQUIRE(list.clear(0x5A).ok());
    std::vector<std::uint8_t> back(roots[0]->nbytes());
    REQUIRE(buf.get_tensor(*roots[0], back.data(), 0, back.size()).ok());
    CHECK(std::all_of(back.begin(), back.end(), [](std::uint8_t b) { return b == 0x5A; }));

    std::size_t iterated = 0;
    for (const auto& b : list) iterated += b->size();
    CHECK(iterated == list.total_bytes());
}

TEST_CASE("alloc_tensors leaves tensors that have data alone", "[alloc][alloc_tensors]") {
    context ctx({.no_alloc = true});
    tensor* a = ctx.new_tensor_1d(elem_type::f32, 16);
    tensor* b = ctx.new_tensor_1d(elem_type::f32, 16);
    float outside[16] = {};
    a->data = outside; // placed by someone else (no buffer: plain host memory)
    auto r = alloc_tensors(ctx, cpu_buffer_type::instance());
    REQUIRE(r.ok());
    CHECK(a->data == outside);
    CHECK(a->buffer == nullptr);
    CHECK(b->buffer == &(*r)[0]);
    CHECK(r->total_bytes() == 64);

    // nothing left to allocate: an empty list, not an error
    auto again = alloc_tensors(ctx, cpu_buffer_type::instance());
    REQUIRE(again.ok());
    CHECK(again->empty());
    CHECK(again->total_bytes() == 0);
}

TEST_CASE("alloc_tensors splits at max_size", "[alloc][alloc_tensors]") {
    failing_buffer_type bt({.alignment = 64, .max_size = 1000});
    context ctx({.no_alloc = true});
    std::vector<tensor*> ts;
    for (int i = 0; i < 7; ++i) ts.push_back(ctx.new_tensor_1d(elem_type::f32, 100)); // 400 -> 448 bytes
    tensor* v = view_1d(ctx, ts[6], 10, 40);
    {
        auto r = alloc_tensors(ctx, bt);
        REQUIRE(r.ok());
        const buffer_list& list = *r;
        CHECK(list.size() == 4); // 2 + 2 + 2 + 1 tensors of 448 bytes under 1000
        for (const auto& b : list) CHECK(b->size() <= 1000);
        CHECK(list.total_bytes() == 7 * 448);
        for (tensor* t : ts) {
            REQUIRE(list.contains(t->buffer));
            CHECK(t->buffer->contains(t->data, bt.alloc_size(*t)));
        }
        CHECK(ts[0]->buffer == ts[1]->buffer);
        CHECK(ts[1]->buffer != ts[2]->buffer);
        CHECK(ts[6]->buffer == &list[3]);
        CHECK(v->buffer == ts[6]->buffer);
        CHECK(bt.live_buffers() == 4);
    }
    CHECK(bt.live_buffers() == 0);
}

TEST_CASE("alloc_tensors refuses a tensor larger than max_size", "[alloc][alloc_tensors]") {
    failing_buffer_type bt({.alignment = 64, .max_size = 1000});
    context ctx({.no_alloc = true});
    tensor* ok1 = ctx.new_tensor_1d(elem_type::f32, 10);
    tensor* huge = ctx.new_tensor_1d(elem_type::f32, 300); // 1200 bytes
    huge->name = "huge";
    auto r = alloc_tensors(ctx, bt);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code() == errc::alloc_failed);
    CHECK(contains_message(r.error(), "huge"));
    CHECK(contains_message(r.error(), "1000"));
    CHECK(bt.attempts() == 0); // found before allocating anything
    CHECK(ok1->data == nullptr);
}

TEST_CASE("alloc_tensors releases everything when an allocation fails", "[alloc][alloc_tensors]") {
    failing_buffer_type bt({.alignment = 64, .max_size = 1000});
    context ctx({.no_alloc = true});
    std::vector<tensor*> ts;
    for (int i = 0; i < 5; ++i) ts.push_back(ctx.new_tensor_1d(elem_type::f32, 100)); // 3 buffers
    tensor* v = reshape(ctx, ts[0], {10, 10});
    constexpr std::size_t needed = 3;

    for (std::size_t n = 1; n <= needed + 1; ++n) {
        CAPTURE(n);
        bt.fail_at(n);
        {
            auto r = alloc_tensors(ctx, bt);
            if (n <= needed) {
                REQUIRE_FALSE(r.ok());
                CHECK(r.error().code() == errc::alloc_failed);
                CHECK(r.error().native() == 7); // the buffer type's own code travels along
                CHECK(bt.live_buffers() == 0);
                for (tensor* t : ts) {
                    CHECK(t->data == nullptr);
                    CHECK(t->buffer == nullptr);
                }
                CHECK(v->data == nullptr);
            } else {
                REQUIRE(r.ok()); // armed past the last allocation: no failure
                CHECK(r->size() == needed);
                for (auto* t : ts) unplace_tensor(*t);
                unplace_tensor(*v);
            }
        }
        CHECK(bt.live_buffers() == 0);
        // and with the failure disarmed, the same context allocates
        bt.fail_at(0);
        auto ok = alloc_tensors(ctx, bt);
        REQUIRE(ok.ok());
        CHECK(ok->size() == needed);
        CHECK(v->data == ts[0]->data);
        for (auto* t : ts) unplace_tensor(*t); // reset for the next round
        unplace_tensor(*v);
    }
    CHECK(bt.live_buffers() == 0);
}

TEST_CASE("alloc_tensors fails cleanly on a view of a tensor that has no data", "[alloc][alloc_tensors]") {
    failing_buffer_type bt;
    context other({.no_alloc = true});
    tensor* src = other.new_tensor_1d(elem_type::f32, 16);
    context ctx({.no_alloc = true});
    tensor* a = ctx.new_tensor_1d(elem_type::f32, 16);
    tensor* v = ctx.new_view(src, elem_type::f32, {4, 1, 1, 1}, contiguous_strides(elem_type::f32, {4, 1, 1, 1}), 0);
    v->op = op_kind::view;
    auto r = alloc_tensors(ctx, bt);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code() == errc::invalid_argument);
    CHECK(a->data == nullptr);
    CHECK(a->buffer == nullptr);
    CHECK(bt.live_buffers() == 0);
}
