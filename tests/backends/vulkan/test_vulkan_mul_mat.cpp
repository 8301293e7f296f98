// mul_mat on the Vulkan backend, kernel by kernel: the parity suite's shapes (M <= 65,
// N <= 33) all go to the mat-vec kernel, so this file adds shapes that reach the tiled
// (128 x 128) and narrow (128 x 32) kernels too, each with rows read as vectors and
// element by element, for every weight and activation type, with broadcasting, and
// grids of more than 65535 workgroups. Compared with the CPU reference kernels like the
// parity suite; every validation-layer message fails the test.

#include <backplane/backends/vulkan.hpp>

#include "../../support/device_mirror.hpp"
#include "../../support/parity_suite.hpp"
#include "vulkan_targets.hpp"
#include "../../support/vulkan_test_support.hpp" // the validation layer is on (before main)

#include <cstdlib>
#include <memory>

using namespace parity;

namespace {

} // namespace

TEST_CASE("vulkan mul_mat: every kernel, both ways of reading rows, every type pair", "[vulkan][mul_mat]") {
    auto t = vulkan_targets();
    if (t.empty()) return;
    parity_suite ps(31106, std::move(t));
    auto& h = ps.h;
    struct shape {
        i64 k, m, n, a2, a3, r2, r3;
        layout la, lb;
    };
    for (elem_type ta : {f32, f16, bf16, q8_0, q4_0})
        for (elem_type tb : {f32, f16, bf16}) {
            if (!ps.claimed([&] { return mul_mat(h.ctx, h.leaf(ta, {32, 2, 1, 1}), h.leaf(tb, {32, 3, 1, 1})); }))
                continue;
            const bool q = is_quantized(ta);
            const shape shapes[] = {
                // mat-vec: vectors, a at an odd offset, element loads, few rows, many columns
                {256, 37, 1, 2, 1, 2, 1, layout::contiguous, layout::contiguous},
                {q ? 96 : 100, 9, 3, 1, 2, 1, 2, layout::offset, layout::contiguous},
                {q ? 64 : 67, 13, 2, 2, 1, 1, 3, layout::strided_rows, layout::transposed},
                {q ? 32 : 8, 3, 300, 1, 1, 1, 1, layout::contiguous, layout::transposed},
                // narrow: vectors, b at an odd offset
                {q ? 64 : 68, 400, 40, 1, 1, 1, 2, layout::contiguous, layout::contiguous},
                {q ? 64 : 65, 390, 30, 2, 1, 1, 1, layout::strided_rows, layout::offset},
                // tiled: vectors, element loads, one column of blocks
                {160, 200, 150, 1, 1, 2, 1, layout::contiguous, layout::contiguous},
                {q ? 96 : 67, 131, 129, 1, 2, 1, 1, layout::permuted, layout::strided_elems},
                {q ? 32 : 20, 129, 70, 1, 1, 1, 1, layout::contiguous, layout::contiguous},
            };
            for (const shape& s : shapes) {
                tensor* a = h.input(ta, {s.k, s.m, s.a2, s.a3}, s.la);
                tensor* b = h.input(tb, {s.k, s.n, s.a2 * s.r2, s.a3 * s.r3}, s.lb);
                ps.add(mul_mat(h.ctx, a, b), describe("mul_mat", {{"a", a}, {"b", b}}), ta == f32 ? 1e-7 : 5e-4);
            }
        }
    // more than 65535 workgroups (the grid spreads over y), by batches; tiled blocks of
    // many batches, a broadcast over them
    tensor* a = h.input(f32, {8, 4, 70000, 1}, layout::contiguous);
    tensor* b = h.input(f32, {8, 1, 70000, 1}, layout::contiguous);
    ps.add(mul_mat(h.ctx, a, b), describe("mul_mat", {{"a", a}, {"b", b}}));
    tensor* qa = h.input(q8_0, {32, 100, 1, 2}, layout::contiguous);
    tensor* qb = h.input(f32, {32, 130, 5, 8}, layout::contiguous);
    ps.add(mul_mat(h.ctx, qa, qb), describe("mul_mat", {{"a", qa}, {"b", qb}}), 5e-4);
    ps.run();
    CHECK(vulkan::validation_message_count() == 0);
}
