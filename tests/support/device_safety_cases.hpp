#pragma once
// Misuse of a device backend (Vulkan, CUDA) that must stay safe and clear: memory freed
// while work that uses it is still queued, a backend destroyed with work queued, and a
// get_rows index out of range (errc::out_of_range at synchronize, as the CPU reports
// it). The bodies the backends' test files share, each taking an opened device.

#include <backplane/backplane.hpp>
#include <backplane/sched.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace backplane::test {

/// A chain of `depth` products of n x n matrices: long enough on a CPU driver (tens of
/// milliseconds per product) that what is queued after it is still queued when a test
/// frees memory. a = 1/n and b = 3 make every product exactly 3 (n is a power of two).
struct long_graph {
    static constexpr std::int64_t n = 512;
    static constexpr std::size_t count = static_cast<std::size_t>(n * n);
    context ctx{context_params{.no_alloc = true}};
    tensor* a = nullptr;
    tensor* b = nullptr;
    tensor* out = nullptr;
    graph g;

    explicit long_graph(int depth) {
        a = ctx.new_tensor_2d(elem_type::f32, n, n);
        b = ctx.new_tensor_2d(elem_type::f32, n, n);
        tensor* x = b;
        for (int i = 0; i < depth; ++i) x = mul_mat(ctx, a, x);
        out = x;
        g.build_forward(out);
    }

    [[nodiscard]] status fill() const {
        const std::vector<float> va(count, 1.0f / static_cast<float>(n));
        const std::vector<float> vb(count, 3.0f);
        if (status s = tensor_set(*a, va.data(), 0, count * sizeof(float)); !s) return s;
        return tensor_set(*b, vb.data(), 0, count * sizeof(float));
    }
};

/// Every value of v is `want`.
inline void check_all(const std::vector<float>& v, float want) {
    std::size_t bad = 0;
    for (float x : v) bad += x != want ? 1 : 0;
    INFO(bad << " of " << v.size() << " values are not " << want);
    CHECK(bad == 0);
}

/// Buffers freed while a compute and a read of its result are queued on `be`: the read
/// still gets the result, and memory allocated meanwhile is not written by the queued
/// work. With `check_release`, the device's used memory drops once the work is done.
template <class Device, class Backend>
void check_free_while_queued(const Device& dev, Backend& be, bool check_release) {
    long_graph lg(6);
    auto bufs = alloc_tensors(lg.ctx, dev.buffer_type());
    REQUIRE(bufs);
    REQUIRE(lg.fill());
    std::vector<float> out(long_graph::count, -1.0f);
    REQUIRE(be.compute(lg.g));
    REQUIRE(be.get_tensor_async(*lg.out, out.data(), 0, long_graph::count * sizeof(float)));
    if constexpr (event_backend<Backend>) { // an event submits what is recorded so far
        auto ev = be.make_event();
        REQUIRE(ev);
        REQUIRE(be.record(*ev));
    }
    const memory_info before = dev.memory();
    *bufs = buffer_list{}; // a, b and every product, while the device still uses them

    context other(context_params{.no_alloc = true});
    tensor* fresh = other.new_tensor_2d(elem_type::f32, long_graph::n, long_graph::n);
    auto fresh_buf = alloc_tensors(other, dev.buffer_type());
    REQUIRE(fresh_buf);
    REQUIRE(fresh_buf->clear(0x5a));

    const status s = be.synchronize();
    INFO(s.describe());
    REQUIRE(s);
    check_all(out, 3.0f);
    std::vector<std::uint8_t> back(long_graph::count * sizeof(float));
    REQUIRE(tensor_get(*fresh, back.data(), 0, back.size()));
    std::size_t touched = 0;
    for (std::uint8_t byte : back) touched += byte != 0x5a ? 1 : 0;
    CHECK(touched == 0);
    if (check_release) CHECK(dev.memory().total - dev.memory().free < before.total - before.free);
}

/// A backend destroyed with a compute queued waits for it (the results are there); then
/// transfers recorded into memory that is freed before they are submitted still run.
template <class Device>
void check_destroy_while_queued(const Device& dev) {
    const std::size_t n = long_graph::count;
    {
        long_graph lg(4);
        auto bufs = alloc_tensors(lg.ctx, dev.buffer_type());
        REQUIRE(bufs);
        REQUIRE(lg.fill());
        auto be = dev.make_backend();
        REQUIRE(be);
        REQUIRE(be->compute(lg.g));
        be = decltype(be)(status(errc::invalid_argument, "destroyed")); // the stream goes first
        std::vector<float> out(n);
        REQUIRE(tensor_get(*lg.out, out.data(), 0, n * sizeof(float)));
        check_all(out, 3.0f);
    }
    auto be = dev.make_backend();
    REQUIRE(be);
    long_graph lg(4);
    auto bufs = alloc_tensors(lg.ctx, dev.buffer_type());
    REQUIRE(bufs);
    REQUIRE(lg.fill());
    REQUIRE(be->compute(lg.g));
    const std::vector<float> v(n, 2.0f);
    REQUIRE(be->set_tensor_async(*lg.b, v.data(), 0, n * sizeof(float)));
    std::vector<float> got(n, -1.0f);
    REQUIRE(be->get_tensor_async(*lg.b, got.data(), 0, n * sizeof(float)));
    REQUIRE(be->copy_tensor_async(*lg.b, *lg.a));
    *bufs = buffer_list{};
    REQUIRE(be->synchronize());
    check_all(got, 2.0f);
    // the backend computes on as before
    long_graph again(1);
    auto bufs2 = alloc_tensors(again.ctx, dev.buffer_type());
    REQUIRE(bufs2);
    REQUIRE(again.fill());
    REQUIRE(be->compute(again.g));
    REQUIRE(be->synchronize());
    std::vector<float> out(n);
    REQUIRE(tensor_get(*again.out, out.data(), 0, n * sizeof(float)));
    check_all(out, 3.0f);
}

/// get_rows(table, ids) named "picked", with table [4, 3] of `type` (row r holds 10r,
/// 10r + 1, 10r + 2, 10r + 3) and ids i32 [3].
struct rows_case {
    context ctx;
    tensor* a;
    tensor* idx;
    tensor* rows;
    graph g;

    rows_case(elem_type type, bool no_alloc) : ctx(context_params{.no_alloc = no_alloc}) {
        a = ctx.new_tensor_2d(type, 4, 3);
        a->name = "table";
        idx = ctx.new_tensor_1d(elem_type::i32, 3);
        idx->name = "ids";
        rows = get_rows(ctx, a, idx);
        rows->name = "picked";
        g.build_forward(rows);
    }

    [[nodiscard]] status fill(const std::vector<std::int32_t>& ids) const {
        std::vector<std::int32_t> vi(12);
        std::vector<float> vf(12);
        for (std::size_t k = 0; k < 12; ++k) {
            vi[k] = static_cast<std::int32_t>(10 * (k / 4) + k % 4);
            vf[k] = static_cast<float>(vi[k]);
        }
        const void* src = a->type == elem_type::i32 ? static_cast<const void*>(vi.data()) : vf.data();
        if (status s = tensor_set(*a, src, 0, 48); !s) return s;
        return tensor_set(*idx, ids.data(), 0, 12);
    }

    /// The 12 values of the result, as floats.
    [[nodiscard]] std::vector<float> result() const {
        std::vector<float> out(12);
        if (rows->type == elem_type::i32) {
            std::vector<std::int32_t> vi(12);
            REQUIRE(tensor_get(*rows, vi.data(), 0, 48));
            for (std::size_t k = 0; k < 12; ++k) out[k] = static_cast<float>(vi[k]);
        } else {
            REQUIRE(tensor_get(*rows, out.data(), 0, 48));
        }
        return out;
    }
};

/// A backend of dev and the tensors of ctx allocated in dev's memory, for a case that
/// fills them and computes one graph.
template <class Device> struct on_device {
    decltype(std::declval<const Device&>().make_backend()) be;
    buffer_list buffers;
    on_device(const Device& dev, context& ctx) : be(dev.make_backend()) {
        REQUIRE(be);
        auto bufs = alloc_tensors(ctx, dev.buffer_type());
        REQUIRE(bufs);
        buffers = std::move(*bufs);
    }
};

/// Computes g (queued) on be and checks that synchronize() reports an index out of range
/// as the CPU does, naming the node (`node`, "op node 'name'") and the source it indexes.
template <class Backend>
void expect_index_error(Backend& be, const graph& g, const std::string& node, const std::string& source) {
    REQUIRE(be->compute(g)); // queued: the index is read on the device
    const status s = be->synchronize();
    INFO(s.describe());
    CHECK(s.code() == errc::out_of_range);
    const std::string msg(s.message());
    CHECK(msg.find(node) != std::string::npos);
    CHECK(msg.find("'" + source + "'") != std::string::npos);
}

/// Rows picked by ids {2, out of range, 0}: rows 2 and 0, and zeros between.
inline void check_rows_with_gap(const std::vector<float>& got) {
    const std::vector<float> want = {20, 21, 22, 23, 0, 0, 0, 0, 0, 1, 2, 3};
    for (std::size_t k = 0; k < 12; ++k) {
        INFO("element " << k);
        CHECK(got[k] == want[k]);
    }
}

/// An out-of-range get_rows index: the CPU's status code, from the device's
/// synchronize(), naming the node and its source; the row zeros; reported once.
template <class Device>
void check_get_rows_out_of_range(const Device& dev) {
    for (const elem_type type : {elem_type::f32, elem_type::i32}) {
        for (const std::int32_t bad : {3, -1, 1000}) {
            INFO("type " << to_string(type) << ", index " << bad);
            rows_case on_cpu(type, false);
            REQUIRE(on_cpu.fill({2, bad, 0}));
            cpu_backend cpu;
            const status want = cpu.compute(on_cpu.g);
            REQUIRE(want.code() == errc::out_of_range);
            check_rows_with_gap(on_cpu.result());

            rows_case c(type, true);
            on_device d(dev, c.ctx);
            auto& be = d.be;
            REQUIRE(c.fill({2, bad, 0}));
            REQUIRE(be->compute(c.g)); // queued: the index is read on the device
            const status s = be->synchronize();
            INFO(s.describe());
            CHECK(s.code() == want.code());
            const std::string msg(s.message());
            CHECK(msg.find("get_rows node 'picked'") != std::string::npos);
            CHECK(msg.find("reads outside a source") != std::string::npos);
            CHECK(msg.find("'table'") != std::string::npos);
            check_rows_with_gap(c.result());

            CHECK(be->synchronize()); // reported once
            REQUIRE(c.fill({2, 1, 0}));
            REQUIRE(be->compute(c.g));
            CHECK(be->synchronize());
            const auto good = c.result();
            CHECK(good[4] == 10.0f);
            CHECK(good[7] == 13.0f);
        }
    }
}

/// An out-of-range set_rows index (i32 and i64): the CPU's status code from the device's
/// synchronize(), naming the node and its destination; the rows it could not write are
/// left as they were, the others written; reported once.
template <class Device>
void check_set_rows_out_of_range(const Device& dev) {
    for (const elem_type it : {elem_type::i32, elem_type::i64}) {
        for (const std::int64_t bad : {std::int64_t{3}, std::int64_t{-1}, std::int64_t{1} << 32}) {
            if (it == elem_type::i32 && bad > 1000) continue;
            INFO("index type " << to_string(it) << ", index " << bad);
            context ctx({.no_alloc = true});
            tensor* cache = ctx.new_tensor_2d(elem_type::f16, 4, 3);
            cache->name = "cache";
            tensor* rows = ctx.new_tensor_2d(elem_type::f32, 4, 2);
            tensor* idx = ctx.new_tensor_1d(it, 2);
            tensor* out = set_rows(ctx, cache, rows, idx);
            out->name = "kv";
            graph g(out);
            on_device d(dev, ctx);
            std::vector<f16_t> before(12);
            for (std::size_t k = 0; k < 12; ++k) before[k] = f32_to_f16(static_cast<float>(k));
            REQUIRE(tensor_set(*cache, before.data(), 0, 24));
            const std::vector<float> written = {100, 101, 102, 103, 200, 201, 202, 203};
            REQUIRE(tensor_set(*rows, written.data(), 0, 32));
            const std::vector<std::int64_t> ids = {bad, 1};
            if (it == elem_type::i64) {
                REQUIRE(tensor_set(*idx, ids.data(), 0, 16));
            } else {
                const std::vector<std::int32_t> ids32 = {static_cast<std::int32_t>(bad), 1};
                REQUIRE(tensor_set(*idx, ids32.data(), 0, 8));
            }
            expect_index_error(d.be, g, "set_rows node 'kv'", "cache");
            std::vector<f16_t> after(12);
            REQUIRE(tensor_get(*cache, after.data(), 0, 24));
            for (std::size_t k = 0; k < 12; ++k) {
                INFO("element " << k);
                const float want = k / 4 == 1 ? written[4 + k % 4] : static_cast<float>(k); // row 1 written
                CHECK(f16_to_f32(after[k]) == want);
            }
            CHECK(d.be->synchronize()); // reported once
        }
    }
}

/// An out-of-range add_id expert id: the CPU's status code from the device's
/// synchronize(), naming the node and the experts' rows; that row zeros, the others
/// a + b's row; reported once.
template <class Device>
void check_add_id_out_of_range(const Device& dev) {
    for (const std::int32_t bad : {3, -1, 1000}) {
        INFO("id " << bad);
        context ctx({.no_alloc = true});
        tensor* a = ctx.new_tensor_3d(elem_type::f32, 4, 2, 2);
        tensor* b = ctx.new_tensor_2d(elem_type::f32, 4, 3);
        b->name = "biases";
        tensor* ids = ctx.new_tensor_2d(elem_type::i32, 2, 2);
        tensor* out = add_id(ctx, a, b, ids);
        out->name = "biased";
        graph g(out);
        on_device d(dev, ctx);
        std::vector<float> va(16), vb(12);
        for (std::size_t k = 0; k < va.size(); ++k) va[k] = static_cast<float>(k);
        for (std::size_t k = 0; k < vb.size(); ++k) vb[k] = static_cast<float>(100 * (k / 4 + 1));
        REQUIRE(tensor_set(*a, va.data(), 0, 64));
        REQUIRE(tensor_set(*b, vb.data(), 0, 48));
        const std::vector<std::int32_t> vi = {2, bad, 0, 1};
        REQUIRE(tensor_set(*ids, vi.data(), 0, 16));
        expect_index_error(d.be, g, "add_id node 'biased'", "biases");
        std::vector<float> got(16);
        REQUIRE(tensor_get(*out, got.data(), 0, 64));
        for (std::size_t k = 0; k < 16; ++k) {
            INFO("element " << k);
            const std::size_t row = k / 4;
            const float want = row == 1 ? 0.0f : va[k] + 100.0f * static_cast<float>(vi[row] + 1);
            CHECK(got[k] == want);
        }
        CHECK(d.be->synchronize()); // reported once
    }
}

/// An out-of-range ssm_scan state id: the CPU's status code from the device's synchronize(),
/// naming the node and the states; that sequence's outputs and final states zeros, the
/// other sequence's computed; reported once.
template <class Device>
void check_ssm_scan_out_of_range(const Device& dev) {
    for (const std::int32_t bad : {2, -1, 1000}) {
        INFO("id " << bad);
        context ctx({.no_alloc = true});
        // Mamba-2: d_state 2, head_dim 1, 2 heads, 2 tokens, 2 sequences, 2 states
        tensor* s = ctx.new_tensor_4d(elem_type::f32, 2, 1, 2, 2);
        s->name = "states";
        tensor* x = ctx.new_tensor_4d(elem_type::f32, 1, 2, 2, 2);
        tensor* dt = ctx.new_tensor_3d(elem_type::f32, 2, 2, 2);
        tensor* A = ctx.new_tensor_2d(elem_type::f32, 1, 2);
        tensor* B = ctx.new_tensor_4d(elem_type::f32, 2, 1, 2, 2);
        tensor* C = ctx.new_tensor_4d(elem_type::f32, 2, 1, 2, 2);
        tensor* ids = ctx.new_tensor_1d(elem_type::i32, 2);
        tensor* out = ssm_scan(ctx, s, x, dt, A, B, C, ids);
        out->name = "scanned";
        graph g(out);
        on_device d(dev, ctx);
        const std::vector<float> half(8, 0.5f), minus(2, -1.0f);
        for (tensor* t : {s, x, dt, B, C}) REQUIRE(tensor_set(*t, half.data(), 0, 32));
        REQUIRE(tensor_set(*A, minus.data(), 0, 8));
        const std::vector<std::int32_t> vi = {1, bad};
        REQUIRE(tensor_set(*ids, vi.data(), 0, 8));
        expect_index_error(d.be, g, "ssm_scan node 'scanned'", "states");
        std::vector<float> got(16); // y: 8 values (sequence 1 from 4), states: 8 (sequence 1 from 12)
        REQUIRE(tensor_get(*out, got.data(), 0, 64));
        for (std::size_t k = 0; k < 16; ++k) {
            INFO("element " << k);
            const bool seq1 = (k >= 4 && k < 8) || k >= 12;
            if (seq1)
                CHECK(got[k] == 0.0f);
            else
                CHECK(got[k] > 0.0f); // positive inputs and decays: positive states and outputs
        }
        CHECK(d.be->synchronize()); // reported once
    }
}

/// An out-of-range mul_mat_id expert id: the CPU's status code from the device's
/// synchronize(), naming the node and the experts; that column zeros, the others each
/// expert's product; reported once.
template <class Device>
void check_mul_mat_id_out_of_range(const Device& dev) {
    for (const std::int32_t bad : {2, -1, 1000}) {
        INFO("id " << bad);
        context ctx({.no_alloc = true});
        tensor* as = ctx.new_tensor_3d(elem_type::f32, 4, 3, 2); // 2 experts of [4, 3]
        as->name = "experts";
        tensor* b = ctx.new_tensor_3d(elem_type::f32, 4, 1, 2);
        tensor* ids = ctx.new_tensor_2d(elem_type::i32, 2, 2);
        tensor* out = mul_mat_id(ctx, as, b, ids);
        out->name = "moe";
        graph g(out);
        on_device d(dev, ctx);
        std::vector<float> va(24), vb = {1, 2, 3, 4, 1, 1, 1, 1};
        for (std::size_t k = 0; k < va.size(); ++k) va[k] = static_cast<float>(k);
        REQUIRE(tensor_set(*as, va.data(), 0, 96));
        REQUIRE(tensor_set(*b, vb.data(), 0, 32));
        const std::vector<std::int32_t> vi = {1, bad, 0, 1};
        REQUIRE(tensor_set(*ids, vi.data(), 0, 16));
        expect_index_error(d.be, g, "mul_mat_id node 'moe'", "experts");
        std::vector<float> got(12);
        REQUIRE(tensor_get(*out, got.data(), 0, 48));
        for (std::size_t c = 0; c < 4; ++c)
            for (std::size_t m = 0; m < 3; ++m) {
                INFO("column " << c << ", row " << m);
                float want = 0.0f;
                if (c != 1)
                    for (std::size_t k = 0; k < 4; ++k)
                        want += va[static_cast<std::size_t>(vi[c]) * 12 + m * 4 + k] * vb[(c / 2) * 4 + k];
                CHECK(got[c * 3 + m] == want);
            }
        CHECK(d.be->synchronize()); // reported once
    }
}

/// The same through a scheduler over {the device's backend, the CPU}: its compute fails.
template <class Device>
void check_get_rows_out_of_range_scheduled(const Device& dev) {
    auto be = dev.make_backend();
    REQUIRE(be);
    cpu_backend cpu;
    rows_case c(elem_type::f32, true);
    auto bufs = alloc_tensors(c.ctx, dev.buffer_type()); // the table and the ids on the device
    REQUIRE(bufs);
    REQUIRE(c.fill({2, 5, 0}));
    scheduler sched(scheduler_params{}, *be, cpu);
    REQUIRE(sched.alloc_graph(c.g));
    const status s = sched.compute(c.g);
    INFO(s.describe());
    CHECK(s.code() == errc::out_of_range);
    CHECK(std::string(s.message()).find("get_rows node 'picked'") != std::string::npos);
}

} // namespace backplane::test
