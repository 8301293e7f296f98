// GGUF: a round trip of every tensor type and every metadata value type, loading over
// the memory mapping and into another buffer type, and malformed files (every truncation,
// bad magic and version, absurd counts, unknown types, misaligned, out-of-range and
// overlapping tensors, random corruption) rejected with a status.

#include "../support/ref_oracle.hpp"
#include "../support/test_backend.hpp"

#include <backplane/backplane.hpp>
#include <backplane/io/gguf.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <utility>
#include <vector>

using namespace backplane;
namespace gg = backplane::gguf;

namespace {

struct sample {
    context ctx;
    std::vector<tensor*> tensors;
    gg::writer w;
    sample() {
        std::mt19937 rng(3);
        int i = 0;
        for (elem_type t : all_elem_types) {
            tensor* x = ctx.new_tensor(t, {256, 3 + i, 2}); // whole blocks of every type
            x->name = "blk." + std::to_string(i) + "." + std::string(to_string(t));
            test::fill_random(*x, rng, -2, 2);
            tensors.push_back(x);
            ++i;
        }
        tensor* v = ctx.new_tensor(elem_type::f32, {5});
        v->name = "vector";
        test::fill_random(*v, rng);
        tensors.push_back(v);
        REQUIRE(w.set("general.architecture", "llama").ok());
        REQUIRE(w.set("u8", std::uint8_t{200}).ok());
        REQUIRE(w.set("i8", std::int8_t{-100}).ok());
        REQUIRE(w.set("u16", std::uint16_t{60000}).ok());
        REQUIRE(w.set("i16", std::int16_t{-30000}).ok());
        REQUIRE(w.set("u32", std::uint32_t{4000000000u}).ok());
        REQUIRE(w.set("i32", std::int32_t{-2000000000}).ok());
        REQUIRE(w.set("f32", 1.5f).ok());
        REQUIRE(w.set("bool", true).ok());
        REQUIRE(w.set("u64", std::uint64_t{1} << 40).ok());
        REQUIRE(w.set("i64", -(std::int64_t{1} << 40)).ok());
        REQUIRE(w.set("f64", 0.125).ok());
        gg::array names{gg::value_type::string, {gg::value("a"), gg::value("bc")}};
        gg::array nested{
            gg::value_type::array,
            {gg::value(gg::array{gg::value_type::i32, {std::int32_t{1}, std::int32_t{2}}})}};
        REQUIRE(w.set("tokenizer.ggml.tokens", names).ok());
        REQUIRE(w.set("nested", nested).ok());
        for (tensor* t : tensors)
            REQUIRE(w.add_tensor(*t).ok());
    }
};

std::vector<std::uint8_t> raw(const tensor& t) {
    std::vector<std::uint8_t> v(t.nbytes());
    REQUIRE(tensor_get(t, v.data(), 0, v.size()).ok());
    return v;
}

std::span<const std::byte> as_span(const std::vector<std::byte>& b) {
    return {b.data(), b.size()};
}

} // namespace

TEST_CASE("gguf: round trip of every tensor type and every metadata value type") {
    sample s;
    const auto bytes = s.w.bytes();
    auto f = gg::file::parse(as_span(bytes));
    REQUIRE(f);
    CHECK(f->alignment() == 32);
    CHECK(f->data_offset() % 32 == 0);
    CHECK(f->get<std::string>("general.architecture").value() == "llama");
    CHECK(f->get<std::uint8_t>("u8").value() == 200);
    CHECK(f->get<std::int8_t>("i8").value() == -100);
    CHECK(f->get<std::uint16_t>("u16").value() == 60000);
    CHECK(f->get<std::int16_t>("i16").value() == -30000);
    CHECK(f->get<std::uint32_t>("u32").value() == 4000000000u);
    CHECK(f->get<std::int32_t>("i32").value() == -2000000000);
    CHECK(f->get<float>("f32").value() == 1.5f);
    CHECK(f->get<bool>("bool").value());
    CHECK(f->get<std::uint64_t>("u64").value() == std::uint64_t{1} << 40);
    CHECK(f->get<std::int64_t>("i64").value() == -(std::int64_t{1} << 40));
    CHECK(f->get<double>("f64").value() == 0.125);
    CHECK(f->get<std::int64_t>("u32").value() == 4000000000);                    // widening
    CHECK(f->get<std::int16_t>("u32").error().code() == errc::out_of_range); // does not fit
    CHECK(f->get<std::string>("u8").error().code() == errc::invalid_argument);
    CHECK(f->get<std::uint32_t>("missing").error().code() == errc::not_found);
    const auto* toks = std::get_if<gg::array>(&f->find("tokenizer.ggml.tokens")->v);
    REQUIRE(toks != nullptr);
    REQUIRE(toks->items.size() == 2);
    CHECK(std::get<std::string>(toks->items[1].v) == "bc");
    const auto* nested = std::get_if<gg::array>(&f->find("nested")->v);
    REQUIRE(nested != nullptr);
    CHECK(std::get<std::int32_t>(std::get<gg::array>(nested->items[0].v).items[1].v) == 2);

    REQUIRE(f->tensors().size() == s.tensors.size());
    for (std::size_t i = 0; i < s.tensors.size(); ++i) {
        const auto& ti = f->tensors()[i];
        const tensor& t = *s.tensors[i];
        INFO(ti.name);
        CHECK(ti.name == t.name);
        CHECK(ti.type == t.type);
        CHECK(ti.ne == t.ne);
        CHECK(ti.offset % 32 == 0);
        const auto d = f->data(ti);
        CHECK(std::memcmp(d.data(), t.data, t.nbytes()) == 0);
    }
    // an array with an item of another type is refused
    gg::writer bad;
    CHECK(bad.set("mixed", gg::array{gg::value_type::i32, {std::int32_t{1}, 2.0f}}).code() ==
          errc::invalid_argument);
    // writing the parsed file again gives the same bytes
    gg::writer again;
    for (const auto& [k, v] : f->metadata())
        REQUIRE(again.set(k, v).ok());
    context ctx{context_params{.no_alloc = true}};
    auto l = f->load(ctx);
    REQUIRE(l);
    for (tensor* t : l->tensors)
        REQUIRE(again.add_tensor(*t).ok());
    CHECK(again.bytes() == bytes);
}

TEST_CASE("gguf: element types carry ggml's type numbers, both ways") {
    // ggml's enum ggml_type: a file written by llama.cpp's tools names its types so
    const std::pair<elem_type, std::uint32_t> ids[] = {
        {elem_type::f32, 0},   {elem_type::f16, 1},   {elem_type::q4_0, 2},   {elem_type::q4_1, 3},
        {elem_type::q5_0, 6},  {elem_type::q5_1, 7},  {elem_type::q8_0, 8},   {elem_type::q2_K, 10},
        {elem_type::q3_K, 11}, {elem_type::q4_K, 12}, {elem_type::q5_K, 13},  {elem_type::q6_K, 14},
        {elem_type::q8_K, 15}, {elem_type::iq4_nl, 20}, {elem_type::i32, 26}, {elem_type::i64, 27},
        {elem_type::bf16, 30}, {elem_type::mxfp4, 39}, {elem_type::iq2_xxs, 16}, {elem_type::iq2_xs, 17},
        {elem_type::iq3_xxs, 18}, {elem_type::iq1_s, 19}, {elem_type::iq3_s, 21}, {elem_type::iq2_s, 22},
        {elem_type::iq4_xs, 23}, {elem_type::iq1_m, 29}, {elem_type::tq1_0, 34}, {elem_type::tq2_0, 35}};
    STATIC_REQUIRE(std::size(ids) == elem_type_count);
    for (auto [t, id] : ids) {
        INFO(to_string(t));
        CHECK(gg::ggml_type_of(t) == id);
        CHECK(gg::elem_type_of_ggml(id) == t);
    }
    for (const std::uint32_t unknown : {4u, 5u, 9u, 24u, 25u, 28u, 31u, 32u, 33u, 36u, 37u, 38u, 40u, 0xffffffffu})
        CHECK_FALSE(gg::elem_type_of_ggml(unknown).has_value());
}

TEST_CASE("gguf: an integer that does not fit the type asked for is reported as out of its range") {
    sample s;
    const auto bytes = s.w.bytes();
    auto f = gg::file::parse(as_span(bytes));
    REQUIRE(f);
    const auto i = f->get<int>("u32"); // 4000000000 > INT_MAX
    REQUIRE(!i);
    CHECK(i.error().code() == errc::out_of_range);
    const std::string m = i.error().message();
    INFO(m);
    CHECK(m.find("'u32'") != std::string::npos);
    CHECK(m.find("4000000000") != std::string::npos);
    CHECK(m.find("2147483647") != std::string::npos);
    CHECK(m.find("not the type asked for") == std::string::npos);
    const auto neg = f->get<std::uint64_t>("i8"); // -100
    REQUIRE(!neg);
    CHECK(neg.error().code() == errc::out_of_range);
    CHECK(neg.error().message().find("-100") != std::string::npos);
    // another kind of value is still a type mismatch
    const auto str = f->get<int>("general.architecture");
    REQUIRE(!str);
    CHECK(str.error().code() == errc::invalid_argument);
    CHECK(str.error().message().find("string") != std::string::npos);
}

TEST_CASE("gguf: load over the mapping without a copy, or into another buffer type") {
    sample s;
    const auto path = std::filesystem::temp_directory_path() / "backplane_test_gguf_load.gguf";
    REQUIRE(s.w.write(path).ok());
    {
        auto f = gg::file::open(path);
        REQUIRE(f);
        context ctx{context_params{.no_alloc = true}};
        auto l = f->load(ctx);
        REQUIRE(l);
        REQUIRE(l->tensors.size() == s.tensors.size());
        for (std::size_t i = 0; i < s.tensors.size(); ++i) {
            INFO(s.tensors[i]->name);
            tensor* t = l->find(s.tensors[i]->name);
            REQUIRE(t != nullptr);
            CHECK(t->buffer->is_host());
            CHECK(t->buffer == &l->buffers[0]); // one buffer over the mapped data
            CHECK(raw(*t) == raw(*s.tensors[i]));
        }
        // computing from the mapped weights works like any host tensor
        tensor* a = l->find(s.tensors[0]->name); // f32 [64, 3, 2]
        CHECK(test::nmse_of(tensor_read_f32(*a).value(), tensor_read_f32(*s.tensors[0]).value()) ==
              0.0);

        // into private device memory
        test::test_device dev({.name = "TD"});
        context ctx2{context_params{.no_alloc = true}};
        auto l2 = f->load(ctx2, dev.buffer_type());
        REQUIRE(l2);
        for (std::size_t i = 0; i < s.tensors.size(); ++i) {
            tensor* t = l2->find(s.tensors[i]->name);
            REQUIRE(t != nullptr);
            CHECK(!t->buffer->is_host());
            CHECK(raw(*t) == raw(*s.tensors[i]));
        }
        // a failed allocation is a status
        test::test_device tiny({.name = "TINY", .fail_alloc_above = 16});
        context ctx3{context_params{.no_alloc = true}};
        CHECK(f->load(ctx3, tiny.buffer_type()).error().code() == errc::alloc_failed);
    }
    std::filesystem::remove(path);
    CHECK(gg::file::open(path).error().code() == errc::not_found);
}

namespace {

/// Overwrites bytes of b at `at` with x.
template <class T> std::vector<std::byte> patched(std::vector<std::byte> b, std::size_t at, T x) {
    std::memcpy(b.data() + at, &x, sizeof x);
    return b;
}

std::string reject(const std::vector<std::byte>& b) {
    auto f = gg::file::parse(as_span(b));
    REQUIRE(!f);
    CHECK(f.error().code() == errc::invalid_argument);
    return f.error().message();
}

} // namespace

TEST_CASE("gguf: malformed files are rejected with a clear status") {
    // a small file: one f32 tensor, one key
    context ctx;
    tensor* t = ctx.new_tensor(elem_type::f32, {8, 2});
    t->name = "w";
    gg::writer w;
    REQUIRE(w.set("k", std::uint32_t{7}).ok());
    REQUIRE(w.add_tensor(*t).ok());
    const auto good = w.bytes();
    REQUIRE(gg::file::parse(as_span(good)));

    SECTION("every truncation") {
        for (std::size_t n = 0; n < good.size(); ++n) {
            INFO("first " << n << " bytes");
            std::vector<std::byte> cut(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(n));
            auto f = gg::file::parse(as_span(cut));
            CHECK(!f);
        }
    }
    // offsets in `good`: magic 0, version 4, tensor count 8, kv count 16, key "k" at 24
    // (u64 length + 1 byte), type at 33, value at 37, tensor name at 41 (8 + 1), n_dims
    // at 50, extents 54 and 62, type 70, offset 74
    SECTION("bad magic and version") {
        CHECK_THAT(reject(patched(good, 0, std::uint32_t{0x12345678})), Catch::Contains("magic"));
        CHECK_THAT(reject(patched(good, 4, std::uint32_t{2})), Catch::Contains("version 2"));
    }
    SECTION("absurd counts and lengths") {
        CHECK_THAT(reject(patched(good, 8, std::uint64_t{1} << 60)),
                   Catch::Contains("tensors cannot fit"));
        CHECK_THAT(reject(patched(good, 16, std::uint64_t{1} << 60)),
                   Catch::Contains("metadata entries cannot fit"));
        CHECK_THAT(reject(patched(good, 24, std::uint64_t{1} << 62)),
                   Catch::Contains("metadata key claims"));
        CHECK_THAT(reject(patched(good, 50, std::uint32_t{9})), Catch::Contains("dimensions"));
        CHECK_THAT(reject(patched(good, 54, std::uint64_t{0})), Catch::Contains("extent 0"));
        CHECK_THAT(reject(patched(good, 54, std::uint64_t{1} << 39)),
                   Catch::Contains("outside the data section"));
    }
    SECTION("unknown types") {
        CHECK_THAT(reject(patched(good, 33, std::uint32_t{77})),
                   Catch::Contains("unknown type 77"));
        // ggml's f64 (28): a type backplane does not read; the message lists those it does
        CHECK_THAT(reject(patched(good, 70, std::uint32_t{28})),
                   Catch::Contains("ggml type 28") && Catch::Contains("q4_K") && Catch::Contains("tq2_0"));
    }
    SECTION("misaligned, out-of-range and overlapping tensors") {
        CHECK_THAT(reject(patched(good, 74, std::uint64_t{4})),
                   Catch::Contains("not a multiple of 32"));
        CHECK_THAT(reject(patched(good, 74, std::uint64_t{4096})),
                   Catch::Contains("outside the data section"));
        tensor* t2 = ctx.new_tensor(elem_type::f32, {8, 2});
        t2->name = "w2";
        gg::writer w2;
        REQUIRE(w2.add_tensor(*t).ok());
        REQUIRE(w2.add_tensor(*t2).ok());
        auto two = w2.bytes();
        // the second tensor's offset (the last u64 before the data section's padding):
        // header 24, infos "w" 8+1+4+16+4+8 = 41, "w2" 8+2+4+16+4 = 34, then its offset
        const std::size_t second_offset = 24 + 41 + 34;
        const std::uint64_t expected_offset = 64;
        CHECK(std::memcmp(two.data() + second_offset, &expected_offset, 8) == 0);
        CHECK_THAT(reject(patched(two, second_offset, std::uint64_t{32})),
                   Catch::Contains("overlap"));
        // general.alignment 1 lets an i32 tensor start where its elements cannot be read:
        // after an f16 tensor of 1 or 2 values it starts 2 bytes apart in the two files,
        // so in one of them at an offset that is not a multiple of 4
        int misaligned = 0;
        for (const std::int64_t n : {1, 2}) {
            gg::writer w3;
            REQUIRE(w3.set("general.alignment", std::uint32_t{1}).ok());
            tensor* h = ctx.new_tensor(elem_type::f16, {n});
            h->name = "h";
            tensor* ints = ctx.new_tensor(elem_type::i32, {2});
            ints->name = "ints";
            REQUIRE(w3.add_tensor(*h).ok());
            REQUIRE(w3.add_tensor(*ints).ok());
            const auto bytes = w3.bytes();
            auto f = gg::file::parse(as_span(bytes));
            if (f) continue;
            ++misaligned;
            CHECK_THAT(f.error().message(), Catch::Contains("'ints' (i32)") && Catch::Contains("not a multiple of its element's 4 bytes"));
        }
        CHECK(misaligned == 1);
        // quantized rows that are not whole blocks
        auto q = patched(good, 70, gg::ggml_type_of(elem_type::q8_0));
        CHECK_THAT(reject(q), Catch::Contains("whole blocks"));
    }
    SECTION("random corruption never crashes") {
        std::mt19937 rng(11);
        int rejected = 0;
        for (int i = 0; i < 3000; ++i) {
            auto b = good;
            const int flips = 1 + static_cast<int>(rng() % 4);
            for (int k = 0; k < flips; ++k)
                b[rng() % b.size()] = static_cast<std::byte>(rng());
            auto f = gg::file::parse(as_span(b));
            if (!f) {
                ++rejected;
                continue;
            }
            // what parses is consistent: every tensor inside the data
            for (const auto& ti : f->tensors())
                CHECK(f->data_offset() + ti.offset + ti.nbytes <= b.size());
        }
        CHECK(rejected > 1000);
    }
}
