// The op table (core/op_traits.hpp) against what the graph builders make: every op_kind
// has its row, and every node a builder returns has a source count within the row's
// arity, parameters only in the slots the row names, and memory of its own exactly when
// the row says it computes.

#include <backplane/core/context.hpp>
#include <backplane/core/op_traits.hpp>
#include <backplane/core/ops.hpp>

#include <catch2/catch.hpp>

#include <cstddef>
#include <set>
#include <string>
#include <vector>

using namespace backplane;

namespace {

/// One node of every op kind but none, built the way a user builds them.
std::vector<tensor*> one_of_each(context& ctx) {
    tensor* a = ctx.new_tensor_2d(elem_type::f32, 64, 8);
    tensor* b = ctx.new_tensor_2d(elem_type::f32, 64, 8);
    tensor* w = ctx.new_tensor_2d(elem_type::f32, 64, 16);
    tensor* idx = ctx.new_tensor_1d(elem_type::i32, 3);
    tensor* pos = ctx.new_tensor_1d(elem_type::i32, 8);
    tensor* a3 = ctx.new_tensor_3d(elem_type::f32, 64, 2, 8);
    tensor* mask = ctx.new_tensor_2d(elem_type::f32, 64, 8);
    tensor* sinks = ctx.new_tensor_1d(elem_type::f32, 1);
    tensor* pos4 = ctx.new_tensor_1d(elem_type::i32, 32);
    tensor* ff = ctx.new_tensor_1d(elem_type::f32, 32);
    return {
        dup(ctx, a),
        cpy(ctx, a, b),
        cont(ctx, transpose(ctx, a)),
        view(ctx, a, {32, 8, 1, 1}, a->nb, 0),
        reshape(ctx, a, {8, 64}),
        permute(ctx, a3, 1, 0, 2, 3),
        transpose(ctx, a),
        add(ctx, a, b),
        sub(ctx, a, b),
        mul(ctx, a, b),
        backplane::div(ctx, a, b),
        scale(ctx, a, 0.5f, 0.25f),
        sqr(ctx, a),
        backplane::sqrt(ctx, a),
        sum_rows(ctx, a),
        mul_mat(ctx, w, a),
        get_rows(ctx, a, idx),
        rms_norm(ctx, a, 1e-5f),
        norm(ctx, a, 1e-5f),
        soft_max(ctx, a, mask, 0.125f),
        soft_max_add_sinks(soft_max_ext(ctx, a, mask, 0.125f, 8.0f), sinks), // every source and parameter
        rope(ctx, a3, pos, 64),
        rope_multi(ctx, a3, pos4, ff, 64, {8, 12, 12, 0}, rope_mode::imrope, 4096, 10000.0f, 0.5f, 1.0f, 1.0f, 32.0f, 1.0f),
        silu(ctx, a),
        gelu(ctx, a),
        relu(ctx, a),
        concat(ctx, a, b, 1),
        argmax(ctx, a),
        neg(ctx, a),
        backplane::abs(ctx, a),
        sgn(ctx, a),
        step(ctx, a),
        backplane::tanh(ctx, a),
        sigmoid(ctx, a),
        backplane::exp(ctx, a),
        backplane::log(ctx, a),
        backplane::sin(ctx, a),
        backplane::cos(ctx, a),
        elu(ctx, a),
        hardsigmoid(ctx, a),
        hardswish(ctx, a),
        softplus(ctx, a),
        gelu_erf(ctx, a),
        gelu_quick(ctx, a),
        leaky_relu(ctx, a, 0.125f),
        clamp(ctx, a, -1.0f, 2.0f),
        swiglu(ctx, a),
        sum(ctx, a),
        mean(ctx, a),
        argsort(ctx, a, sort_order::desc),
        top_k(ctx, a, 4),
        set_rows(ctx, b, ctx.new_tensor_2d(elem_type::f32, 64, 3), ctx.new_tensor_1d(elem_type::i64, 3)),
        pad_ext(ctx, a, {.lp = {1, 0, 0, 0}, .rp = {2, 3, 1, 1}}, true),
        arange(ctx, 0.0f, 8.0f, 0.5f),
        mul_mat_id(ctx, ctx.new_tensor_3d(elem_type::q8_0, 64, 16, 4), ctx.new_tensor_3d(elem_type::f32, 64, 1, 5),
                   ctx.new_tensor_2d(elem_type::i32, 2, 5)),
        add_id(ctx, ctx.new_tensor_3d(elem_type::f32, 64, 2, 5), ctx.new_tensor_2d(elem_type::f32, 64, 4),
               ctx.new_tensor_2d(elem_type::i32, 2, 5)),
        flash_attn_ext_add_sinks(flash_attn_ext(ctx, ctx.new_tensor_3d(elem_type::f32, 64, 2, 4), // every source and parameter
                                                ctx.new_tensor_3d(elem_type::f16, 64, 8, 2),
                                                ctx.new_tensor_3d(elem_type::q8_0, 32, 8, 2),
                                                ctx.new_tensor_2d(elem_type::f16, 8, 2), 0.125f, 8.0f, 30.0f),
                                 ctx.new_tensor_1d(elem_type::f32, 4)),
        group_norm(ctx, a3, 4, 1e-5f),
        l2_norm(ctx, a, 1e-6f),
        repeat_4d(ctx, a, 128, 8, 2, 3),
        repeat_back(ctx, a, ctx.new_tensor_2d(elem_type::f32, 32, 4)),
        cumsum(ctx, a),
        tri(ctx, ctx.new_tensor_3d(elem_type::f32, 8, 8, 2), tri_type::lower),
        diag(ctx, ctx.new_tensor_3d(elem_type::f32, 8, 1, 2)),
        timestep_embedding(ctx, ctx.new_tensor_1d(elem_type::f32, 4), 9, 1000),
        ssm_conv(ctx, ctx.new_tensor_3d(elem_type::f32, 7, 6, 2), ctx.new_tensor_2d(elem_type::f32, 4, 6)),
        ssm_scan(ctx, ctx.new_tensor_4d(elem_type::f32, 16, 4, 6, 3), ctx.new_tensor_4d(elem_type::f32, 4, 6, 5, 2),
                 ctx.new_tensor_3d(elem_type::f32, 6, 5, 2), ctx.new_tensor_2d(elem_type::f32, 1, 6),
                 ctx.new_tensor_4d(elem_type::f32, 16, 2, 5, 2), ctx.new_tensor_4d(elem_type::f32, 16, 2, 5, 2),
                 ctx.new_tensor_1d(elem_type::i32, 2)),
        gated_linear_attn(ctx, ctx.new_tensor_3d(elem_type::f32, 8, 2, 6), ctx.new_tensor_3d(elem_type::f32, 8, 2, 6),
                          ctx.new_tensor_3d(elem_type::f32, 8, 2, 6), ctx.new_tensor_3d(elem_type::f32, 8, 2, 6),
                          ctx.new_tensor_2d(elem_type::f32, 8 * 8 * 2, 3), 0.5f),
        rwkv_wkv6(ctx, ctx.new_tensor_3d(elem_type::f32, 8, 2, 6), ctx.new_tensor_3d(elem_type::f32, 8, 2, 6),
                  ctx.new_tensor_3d(elem_type::f32, 8, 2, 6), ctx.new_tensor_2d(elem_type::f32, 8, 2),
                  ctx.new_tensor_3d(elem_type::f32, 8, 2, 6), ctx.new_tensor_2d(elem_type::f32, 8 * 8 * 2, 3)),
        rwkv_wkv7(ctx, ctx.new_tensor_3d(elem_type::f32, 8, 2, 6), ctx.new_tensor_3d(elem_type::f32, 8, 2, 6),
                  ctx.new_tensor_3d(elem_type::f32, 8, 2, 6), ctx.new_tensor_3d(elem_type::f32, 8, 2, 6),
                  ctx.new_tensor_3d(elem_type::f32, 8, 2, 6), ctx.new_tensor_3d(elem_type::f32, 8, 2, 6),
                  ctx.new_tensor_2d(elem_type::f32, 8 * 8 * 2, 3)),
        out_prod(ctx, ctx.new_tensor_3d(elem_type::q8_0, 64, 8, 2), ctx.new_tensor_3d(elem_type::f32, 5, 8, 4)),
        im2col(ctx, ctx.new_tensor_4d(elem_type::f16, 3, 3, 2, 4), ctx.new_tensor_4d(elem_type::f32, 8, 6, 2, 2), 1, 2,
               1, 0, 1, 2, true, elem_type::f16),
        conv_2d_direct(ctx, ctx.new_tensor_4d(elem_type::f16, 3, 3, 2, 4), ctx.new_tensor_4d(elem_type::f32, 8, 6, 2, 2), 2,
                       1, 1, 0, 1, 2),
        pool_1d(ctx, a, pool_op::avg, 3, 2, 1),
        pool_2d(ctx, a, pool_op::max, 3, 2, 2, 1, 1, 0),
        interpolate(ctx, a, 32, 17, 2, 1, static_cast<std::uint32_t>(scale_mode::bicubic) | scale_align_corners),
        pad_reflect_1d(ctx, a, 3, 5),
        roll(ctx, a, -3, 7),
        count_equal(ctx, ctx.new_tensor_2d(elem_type::i32, 6, 2), ctx.new_tensor_2d(elem_type::i32, 6, 2)),
        acc(ctx, a, ctx.new_tensor_2d(elem_type::f32, 8, 2), 256, 512, 512, 4),
        conv_transpose_1d(ctx, ctx.new_tensor_3d(elem_type::f16, 3, 4, 2), ctx.new_tensor_2d(elem_type::f32, 7, 2), 2),
        conv_2d_dw_direct(ctx, ctx.new_tensor_4d(elem_type::f32, 3, 3, 1, 4), ctx.new_tensor_4d(elem_type::f32, 8, 6, 4, 2), 2, 1,
                          1, 0, 1, 2),
        win_part(ctx, ctx.new_tensor_3d(elem_type::f32, 8, 7, 5), 3),
        win_unpart(ctx, ctx.new_tensor_4d(elem_type::f32, 8, 3, 3, 6), 7, 5, 3),
        get_rel_pos(ctx, ctx.new_tensor_2d(elem_type::f16, 8, 9), 5, 5),
        conv_transpose_2d_p0(ctx, ctx.new_tensor_4d(elem_type::f32, 3, 2, 4, 2), ctx.new_tensor_4d(elem_type::f32, 5, 4, 2, 2), 2),
    };
}

} // namespace

TEST_CASE("op table: one row per op kind, names unique, unknown values answered", "[unit][ops]") {
    std::set<std::string> names;
    for (std::size_t i = 0; i < op_kind_count; ++i) {
        const auto op = static_cast<op_kind>(i);
        const op_traits& t = traits(op);
        CHECK(to_string(op) == t.name);
        CHECK(t.min_srcs <= t.max_srcs);
        CHECK(t.max_srcs <= max_srcs);
        CHECK(t.n_params <= max_op_params);
        if (t.view) CHECK(t.family == op_family::none);
        if (t.inplace) CHECK((t.family == op_family::elementwise || t.family == op_family::rows));
        names.insert(std::string(t.name));
    }
    CHECK(names.size() == op_kind_count);
    const auto bad = static_cast<op_kind>(op_kind_count + 3);
    CHECK_FALSE(is_valid(bad));
    CHECK(to_string(bad) == "?");
    CHECK_FALSE(is_view_op(bad));
    CHECK_FALSE(is_elementwise(bad));
}

TEST_CASE("op table: an element-wise op is binary, unary or gated by its sources", "[unit][ops]") {
    int binary = 0, unary = 0, gated = 0;
    for (std::size_t i = 0; i < op_kind_count; ++i) {
        const auto op = static_cast<op_kind>(i);
        const op_traits& t = traits(op);
        INFO(t.name);
        CHECK(is_elementwise(op) == (t.family == op_family::elementwise));
        CHECK(is_binary_elementwise(op) == (is_elementwise(op) && t.min_srcs == 2));
        CHECK(is_unary_elementwise(op) == (is_elementwise(op) && t.max_srcs == 1));
        CHECK(is_gated_elementwise(op) == (is_elementwise(op) && t.min_srcs == 1 && t.max_srcs == 2));
        // exactly one of the three routes
        CHECK(is_elementwise(op) ==
              (int(is_binary_elementwise(op)) + int(is_unary_elementwise(op)) + int(is_gated_elementwise(op)) == 1));
        binary += is_binary_elementwise(op) ? 1 : 0;
        unary += is_unary_elementwise(op) ? 1 : 0;
        gated += is_gated_elementwise(op) ? 1 : 0;
    }
    CHECK(binary == 4); // add, sub, mul, div
    CHECK(unary == 24); // scale, sqr, sqrt, silu, gelu, relu, neg and the 17 functions of core/unary_functions.hpp
    CHECK(gated == 1);  // glu
    static_assert(is_binary_elementwise(op_kind::div) && is_unary_elementwise(op_kind::neg));
    static_assert(!is_elementwise(op_kind::soft_max) && !is_elementwise(op_kind::view));
}

TEST_CASE("op table: every builder's node has the arity, parameters and memory its row says", "[unit][ops]") {
    context ctx;
    const auto nodes = one_of_each(ctx);
    std::set<op_kind> seen;
    for (const tensor* n : nodes) {
        const op_traits& t = traits(n->op);
        INFO(t.name);
        seen.insert(n->op);
        std::size_t set = 0;
        for (std::size_t j = 0; j < max_srcs; ++j) {
            if (n->src[j] == nullptr) continue;
            ++set;
            CHECK(j < t.max_srcs); // no source past the row's last
        }
        CHECK(set >= t.min_srcs);
        for (std::size_t j = 0; j < t.min_srcs; ++j) CHECK(n->src[j] != nullptr);
        for (std::size_t k = t.n_params; k < max_op_params; ++k) CHECK(n->op_params[k] == 0);
        // a view (and cpy and set_rows, which write their destination) aliases memory; an
        // op that computes into memory of its own does not
        const bool aliases = n->view_src != nullptr;
        CHECK(aliases == (t.view || n->op == op_kind::cpy || n->op == op_kind::set_rows));
    }
    CHECK(seen.size() == op_kind_count - 1); // every kind but none
}
