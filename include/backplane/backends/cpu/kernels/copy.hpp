#pragma once
// dup, cont and cpy: copy src[0] into dst, pairing elements in row-major order (dim 0
// fastest), so source and destination may have different shapes of the same size
// (ggml's cpy). Both sides may have any strides; cpy's destination is often a strided
// view (a KV-cache slot).
//
// Same type: storage units (elements, or whole blocks of a quantized type) are copied
// byte for byte, which is exact for every type, i32 included. Different types: values
// go through f32 in chunks, quantized rows through core's to_float_row / from_float_row
// one block at a time.

#include <backplane/backends/cpu/kernels/common.hpp>

#include <algorithm>
#include <cstring>

namespace backplane::cpu::kernels {

namespace detail {

/// Copies n storage units of t starting at linear unit index `first` to dst (unit stride
/// dnb0), walking t's rows.
inline void gather_units(const tensor& t, i64 first, i64 n, std::byte* dst,
                         std::size_t dnb0) noexcept {
    const std::size_t ts = type_size(t.type);
    const i64 n0 = t.ne[0] / block_size(t.type);
    i64 u0 = first % n0;
    i64 r = first / n0;
    while (n > 0) {
        const auto [i1, i2, i3] = row_of(r, t.ne);
        const std::byte* row = row_ptr(t, i1, i2, i3);
        const i64 take = std::min(n, n0 - u0);
        if (t.nb[0] == ts && dnb0 == ts) {
            std::memmove(dst, row + static_cast<std::size_t>(u0) * ts,
                         static_cast<std::size_t>(take) * ts);
        } else {
            for (i64 k = 0; k < take; ++k)
                std::memmove(dst + static_cast<std::size_t>(k) * dnb0,
                             row + static_cast<std::size_t>(u0 + k) * t.nb[0], ts);
        }
        dst += static_cast<std::size_t>(take) * dnb0;
        n -= take;
        u0 = 0;
        ++r;
    }
}

/// n values of t as f32, starting at linear element index `first` (crossing rows).
template <class T> // the storage type, or void for a quantized type
void gather_f32(const tensor& t, i64 first, i64 n, float* out) noexcept {
    const i64 ne0 = t.ne[0];
    i64 i0 = first % ne0;
    i64 r = first / ne0;
    while (n > 0) {
        const auto [i1, i2, i3] = row_of(r, t.ne);
        const std::byte* row = row_ptr(t, i1, i2, i3);
        const i64 take = std::min(n, ne0 - i0);
        if constexpr (std::is_void_v<T>) {
            float blk[max_block_size];
            const i64 bs = block_size(t.type);
            for (i64 k = 0; k < take;) {
                const i64 j = i0 + k;
                const i64 in_blk = j % bs;
                dequantize_block(t.type, row + static_cast<std::size_t>(j / bs) * t.nb[0], blk);
                const i64 m = std::min(take - k, bs - in_blk);
                std::copy_n(blk + in_blk, m, out + k);
                k += m;
            }
        } else {
            for (i64 k = 0; k < take; ++k)
                out[k] = load<T>(row + static_cast<std::size_t>(i0 + k) * t.nb[0]);
        }
        out += take;
        n -= take;
        i0 = 0;
        ++r;
    }
}

inline void gather_f32(const tensor& t, i64 first, i64 n, float* out) noexcept {
    if (is_quantized(t.type))
        gather_f32<void>(t, first, n, out);
    else
        visit_float(t.type, [&]<class T>() { gather_f32<T>(t, first, n, out); });
}

/// One storage unit of ts bytes: the common sizes as fixed-size copies (inlined).
inline void copy_unit(std::byte* d, const std::byte* s, std::size_t ts) noexcept {
    switch (ts) {
    case 1: std::memcpy(d, s, 1); return;
    case 2: std::memcpy(d, s, 2); return;
    case 4: std::memcpy(d, s, 4); return;
    case 8: std::memcpy(d, s, 8); return;
    default: std::memmove(d, s, ts);
    }
}

/// Same type and shape: rows [r0, r1) of src into the same rows of dst, walking the row
/// coordinates without a division per row (a KV-cache write of a transposed value is
/// one element per row).
inline void copy_rows_same_shape(const tensor& src, tensor& dst, i64 r0, i64 r1) noexcept {
    const std::size_t ts = type_size(dst.type);
    const i64 units = dst.ne[0] / block_size(dst.type);
    auto [i1, i2, i3] = row_of(r0, dst.ne);
    for (i64 r = r0; r < r1; ++r) {
        const std::byte* s = row_ptr(src, i1, i2, i3);
        std::byte* d = row_ptr(dst, i1, i2, i3);
        if (src.nb[0] == ts && dst.nb[0] == ts)
            std::memmove(d, s, static_cast<std::size_t>(units) * ts);
        else
            for (i64 k = 0; k < units; ++k)
                copy_unit(d + static_cast<std::size_t>(k) * dst.nb[0], s + static_cast<std::size_t>(k) * src.nb[0], ts);
        if (++i1 == dst.ne[1]) {
            i1 = 0;
            if (++i2 == dst.ne[2]) {
                i2 = 0;
                ++i3;
            }
        }
    }
}

} // namespace detail

/// dup / cont / cpy of dst.src[0] into dst.
template <class = void>
inline void copy(const compute_params& p, tensor& dst) noexcept {
    const tensor& src = *dst.src[0];
    if (dst.nelements() == 0)
        return;
    const auto [r0, r1] = split_work(dst.nrows(), p);
    const i64 ne0 = dst.ne[0];

    if (src.type == dst.type && src.ne == dst.ne) {
        detail::copy_rows_same_shape(src, dst, r0, r1);
        return;
    }
    if (src.type == dst.type) {
        const i64 units = ne0 / block_size(dst.type); // per destination row
        for (i64 r = r0; r < r1; ++r) {
            const auto [i1, i2, i3] = row_of(r, dst.ne);
            detail::gather_units(src, r * units, units, row_ptr(dst, i1, i2, i3), dst.nb[0]);
        }
        return;
    }

    // Chunks are whole blocks, so a quantized destination row is written block by block.
    constexpr i64 chunk = row_chunk;
    float buf[chunk];
    for (i64 r = r0; r < r1; ++r) {
        const auto [i1, i2, i3] = row_of(r, dst.ne);
        std::byte* row = row_ptr(dst, i1, i2, i3);
        for (i64 c0 = 0; c0 < ne0; c0 += chunk) {
            const i64 n = std::min(chunk, ne0 - c0);
            detail::gather_f32(src, r * ne0 + c0, n, buf);
            write_row_f32(dst.type, row, dst.nb[0], c0, n, buf);
        }
    }
}

} // namespace backplane::cpu::kernels
