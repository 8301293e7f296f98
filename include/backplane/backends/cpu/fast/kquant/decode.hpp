#pragma once
// A weight super-block of any K-quant type in one common form, in plain C++: 256 unsigned
// codes in value order, an integer scale per sub-block and (minimum types) an integer
// minimum, and the super-block's f32 scales. Every type's value is then
//
//   value[e] = d * sc[j] * (q[e] - c) - dmin * m[j]      (j = e / sub; see type_traits)
//
// with c = 0 and m = 0 where the type has none. Used by the portable kernel (it is exact,
// not fast: the vector kernels decode in registers, decode_avx2.hpp).

#include <backplane/backends/cpu/fast/kquant/plan.hpp>
#include <backplane/core/kquants.hpp>
#include <backplane/core/types.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace backplane::cpu::fast::kquant {

struct unpacked {
    std::uint8_t q[qk_k];   ///< codes, 0 .. 63 at most
    std::int32_t sc[16];    ///< per sub-block (8 or 16 used)
    std::int32_t m[16];     ///< minimums, per sub-block (minimum types)
    float d = 0, dmin = 0;
};

namespace decode_detail {

inline void unpack(const block_q2_K& b, unpacked& u) noexcept {
    for (int e = 0; e < qk_k; ++e) u.q[e] = static_cast<std::uint8_t>(kquant_detail::code_2bit(b.qs, e));
    for (int j = 0; j < 16; ++j) {
        u.sc[j] = b.scales[j] & 15;
        u.m[j] = b.scales[j] >> 4;
    }
    u.d = f16_to_f32(b.d);
    u.dmin = f16_to_f32(b.dmin);
}

inline void unpack(const block_q3_K& b, unpacked& u) noexcept {
    for (int e = 0; e < qk_k; ++e)
        u.q[e] = static_cast<std::uint8_t>(kquant_detail::code_2bit(b.qs, e) + 4 * ((b.hmask[e % 32] >> (e / 32)) & 1));
    for (int j = 0; j < 16; ++j) {
        u.sc[j] = kquant_detail::q3_scale(b.scales, j);
        u.m[j] = 0;
    }
    u.d = f16_to_f32(b.d);
}

/// q4_K and q5_K: sub-block j (32 values) in the low (j even) or high nibbles of
/// qs[32 * (j / 2) ...], q5_K's fifth bit j in qh.
template <class Block> void unpack_scale_min(const Block& b, unpacked& u) noexcept {
    for (int j = 0; j < 8; ++j) {
        std::uint8_t s, m;
        kquant_detail::scale_min(j, b.scales, s, m);
        u.sc[j] = s;
        u.m[j] = m;
        const std::uint8_t* q = b.qs + 32 * (j / 2);
        for (int l = 0; l < 32; ++l) {
            int v = j % 2 ? q[l] >> 4 : q[l] & 15;
            if constexpr (requires { b.qh; }) v += 16 * ((b.qh[l] >> j) & 1);
            u.q[32 * j + l] = static_cast<std::uint8_t>(v);
        }
    }
    u.d = f16_to_f32(b.d);
    u.dmin = f16_to_f32(b.dmin);
}
inline void unpack(const block_q4_K& b, unpacked& u) noexcept { unpack_scale_min(b, u); }
inline void unpack(const block_q5_K& b, unpacked& u) noexcept { unpack_scale_min(b, u); }

inline void unpack(const block_q6_K& b, unpacked& u) noexcept {
    for (int e = 0; e < qk_k; ++e) {
        const int h = e / 128, r = e % 128, l = r % 32, part = r / 32;
        const std::uint8_t lo = b.ql[64 * h + 32 * (part % 2) + l];
        u.q[e] = static_cast<std::uint8_t>((part < 2 ? lo & 15 : lo >> 4) | (((b.qh[32 * h + l] >> (2 * part)) & 3) << 4));
    }
    for (int j = 0; j < 16; ++j) {
        u.sc[j] = b.scales[j];
        u.m[j] = 0;
    }
    u.d = f16_to_f32(b.d);
}

template <class Block> void unpack_at(const std::byte* p, unpacked& u) noexcept {
    Block b; // a copy: weight rows need not be aligned
    std::memcpy(&b, p, sizeof b);
    unpack(b, u);
}

} // namespace decode_detail

/// The super-block at p (type t, any alignment) in common form.
inline void unpack_block(elem_type t, const std::byte* p, unpacked& u) noexcept {
    switch (t) {
    case elem_type::q2_K: return decode_detail::unpack_at<block_q2_K>(p, u);
    case elem_type::q3_K: return decode_detail::unpack_at<block_q3_K>(p, u);
    case elem_type::q4_K: return decode_detail::unpack_at<block_q4_K>(p, u);
    case elem_type::q5_K: return decode_detail::unpack_at<block_q5_K>(p, u);
    default: return decode_detail::unpack_at<block_q6_K>(p, u);
    }
}

} // namespace backplane::cpu::fast::kquant
