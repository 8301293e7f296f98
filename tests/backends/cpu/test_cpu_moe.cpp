// The fast mul_mat_id (backends/cpu/fast/mul_mat_id.hpp: each expert's columns grouped,
// then the fast mul_mat kernels) against the CPU's reference kernel, on 1 and 3 threads
// with every node split: f32, f16, q8_0 and q4_0 experts, 1 to 4 experts per token, 1 to
// 64 tokens, uneven loads (one expert takes most columns), an expert no token uses, one
// activation per token or one per used expert, and an id out of range. K-quant experts
// (q2_K ... q6_K) at every instruction-set level this machine has, on 1 to 3 threads:
// decode (one token), the mat-vec tiles (fewer than 8 columns per expert), the AVX-512
// panel kernel (8 or more) and an expert with more columns than one chunk; each result
// column against the reference kernel and against dense mul_mats of the experts (the same
// quantized activations).

#include <backplane/backends/cpu.hpp>
#include <backplane/conformance/inputs.hpp>
#include <backplane/conformance/thresholds.hpp>

#include <catch2/catch.hpp>

#include "split_everything.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

using namespace backplane;

namespace {

using i64 = std::int64_t;

using backplane::test::split_everything;

/// Caps the instruction set for one scope, and lifts the cap after (even on a failure).
struct isa_cap {
    explicit isa_cap(cpu::isa level) { cpu::set_isa_override(level); }
    ~isa_cap() { cpu::clear_isa_override(); }
    isa_cap(const isa_cap&) = delete;
    isa_cap& operator=(const isa_cap&) = delete;
};

/// Ids for n_used x n_tokens columns: skewed towards expert 0 (about half the columns),
/// never naming the last expert when there are 3 or more.
void fill_uneven_ids(tensor& ids, i64 n_expert, std::mt19937& rng) {
    const i64 named = n_expert >= 3 ? n_expert - 1 : n_expert;
    for (i64 t = 0; t < ids.ne[1]; ++t)
        for (i64 s = 0; s < ids.ne[0]; ++s) {
            const i64 e = rng() % 2 == 0 ? 0 : static_cast<i64>(rng() % static_cast<std::uint32_t>(named));
            conformance::set_element(ids, s, t, 0, 0, static_cast<double>(e));
        }
}

/// The node's result computed by cpu_backend `params`.
std::vector<float> run(tensor* out, const cpu_backend_params& params) {
    cpu_backend backend(params);
    graph g(out);
    const status st = backend.compute(g);
    INFO(st.describe());
    REQUIRE(st.ok());
    return tensor_get_all<float>(*out).value();
}

double nmse(const std::vector<float>& want, const std::vector<float>& got) {
    double err = 0.0, norm = 0.0;
    for (std::size_t i = 0; i < want.size(); ++i) {
        err += (static_cast<double>(want[i]) - got[i]) * (static_cast<double>(want[i]) - got[i]);
        norm += static_cast<double>(want[i]) * want[i];
    }
    return norm > 0.0 ? err / norm : err;
}

/// The largest nmse of one column of m values (a column routed wrong cannot hide among
/// the others).
double worst_column_nmse(const std::vector<float>& want, const std::vector<float>& got, i64 m) {
    double worst = 0.0;
    for (std::size_t c = 0; c + static_cast<std::size_t>(m) <= want.size(); c += static_cast<std::size_t>(m)) {
        const auto first = static_cast<std::ptrdiff_t>(c);
        const auto last = static_cast<std::ptrdiff_t>(c) + m;
        worst = std::max(worst, nmse(std::vector<float>(want.begin() + first, want.begin() + last),
                                     std::vector<float>(got.begin() + first, got.begin() + last)));
    }
    return worst;
}

/// What dense mul_mats give for the node's result: each expert's matrix times every
/// activation column (the fast mul_mat: the same quantized activations and kernels), column
/// c = s + n_used * t of the result taken from the product of the expert ids[s, t] names.
std::vector<float> dense_result(context& ctx, tensor* as, tensor* b, const tensor& ids,
                                const cpu_backend_params& params) {
    const i64 k = as->ne[0], m = as->ne[1], b1 = b->ne[1], n_used = ids.ne[0], n_tokens = ids.ne[1];
    tensor* columns = reshape(ctx, b, {k, b1 * n_tokens});
    std::vector<std::vector<float>> product(static_cast<std::size_t>(as->ne[2]));
    for (i64 e = 0; e < as->ne[2]; ++e) {
        tensor* expert = view_2d(ctx, as, k, m, as->nb[1], static_cast<std::size_t>(e) * as->nb[2]);
        product[static_cast<std::size_t>(e)] = run(mul_mat(ctx, expert, columns), params);
    }
    const std::vector<std::int32_t> id = tensor_get_all<std::int32_t>(ids).value();
    std::vector<float> out;
    for (i64 c = 0; c < n_used * n_tokens; ++c) {
        const std::vector<float>& p = product[static_cast<std::size_t>(id[static_cast<std::size_t>(c)])];
        const auto first = static_cast<std::ptrdiff_t>((c % n_used % b1 + b1 * (c / n_used)) * m);
        out.insert(out.end(), p.begin() + first, p.begin() + first + m);
    }
    return out;
}

} // namespace

TEST_CASE("cpu fast mul_mat_id: grouped by expert, against the reference kernel", "[cpu][mul_mat_id][fast]") {
    std::mt19937 rng(20261126);
    context ctx;
    int checked = 0;
    for (elem_type ta : {elem_type::f32, elem_type::f16, elem_type::q8_0, elem_type::q4_0})
        for (const i64 n_used : {1, 2, 3, 4})
            for (const i64 n_tokens : {1, 7, 64}) {
                const i64 k = is_quantized(ta) ? 32 * (1 + n_used) : 16 * n_used + 3;
                const i64 m = 5 + 9 * n_used, n_expert = 2 + n_used * 2;
                const i64 b1 = n_tokens % 2 == 1 ? 1 : n_used;
                tensor* as = conformance::random_leaf(ctx, ta, {k, m, n_expert, 1}, rng);
                tensor* b = conformance::random_leaf(ctx, elem_type::f32, {k, b1, n_tokens, 1}, rng);
                tensor* ids = ctx.new_tensor_2d(elem_type::i32, n_used, n_tokens);
                fill_uneven_ids(*ids, n_expert, rng);
                tensor* out = mul_mat_id(ctx, as, b, ids);
                INFO(to_string(ta) << " experts [" << k << ", " << m << ", " << n_expert << "], n_used " << n_used
                                   << ", tokens " << n_tokens << ", b.ne1 " << b1);
                REQUIRE(cpu::choose_kernel(*out, false) == cpu::kernel_kind::fast_mul_mat_id);
                const std::vector<float> want = run(out, {.n_threads = 1, .reference = true});
                for (const int n_threads : {1, 3}) {
                    INFO(n_threads << " threads");
                    split_everything split;
                    const std::vector<float> got = run(out, {.n_threads = n_threads});
                    CHECK(nmse(want, got) <= conformance::threshold_for(*out).max_nmse);
                }
                ++checked;
            }
    CHECK(checked == 4 * 4 * 3);
}

TEST_CASE("cpu fast mul_mat_id: K-quant experts at every level, against the reference kernel",
          "[cpu][mul_mat_id][fast][kquant]") {
    struct shape {
        i64 k, n_expert, n_used, n_tokens;
    };
    // one token (decode); a few columns per expert (mat-vec tiles); expert 0 with 8 or more
    // (the panel kernel), with more than one chunk of 256 in the last
    const shape shapes[] = {{256, 2, 1, 1}, {512, 8, 4, 1}, {256, 6, 2, 5}, {512, 4, 3, 24}, {256, 3, 2, 300}};
    std::mt19937 rng(20261127);
    context ctx;
    int checked = 0;
    for (elem_type ta : {elem_type::q2_K, elem_type::q3_K, elem_type::q4_K, elem_type::q5_K, elem_type::q6_K})
        for (const shape& sh : shapes) {
            const i64 m = 5 + 9 * sh.n_used;
            const i64 b1 = sh.n_tokens % 2 == 1 ? 1 : sh.n_used;
            tensor* as = conformance::random_leaf(ctx, ta, {sh.k, m, sh.n_expert, 1}, rng);
            tensor* b = conformance::random_leaf(ctx, elem_type::f32, {sh.k, b1, sh.n_tokens, 1}, rng);
            tensor* ids = ctx.new_tensor_2d(elem_type::i32, sh.n_used, sh.n_tokens);
            fill_uneven_ids(*ids, sh.n_expert, rng);
            tensor* out = mul_mat_id(ctx, as, b, ids);
            INFO(to_string(ta) << " experts [" << sh.k << ", " << m << ", " << sh.n_expert << "], n_used "
                               << sh.n_used << ", tokens " << sh.n_tokens << ", b.ne1 " << b1);
            REQUIRE(cpu::choose_kernel(*out, false) == cpu::kernel_kind::fast_mul_mat_id);
            const std::vector<float> want = run(out, {.n_threads = 1, .reference = true});
            for (int l = 0; l <= static_cast<int>(cpu::detected_isa()); ++l) {
                const isa_cap cap(static_cast<cpu::isa>(l));
                for (const int n_threads : {1, 2, 3}) {
                    INFO("level " << cpu::to_string(cpu::active_isa()) << ", " << n_threads << " threads");
                    split_everything split;
                    const std::vector<float> got = run(out, {.n_threads = n_threads});
                    CHECK(worst_column_nmse(want, got, m) <= conformance::threshold_for(*out).max_nmse);
                    // as dense mul_mats of each expert's columns: the same b quantization,
                    // only the order of f32 additions may differ
                    CHECK(worst_column_nmse(dense_result(ctx, as, b, *ids, {.n_threads = n_threads}), got, m) <= 1e-10);
                }
            }
            ++checked;
        }
    CHECK(checked == 5 * 5);
}

TEST_CASE("cpu fast mul_mat_id: an id out of range gives a zero column and out_of_range",
          "[cpu][mul_mat_id][fast]") {
    std::mt19937 rng(7);
    context ctx;
    for (elem_type ta : {elem_type::q8_0, elem_type::q4_K}) {
        const i64 k = ta == elem_type::q8_0 ? 64 : 256;
        tensor* as = conformance::random_leaf(ctx, ta, {k, 12, 4, 1}, rng);
        tensor* b = conformance::random_leaf(ctx, elem_type::f32, {k, 1, 3, 1}, rng);
        tensor* ids = ctx.new_tensor_2d(elem_type::i32, 2, 3);
        const std::vector<std::int32_t> vi = {0, 3, 4, 1, -2, 2};
        REQUIRE(tensor_set(*ids, vi.data(), 0, vi.size() * sizeof(std::int32_t)));
        tensor* out = mul_mat_id(ctx, as, b, ids);
        out->name = "moe";
        REQUIRE(cpu::choose_kernel(*out, false) == cpu::kernel_kind::fast_mul_mat_id);
        for (const int n_threads : {1, 2}) {
            INFO(to_string(ta) << " experts, " << n_threads << " threads");
            split_everything split;
            cpu_backend backend({.n_threads = n_threads});
            const status st = backend.compute(graph(out));
            CHECK(st.code() == errc::out_of_range);
            CHECK_THAT(std::string(st.message()), Catch::Contains("mul_mat_id") && Catch::Contains("moe"));
            const std::vector<float> got = tensor_get_all<float>(*out).value();
            for (i64 r = 0; r < 12; ++r) {
                CHECK(got[static_cast<std::size_t>(12 * 2 + r)] == 0.0f); // column (0, 1): expert 4 of 4
                CHECK(got[static_cast<std::size_t>(12 * 4 + r)] == 0.0f); // column (0, 2): expert -2
            }
        }
    }
}
