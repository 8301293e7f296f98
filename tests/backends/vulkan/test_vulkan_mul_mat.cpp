// mul_mat on the Vulkan backend, kernel by kernel: the parity cases' shapes (M <= 65,
// N <= 33) all go to the mat-vec kernel, so this file adds shapes that reach the tiled
// (128 x 128) and narrow (128 x 32) kernels too, each with rows read as vectors and
// element by element, for every weight type (the quantized ones' rows whole blocks: 256
// values and more for the K-quants) and activation type, with broadcasting, and grids
// of more than 65535 workgroups. Compared with the CPU reference kernels in one
// batch, like the parity cases (conformance/batch.hpp); every validation-layer message
// fails the test.
//
// Each type pair is a pipeline per kernel and way of reading rows, compiled by lavapipe at
// its first dispatch (3 to 10 s each from a cold cache, the K-quants' tiled kernels the
// longest): the first case takes one type pair in eighteen, rotated by the build's commit
// (BACKPLANE_TEST_ROTATION; every kernel in every run, every pair in eighteen successive
// commits; each weight type's rows also go through the mat-vec kernel in the parity cases
// of every run), the second, "(every combination)" (label full, not in the test command),
// every pair.

#include "vulkan_targets.hpp"

#include <backplane/conformance/batch.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <utility>

namespace {

void check_every_kernel(parity::sweep part) {
    using namespace backplane;
    namespace cf = backplane::conformance;
    using cf::layout;
    using elem_type::f32, elem_type::f16, elem_type::bf16, elem_type::q8_0, elem_type::q4_0;
    using i64 = std::int64_t;
    parity::target_list list = parity::open_vulkan_targets();
    if (list.targets.empty()) {
        WARN("Vulkan mul_mat skipped: " << list.absent);
        return;
    }
    cf::batch cases(31106, std::move(list.targets));
    const int rotation = parity::test_rotation();
    if (part == parity::sweep::sample)
        cases.sample(18, rotation, parity::sanitized_thin); // the type pairs, activation type fastest
    INFO("rotation " << rotation << " (BACKPLANE_TEST_ROTATION=" << rotation << " repeats it)");
    struct shape {
        i64 k, m, n, a2, a3, r2, r3;
        layout la, lb;
    };
    for (elem_type ta : all_elem_types)
        for (elem_type tb : {f32, f16, bf16}) {
            const i64 bs = block_size(ta), w = bs > 32 ? bs : 32;
            if (!cases.claimed([&] { return mul_mat(cases.ctx, cases.leaf(ta, {w, 2, 1, 1}), cases.leaf(tb, {w, 3, 1, 1})); }))
                continue;
            cases.combination();
            const bool q = is_quantized(ta);
            // k for a quantized a: whole blocks, at least k values
            const auto qk = [bs](i64 k) { return (k + bs - 1) / bs * bs; };
            const shape shapes[] = {
                // mat-vec: vectors, a at an odd offset, element loads, few rows, many columns
                {qk(256), 37, 1, 2, 1, 2, 1, layout::contiguous, layout::contiguous},
                {q ? qk(96) : 100, 9, 3, 1, 2, 1, 2, layout::offset, layout::contiguous},
                {q ? qk(64) : 67, 13, 2, 2, 1, 1, 3, layout::strided_rows, layout::transposed},
                {q ? qk(32) : 8, 3, 300, 1, 1, 1, 1, layout::contiguous, layout::transposed},
                // narrow: vectors, b at an odd offset
                {q ? qk(64) : 68, 400, 40, 1, 1, 1, 2, layout::contiguous, layout::contiguous},
                {q ? qk(64) : 65, 390, 30, 2, 1, 1, 1, layout::strided_rows, layout::offset},
                // tiled: vectors, element loads, one column of blocks
                {q ? qk(160) : 160, 200, 150, 1, 1, 2, 1, layout::contiguous, layout::contiguous},
                {q ? qk(96) : 67, 131, 129, 1, 2, 1, 1, layout::permuted, layout::strided_elems},
                {q ? qk(32) : 20, 129, 70, 1, 1, 1, 1, layout::contiguous, layout::contiguous},
            };
            for (const shape& s : shapes) {
                tensor* a = cases.input(ta, {s.k, s.m, s.a2, s.a3}, s.la);
                tensor* b = cases.input(tb, {s.k, s.n, s.a2 * s.r2, s.a3 * s.r3}, s.lb);
                cases.add(mul_mat(cases.ctx, a, b));
            }
        }
    // more than 65535 workgroups (the grid spreads over y), by batches; tiled blocks of
    // many batches, a broadcast over them (in every run)
    cases.sample(1, 0);
    cases.combination();
    tensor* a = cases.input(f32, {8, 4, 70000, 1}, layout::contiguous);
    tensor* b = cases.input(f32, {8, 1, 70000, 1}, layout::contiguous);
    cases.add(mul_mat(cases.ctx, a, b));
    tensor* qa = cases.input(q8_0, {32, 100, 1, 2}, layout::contiguous);
    tensor* qb = cases.input(f32, {32, 130, 5, 8}, layout::contiguous);
    cases.add(mul_mat(cases.ctx, qa, qb));
    parity::check_report(cases.run());
    test::check_validation();
}

} // namespace

TEST_CASE("vulkan mul_mat: every kernel, both ways of reading rows, a rotation of type pairs", "[vulkan][mul_mat]") {
    check_every_kernel(parity::sweep::sample);
}

TEST_CASE("vulkan mul_mat: every kernel, both ways of reading rows (every combination)", "[vulkan][mul_mat][full]") {
    check_every_kernel(parity::sweep::full);
}
