#pragma once
// flash_attn_ext (flash_attn.comp): one workgroup per query row. The shader reads k and
// v of every type the op allows (f32, f16, bf16, q8_0, q4_0, each its own) by a type code
// and needs 16-bit storage (16-bit words of k and v, the f16 mask); head sizes up to
// max_head (the q row and the accumulator live in shared memory, 8.5 KiB in all). The push constants do
// not follow common.glsl's meaning of each field: flash_attn.comp lists what each holds.

#include <backplane/backends/vulkan/ops/common.hpp>
#include <backplane/core/alibi.hpp>
#include <backplane/core/tensor.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>

namespace backplane::vulkan::detail {

namespace attention_detail {

/// flash_attn.comp's MAX_D: the longest q row (D_k) and value row (D_v); its WG.
inline constexpr std::int64_t max_head = 1024;
inline constexpr std::uint32_t workgroup = 64;
/// Its shared memory: the q row, the accumulator, a chunk's weights and a reduction.
inline constexpr std::size_t shared_bytes = (2 * max_head + 2 * workgroup) * sizeof(float);

/// The shader's code of a k or v type (flash_attn.comp's TYPE_*): its real_index.
inline std::uint32_t type_code(elem_type t) noexcept { return static_cast<std::uint32_t>(real_index(t)); }

/// nb.w: the types of k and v, whether there are a mask, sinks and ALiBi.
inline std::uint32_t flags_of(const tensor& t, bool alibi) noexcept {
    return type_code(t.src[1]->type) | type_code(t.src[2]->type) << 4 | (t.src[3] != nullptr ? 1u << 8 : 0u) |
           (t.src[4] != nullptr ? 1u << 9 : 0u) | (alibi ? 1u << 10 : 0u);
}

/// scale (divided by the softcap, as the CPU does), softcap and ALiBi's m0, m1.
inline void parameters(const tensor& t, bool alibi, push_constants& pc) noexcept {
    const float softcap = t.param<float>(2);
    const float scale = t.param<float>(0);
    pc.prm[0] = float_bits(softcap != 0.0f ? scale / softcap : scale);
    pc.prm[1] = float_bits(softcap);
    if (alibi) {
        const alibi::terms terms = alibi::terms_of(t.param<float>(1), static_cast<int>(t.src[0]->ne[2]));
        pc.prm[2] = float_bits(terms.m0);
        pc.prm[3] = float_bits(terms.m1);
    }
}

} // namespace attention_detail

inline bool plan_flash_attn(const tensor& t, const features& f, dispatch& d) noexcept {
    using namespace attention_detail;
    const tensor* q = t.src[0];
    const tensor* k = t.src[1];
    const tensor* v = t.src[2];
    if (q == nullptr || k == nullptr || v == nullptr || !f.storage16 || !t.is_contiguous()) return false;
    if (f.shared_memory < shared_bytes || f.max_invocations < workgroup) return false;
    if (real_index(k->type) < 0 || real_index(v->type) < 0) return false;
    if (q->ne[0] > max_head || v->ne[0] > max_head) return false;
    std::array<std::uint32_t, 4> qne{}, qnb{}, kne{}, knb{}, vne{}, vnb{};
    if (!shape32(*q, qne, qnb) || !shape32(*k, kne, knb) || !shape32(*v, vne, vnb)) return false;
    push_constants& pc = d.pc;
    pc = {};
    pc.a_ne = qne;
    pc.a_nb = {0, qnb[1], qnb[2], qnb[3]}; // x: the mask's offset (the backend's)
    const tensor* sinks = t.src[4];
    const std::uint32_t sink_stride =
        sinks == nullptr ? 0 : std::max<std::uint32_t>(1, static_cast<std::uint32_t>(sinks->nb[0] / sizeof(float)));
    pc.b_ne = {sink_stride, kne[1], kne[2], kne[3]};
    pc.b_nb = {0, knb[1], knb[2], knb[3]}; // x: the sinks' offset (the backend's)
    pc.ne = {vne[0], vnb[1], vnb[2], vnb[3]};
    if (const tensor* mask = t.src[3])
        pc.nb = {static_cast<std::uint32_t>(mask->ne[1]), static_cast<std::uint32_t>(mask->ne[2]),
                 static_cast<std::uint32_t>(mask->ne[3]), 0};
    else
        pc.nb = {1, 1, 1, 0};
    const bool alibi = t.src[3] != nullptr && t.param<float>(1) > 0.0f;
    pc.nb[3] = flags_of(t, alibi);
    parameters(t, alibi, pc);
    d.shader = "flash_attn_64";
    d.groups = groups_per_item(static_cast<std::uint64_t>(q->ne[1] * q->ne[2] * q->ne[3]));
    return true;
}

} // namespace backplane::vulkan::detail
