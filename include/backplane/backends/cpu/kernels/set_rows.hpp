#pragma once
// set_rows: row (n, j, k) of b is written, converted to the destination's type, over row
// idx[n, j % I2, k % I3] of matrix (j, k) of the destination (the node, whose memory is
// src[2]'s). Rows of the same type are copied byte for byte; others go through f32 in
// chunks, quantized destinations through core's quantize_row_* one block at a time. The
// threads split b's rows. An index outside the destination's rows writes nothing and
// makes the kernel return false (errc::out_of_range).

#include <backplane/backends/cpu/kernels/common.hpp>

#include <algorithm>
#include <cstring>

namespace backplane::cpu::kernels {

namespace detail {

/// Element i of an i32 or i64 index tensor at byte address p.
[[nodiscard]] inline i64 load_index(elem_type t, const std::byte* p) noexcept {
    if (t == elem_type::i32) return load_i32(p);
    std::int64_t v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

/// Copies n bytes (a row of the same type): the one-element rows of a transposed value
/// cache (2 or 4 bytes, written once per channel and token) without a call.
inline void copy_row_bytes(std::byte* out, const std::byte* src, std::size_t n) noexcept {
    switch (n) {
    case 2: std::memcpy(out, src, 2); return;
    case 4: std::memcpy(out, src, 4); return;
    default: std::memcpy(out, src, n); return;
    }
}

/// Writes row `src` (type of b, unit stride b.nb[0]) over row `dst` of dst's type.
inline void write_converted_row(const tensor& b, const std::byte* src, tensor& dst, std::byte* out) noexcept {
    const i64 E = b.ne[0];
    if (b.type == dst.type) {
        const std::size_t ts = type_size(b.type);
        if (b.nb[0] == ts && dst.nb[0] == ts) {
            copy_row_bytes(out, src, static_cast<std::size_t>(E) * ts);
            return;
        }
        for (i64 i = 0; i < E; ++i)
            std::memcpy(out + static_cast<std::size_t>(i) * dst.nb[0], src + static_cast<std::size_t>(i) * b.nb[0], ts);
        return;
    }
    constexpr i64 chunk = row_chunk;
    float buf[chunk];
    for (i64 c0 = 0; c0 < E; c0 += chunk) {
        const i64 len = std::min(chunk, E - c0);
        read_row_f32(b.type, src, b.nb[0], c0, len, buf);
        write_row_f32(dst.type, out, dst.nb[0], c0, len, buf);
    }
}

} // namespace detail

/// Rows [q0, q1) of b (dims 1-3 flattened, dim 1 fastest); false when an index of them
/// is out of range (that row is not written).
/// The rows are walked in order, (n, j, k) stepped rather than divided out of q for each.
template <class = void>
inline bool set_rows_range(tensor& dst, i64 q0, i64 q1) noexcept {
    const tensor& b = *dst.src[0];
    const tensor& idx = *dst.src[1];
    if (q0 >= q1) return true;
    bool all_valid = true;
    const row_coord first = row_of(q0, b.ne);
    i64 n = first.i1, j = first.i2, k = first.i3;
    const auto* ib = static_cast<const std::byte*>(idx.data);
    const auto idx_matrix = [&] {
        return ib + static_cast<std::size_t>(j % idx.ne[1]) * idx.nb[1] + static_cast<std::size_t>(k % idx.ne[2]) * idx.nb[2];
    };
    const std::byte* im = idx_matrix();
    for (i64 q = q0; q < q1; ++q) {
        const i64 r = detail::load_index(idx.type, im + static_cast<std::size_t>(n) * idx.nb[0]);
        if (r < 0 || r >= dst.ne[1])
            all_valid = false;
        else
            detail::write_converted_row(b, row_ptr(b, n, j, k), dst, row_ptr(dst, r, j, k));
        if (++n == b.ne[1]) {
            n = 0;
            if (++j == b.ne[2]) {
                j = 0;
                ++k;
            }
            im = idx_matrix();
        }
    }
    return all_valid;
}

template <class = void>
inline bool set_rows(const compute_params& p, tensor& dst) noexcept {
    const auto [q0, q1] = split_work(dst.src[0]->nrows(), p);
    return set_rows_range(dst, q0, q1);
}

} // namespace backplane::cpu::kernels
