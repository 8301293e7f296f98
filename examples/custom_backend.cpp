// custom_backend: a backend written by a user, in one file, run through the scheduler.
//
// flop_counter hands the maths of every graph to a cpu_backend and counts, per op kind,
// the nodes it computed and their FLOPs. Its memory is host memory, so it models
// host_backend and can be a scheduler's last (here: only) backend. main() computes a
// small transformer-like block through the scheduler on it, prints the FLOPs per op and
// checks the output against a plain cpu_backend: exit status 0 when all is well, 1 with a
// message on stderr otherwise. docs/writing-a-backend.md walks through this file.

#include <backplane/backplane.hpp>
#include <backplane/sched.hpp>

#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <random>
#include <string>
#include <string_view>
#include <vector>

using namespace backplane;

/// FLOPs of one node as counted here: mul_mat 2*K per result element (a multiply and an
/// add per term, so 2*M*N*K for one matrix); rms_norm 3 per element (square, sum, scale);
/// soft_max 4 (max, exp, sum, divide); ops that only move data (copies, rows, views) 0;
/// every other op (add, mul, silu, ...) 1 per result element.
inline std::uint64_t flops_of(const tensor& t) noexcept {
    const auto n = static_cast<std::uint64_t>(t.nelements());
    switch (t.op) {
    case op_kind::mul_mat: return 2 * static_cast<std::uint64_t>(t.src[0]->ne[0]) * n;
    case op_kind::rms_norm: return 3 * n;
    case op_kind::soft_max: return 4 * n;
    case op_kind::none: case op_kind::dup: case op_kind::cpy: case op_kind::cont:
    case op_kind::get_rows: case op_kind::concat: return 0;
    default: return is_view_op(t.op) ? 0 : n;
    }
}

class flop_counter;

/// The device: hardware that makes flop_counter backends; it shares the CPU's memory.
class flop_device {
public:
    static const flop_device& instance() noexcept {
        static const flop_device d;
        return d;
    }
    [[nodiscard]] std::string_view name() const noexcept { return "FLOPS"; }
    [[nodiscard]] std::string_view description() const noexcept { return "host CPU, counting FLOPs"; }
    [[nodiscard]] device_kind kind() const noexcept { return device_kind::cpu; }
    [[nodiscard]] memory_info memory() const noexcept { return cpu_device::instance().memory(); }
    [[nodiscard]] device_caps caps() const noexcept { return {}; } // no async, events, ...
    [[nodiscard]] const cpu_buffer_type& buffer_type() const noexcept { return cpu_buffer_type::instance(); }
    [[nodiscard]] bool supports_op(const tensor& t) const { return cpu_device::instance().supports_op(t); }
    [[nodiscard]] bool supports_buffer_type(const buffer_type_ref& bt) const { return bt.is_host(); }
    [[nodiscard]] flop_counter make_backend() const; // defined once flop_counter is complete
};

/// The backend: a stream of work on a flop_device.
class flop_counter {
public:
    explicit flop_counter(cpu_backend_params params = {}) : cpu_(params) {}

    [[nodiscard]] std::string_view name() const noexcept { return "FLOPS"; }
    [[nodiscard]] const flop_device& device() const noexcept { return flop_device::instance(); }
    [[nodiscard]] const cpu_buffer_type& buffer_type() const noexcept { return cpu_buffer_type::instance(); }
    // The truth about what compute accepts: the scheduler places nodes by it.
    [[nodiscard]] bool supports_op(const tensor& t) const { return cpu_.supports_op(t); }
    [[nodiscard]] bool supports_buffer_type(const buffer_type_ref& bt) const { return bt.is_host(); }

    /// Computes g on the CPU backend, then counts its nodes (only when it succeeded).
    status compute(graph_view g) {
        if (status s = cpu_.compute(g); !s) return s;
        for (const tensor* node : g) {
            if (node->op == op_kind::none || is_view_op(node->op)) continue; // computes nothing
            const auto k = static_cast<std::size_t>(node->op);
            ++nodes_[k];
            flops_[k] += flops_of(*node);
        }
        return {};
    }
    status synchronize() { return cpu_.synchronize(); } // compute is synchronous

    // Optional: threaded_backend, forwarded to the CPU backend underneath.
    status set_n_threads(int n) { return cpu_.set_n_threads(n); }
    [[nodiscard]] int n_threads() const noexcept { return cpu_.n_threads(); }

    [[nodiscard]] std::uint64_t nodes(op_kind op) const { return nodes_[static_cast<std::size_t>(op)]; }
    [[nodiscard]] std::uint64_t flops(op_kind op) const { return flops_[static_cast<std::size_t>(op)]; }

private:
    cpu_backend cpu_;
    std::array<std::uint64_t, op_kind_count> nodes_{}, flops_{};
};

inline flop_counter flop_device::make_backend() const { return flop_counter{}; }

static_assert(backplane::device<flop_device>);
static_assert(backplane::backend<flop_counter>);
static_assert(backplane::host_backend<flop_counter>); // may be a scheduler's last backend
static_assert(backplane::threaded_backend<flop_counter>);
static_assert(!backplane::async_backend<flop_counter> && !backplane::event_backend<flop_counter>);

/// x [64, 8] -> rms_norm, single-head attention, residual, rms_norm, silu MLP, residual.
/// Weights are graph inputs here, so whoever allocates the graph gives them memory.
struct block {
    static constexpr std::int64_t d = 64, tokens = 8, ff = 128;
    context ctx{context_params{.no_alloc = true}};
    std::vector<tensor*> inputs;
    tensor* out = nullptr;
    graph g;

    block() {
        auto in = [&](std::int64_t ne0, std::int64_t ne1) {
            tensor* t = ctx.new_tensor(elem_type::f32, {ne0, ne1});
            t->set_input();
            inputs.push_back(t);
            return t;
        };
        tensor *x = in(d, tokens), *norm1 = in(d, 1), *wq = in(d, d), *wk = in(d, d), *wv = in(d, d);
        tensor *wo = in(d, d), *norm2 = in(d, 1), *w1 = in(d, ff), *w2 = in(ff, d);
        tensor* h = mul(ctx, rms_norm(ctx, x), norm1);
        tensor* scores = mul_mat(ctx, mul_mat(ctx, wk, h), mul_mat(ctx, wq, h)); // [keys, queries]
        tensor* att = soft_max(ctx, scores, nullptr, 1.0f / std::sqrt(static_cast<float>(d)));
        tensor* v_t = mul_mat(ctx, h, wv); // [tokens, d]
        tensor* x1 = add(ctx, x, mul_mat(ctx, wo, mul_mat(ctx, v_t, att)));
        tensor* up = silu(ctx, mul_mat(ctx, w1, mul(ctx, rms_norm(ctx, x1), norm2)));
        out = add(ctx, x1, mul_mat(ctx, w2, up));
        out->set_output();
        g.build_forward(out);
    }

    /// The same pseudo-random values in every block, whatever memory it was given.
    [[nodiscard]] status fill() {
        std::mt19937 rng(2024);
        std::uniform_real_distribution<float> dist(-0.5f, 0.5f);
        for (tensor* t : inputs) {
            std::vector<float> v(static_cast<std::size_t>(t->nelements()));
            for (float& e : v) e = dist(rng);
            if (status s = tensor_set(*t, v); !s) return s;
        }
        return {};
    }
};

static int fail(const std::string& what) {
    std::fprintf(stderr, "custom_backend: %s\n", what.c_str());
    return 1;
}

int main(int argc, char** argv) try {
    // It takes no arguments: anything given is a mistake worth saying so (exit status 2).
    if (argc > 1) {
        const std::string_view a = argv[1];
        const bool help = a == "-h" || a == "--help";
        if (!help) std::fprintf(stderr, "custom_backend: unknown argument '%s'\n", argv[1]);
        std::fprintf(help ? stdout : stderr, "usage: custom_backend (no arguments)\n");
        return help ? 0 : 2;
    }
    flop_counter counter;
    scheduler sched(counter); // scheduler<flop_counter>: its last backend is a host backend
    block mine;
    if (status s = sched.alloc_graph(mine.g); !s) return fail("scheduler alloc_graph: " + s.describe());
    if (status s = mine.fill(); !s) return fail("writing the inputs: " + s.describe());
    if (status s = sched.compute(mine.g); !s) return fail("scheduler compute: " + s.describe());
    std::fputs(sched.describe(1).c_str(), stdout);

    // The reference: the same block on a plain CPU backend with the same thread count.
    cpu_backend cpu({.n_threads = counter.n_threads()});
    block ref;
    graph_allocator galloc(cpu.buffer_type());
    if (status s = galloc.alloc_graph(ref.g); !s) return fail("reference alloc_graph: " + s.describe());
    if (status s = ref.fill(); !s) return fail("writing the reference inputs: " + s.describe());
    if (status s = cpu.compute(ref.g); !s) return fail("reference compute: " + s.describe());

    using ull = unsigned long long;
    std::printf("\n%-10s %6s %14s\n", "op", "nodes", "FLOPs");
    std::uint64_t total = 0, counted = 0;
    for (std::size_t k = 0; k < op_kind_count; ++k) {
        const auto op = static_cast<op_kind>(k);
        if (counter.nodes(op) == 0) continue;
        const std::string name(to_string(op));
        std::printf("%-10s %6llu %14llu\n", name.c_str(), ull{counter.nodes(op)}, ull{counter.flops(op)});
        total += counter.flops(op);
        counted += counter.nodes(op);
    }
    std::printf("%-10s %6llu %14llu\n", "total", ull{counted}, ull{total});
    if (counted != mine.g.n_nodes())
        return fail("counted " + std::to_string(counted) + " nodes of " + std::to_string(mine.g.n_nodes()));

    auto got = tensor_get_all<float>(*mine.out);
    auto want = tensor_get_all<float>(*ref.out);
    if (!got || !want) return fail("reading the outputs: " + (got ? want.error() : got.error()).describe());
    if (got->size() != want->size()) return fail("the outputs have different sizes");
    float worst = 0.0f;
    for (std::size_t i = 0; i < want->size(); ++i) worst = std::fmax(worst, std::fabs((*got)[i] - (*want)[i]));
    std::printf("\nmax |flop_counter - cpu| = %g over %zu values\n", static_cast<double>(worst), want->size());
    if (!(worst <= 1e-5f)) return fail("the outputs differ from the CPU backend's by " + std::to_string(worst));
    return 0;
} catch (const std::exception& e) { // graph building and the scheduler's constructor throw
    return fail(e.what());
}
