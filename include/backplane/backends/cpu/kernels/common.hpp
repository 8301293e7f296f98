#pragma once
// Shared pieces of the CPU reference kernels: element loads and stores for the float
// storage types, addressing through a tensor's byte strides, row enumeration, quantized
// rows, and the dispatch from a run-time element type to a template argument.
//
// Every kernel reads and writes through memcpy-based accessors, so any byte stride and
// any alignment a view can produce is fine (UBSan-clean), and computes in f32 like ggml.

#include <backplane/backends/cpu/compute_params.hpp>
#include <backplane/core/convert.hpp>
#include <backplane/core/tensor.hpp>
#include <backplane/core/types.hpp>

#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

namespace backplane::cpu::kernels {

using i64 = std::int64_t;

/// The element types stored one value at a time that the arithmetic kernels compute on.
template <class T>
concept float_storage = std::same_as<T, float> || std::same_as<T, f16_t> || std::same_as<T, bf16_t>;

/// Value at p (any alignment) widened to f32.
template <float_storage T> [[nodiscard]] inline float load(const std::byte* p) noexcept {
    T v;
    std::memcpy(&v, p, sizeof(T));
    if constexpr (std::is_same_v<T, float>)
        return v;
    else if constexpr (std::is_same_v<T, f16_t>)
        return f16_to_f32(v);
    else
        return bf16_to_f32(v);
}

/// x rounded to T (ties to even) and stored at p (any alignment).
template <float_storage T> inline void store(std::byte* p, float x) noexcept {
    T v;
    if constexpr (std::is_same_v<T, float>)
        v = x;
    else if constexpr (std::is_same_v<T, f16_t>)
        v = f32_to_f16(x);
    else
        v = f32_to_bf16(x);
    std::memcpy(p, &v, sizeof(T));
}

[[nodiscard]] inline std::int32_t load_i32(const std::byte* p) noexcept {
    std::int32_t v;
    std::memcpy(&v, p, sizeof v);
    return v;
}
inline void store_i32(std::byte* p, std::int32_t v) noexcept {
    std::memcpy(p, &v, sizeof v);
}

/// Calls f.template operator()<T>() with T the storage type of t (f32, f16 or bf16).
/// Callers have checked the type (supports_op); anything else is treated as f32.
template <class F> decltype(auto) visit_float(elem_type t, F&& f) {
    switch (t) {
    case elem_type::f16:
        return std::forward<F>(f).template operator()<f16_t>();
    case elem_type::bf16:
        return std::forward<F>(f).template operator()<bf16_t>();
    default:
        return std::forward<F>(f).template operator()<float>();
    }
}

// -- addressing ------------------------------------------------------------------------

[[nodiscard]] inline std::size_t row_offset(const tensor& t, i64 i1, i64 i2, i64 i3) noexcept {
    return static_cast<std::size_t>(i1) * t.nb[1] + static_cast<std::size_t>(i2) * t.nb[2] +
           static_cast<std::size_t>(i3) * t.nb[3];
}
/// Address of the first element (or block) of row (i1, i2, i3).
[[nodiscard]] inline const std::byte* row_ptr(const tensor& t, i64 i1, i64 i2, i64 i3) noexcept {
    return static_cast<const std::byte*>(t.data) + row_offset(t, i1, i2, i3);
}
[[nodiscard]] inline std::byte* row_ptr(tensor& t, i64 i1, i64 i2, i64 i3) noexcept {
    return static_cast<std::byte*>(t.data) + row_offset(t, i1, i2, i3);
}

/// Row index r (0 <= r < nrows) split into (i1, i2, i3) for extents ne.
struct row_coord {
    i64 i1, i2, i3;
};
[[nodiscard]] constexpr row_coord row_of(i64 r, const std::array<i64, max_dims>& ne) noexcept {
    const i64 i1 = r % ne[1];
    r /= ne[1];
    const i64 i2 = r % ne[2];
    return {i1, i2, r / ne[2]};
}

// -- quantized rows -----------------------------------------------------------------
// Blocks are read and written one at a time through core's dequantize_block /
// quantize_block (convert.hpp), which copy through an aligned local block, so a view at any
// byte offset or block stride is handled; every backend agrees on the bits.

/// Values the reference kernels convert at a time: a whole number of blocks of every type.
inline constexpr i64 row_chunk = max_block_size;
static_assert(row_chunk % 32 == 0);

/// Values [i0, i0 + n) of the row at `row` (a row of type t with unit stride nb0) as
/// f32. For quantized types i0 and n are multiples of the block size.
inline void read_row_f32(elem_type t, const std::byte* row, std::size_t nb0, i64 i0, i64 n,
                         float* out) noexcept {
    if (is_quantized(t)) {
        const i64 bs = block_size(t);
        for (i64 k = 0; k < n; k += bs)
            dequantize_block(t, row + static_cast<std::size_t>((i0 + k) / bs) * nb0, out + k);
        return;
    }
    visit_float(t, [&]<class T>() {
        for (i64 k = 0; k < n; ++k)
            out[k] = load<T>(row + static_cast<std::size_t>(i0 + k) * nb0);
    });
}

/// Stores n f32 values as values [i0, i0 + n) of the row at `row` (type t, unit stride
/// nb0), rounding or quantizing. For quantized types i0 and n are multiples of the block
/// size.
inline void write_row_f32(elem_type t, std::byte* row, std::size_t nb0, i64 i0, i64 n,
                          const float* in) noexcept {
    if (is_quantized(t)) {
        const i64 bs = block_size(t);
        for (i64 k = 0; k < n; k += bs)
            quantize_block(t, in + k, row + static_cast<std::size_t>((i0 + k) / bs) * nb0);
        return;
    }
    visit_float(t, [&]<class T>() {
        for (i64 k = 0; k < n; ++k)
            store<T>(row + static_cast<std::size_t>(i0 + k) * nb0, in[k]);
    });
}

} // namespace backplane::cpu::kernels
