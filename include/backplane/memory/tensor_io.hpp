#pragma once
// Reading and writing tensor data from the host, wherever the tensor lives: context host
// data (no buffer) or any backend buffer, through its runtime handle. Range checked:
// an access outside the tensor is a status, never a stray write.
//
// The 2-D forms (ggml's tensor_set_2d / tensor_get_2d) copy n rows of `size` bytes
// between strided host memory and strided bytes of a tensor, e.g. one column block of a
// row-major matrix, or every other row:
//
//     // rows 0, 2, 4 of a [64, 6] f32 tensor from a host array with 80-byte rows
//     tensor_set_2d(*t, host, 0, 64 * 4, 3, 2 * t->nb[1], 80 * 4);
//
// Row k goes from host + k * host_stride to tensor byte offset + k * tensor_stride. The
// whole request is checked before any byte moves (no overflow in the checks), so a
// request that does not fit changes nothing.

#include <backplane/core/convert.hpp>
#include <backplane/core/error.hpp>
#include <backplane/core/tensor.hpp>
#include <backplane/memory/buffer.hpp>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

namespace backplane {

namespace detail {
inline status host_range_check(const char* what, const tensor& t, std::size_t offset, std::size_t size) {
    if (t.data == nullptr)
        return {errc::invalid_argument, std::string(what) + ": tensor '" + t.name + "' has no data (allocate it first)"};
    return check_tensor_range(what, t, offset, size);
}

/// The element type whose values are stored as T, or nullopt: float f32, f16_t f16,
/// bf16_t bf16, block_q8_0 q8_0, block_q4_0 q4_0, std::int32_t i32, std::int64_t i64.
template <class T>
constexpr std::optional<elem_type> elem_type_of() noexcept {
    if constexpr (std::is_same_v<T, float>) return elem_type::f32;
    else if constexpr (std::is_same_v<T, f16_t>) return elem_type::f16;
    else if constexpr (std::is_same_v<T, bf16_t>) return elem_type::bf16;
    else if constexpr (std::is_same_v<T, block_q8_0>) return elem_type::q8_0;
    else if constexpr (std::is_same_v<T, block_q4_0>) return elem_type::q4_0;
    else if constexpr (std::is_same_v<T, std::int32_t>) return elem_type::i32;
    else if constexpr (std::is_same_v<T, std::int64_t>) return elem_type::i64;
    else return std::nullopt;
}

/// ok when values of T are t's elements (or T is std::byte: raw bytes); the typed
/// accessors never reinterpret one type's bytes as another's.
template <class T>
status check_value_type(const char* what, const tensor& t) {
    if constexpr (std::is_same_v<T, std::byte>) {
        return {};
    } else {
        constexpr std::optional<elem_type> e = elem_type_of<T>();
        if (e == t.type) return {};
        std::string msg = std::string(what) + ": tensor '" + t.name + "' holds " + std::string(to_string(t.type)) +
                          " values, not ";
        msg += e ? std::string(to_string(*e)) + " ones"
                 : "values of this " + std::to_string(sizeof(T)) + "-byte type";
        return {errc::invalid_argument, msg + " (use its storage type, std::byte for raw bytes, or tensor_read_f32 "
                                              "to convert to f32)"};
    }
}
} // namespace detail

/// Writes `size` bytes from `src` into t at byte `offset`.
inline status tensor_set(tensor& t, const void* src, std::size_t offset, std::size_t size) {
    if (t.buffer != nullptr) {
        if (status s = detail::check_buffer_alive("tensor_set", t); !s) return s;
        return t.buffer->set_tensor(t, src, offset, size);
    }
    if (auto s = detail::host_range_check("tensor_set", t, offset, size); !s) return s;
    if (size) std::memcpy(static_cast<std::byte*>(t.data) + offset, src, size);
    return {};
}

/// Reads `size` bytes of t at byte `offset` into `dst`.
inline status tensor_get(const tensor& t, void* dst, std::size_t offset, std::size_t size) {
    if (t.buffer != nullptr) {
        if (status s = detail::check_buffer_alive("tensor_get", t); !s) return s;
        return t.buffer->get_tensor(t, dst, offset, size);
    }
    if (auto s = detail::host_range_check("tensor_get", t, offset, size); !s) return s;
    if (size) std::memcpy(dst, static_cast<const std::byte*>(t.data) + offset, size);
    return {};
}

namespace detail {

/// The checks of a 2-D copy: t has an address, a host pointer is given, and every row
/// lies inside t and inside the address space, computed without overflow.
inline status rows_2d_check(const char* what, const tensor& t, const void* host, std::size_t offset,
                            std::size_t size, std::size_t n_rows, std::size_t tensor_stride,
                            std::size_t host_stride) {
    if (t.data == nullptr)
        return {errc::invalid_argument, std::string(what) + ": tensor '" + t.name + "' has no data (allocate it first)"};
    if (t.buffer != nullptr)
        if (status s = check_buffer_alive(what, t); !s) return s;
    if (size == 0 || n_rows == 0) return {};
    if (host == nullptr) return {errc::invalid_argument, std::string(what) + ": the host pointer is null"};
    const std::size_t n = t.nbytes();
    const std::string rows = std::to_string(n_rows) + " rows of " + std::to_string(size) + " bytes";
    if (offset > n || size > n - offset)
        return {errc::out_of_range, std::string(what) + ": the first of " + rows + " at byte offset " +
                                        std::to_string(offset) + " ends past tensor '" + t.name + "' of " +
                                        std::to_string(n) + " bytes"};
    // (n_rows - 1) * tensor_stride <= n - offset - size, divided so that nothing wraps
    const std::size_t last = n_rows - 1;
    if (tensor_stride != 0 && last > (n - offset - size) / tensor_stride)
        return {errc::out_of_range, std::string(what) + ": " + rows + " from byte offset " + std::to_string(offset) +
                                        " with a tensor stride of " + std::to_string(tensor_stride) +
                                        " bytes end past tensor '" + t.name + "' of " + std::to_string(n) + " bytes"};
    // host + last * host_stride + size must not wrap around the address space
    const auto room = std::numeric_limits<std::uintptr_t>::max() - reinterpret_cast<std::uintptr_t>(host);
    if (size > room || (host_stride != 0 && last > (room - size) / host_stride))
        return {errc::out_of_range, std::string(what) + ": " + rows + " with a host stride of " +
                                        std::to_string(host_stride) + " bytes wrap around the address space"};
    return {};
}

} // namespace detail

/// Writes n_rows rows of `size` bytes into t: row k from host memory `src + k *
/// host_stride` to t's byte `offset + k * tensor_stride` (ggml's tensor_set_2d, with
/// its argument order: n_copies, stride_tensor, stride_data). Rows may overlap; later
/// rows win. Works wherever t lives: one set per row through its buffer handle (a
/// buffer with a native 2-D copy may take the whole request here later).
inline status tensor_set_2d(tensor& t, const void* src, std::size_t offset, std::size_t size, std::size_t n_rows,
                            std::size_t tensor_stride, std::size_t host_stride) {
    if (auto s = detail::rows_2d_check("tensor_set_2d", t, src, offset, size, n_rows, tensor_stride, host_stride); !s)
        return s;
    if (size == 0) return {};
    const auto* from = static_cast<const std::byte*>(src);
    for (std::size_t k = 0; k < n_rows; ++k)
        if (auto s = tensor_set(t, from + k * host_stride, offset + k * tensor_stride, size); !s) return s;
    return {};
}

/// Reads n_rows rows of `size` bytes of t: row k from t's byte `offset + k *
/// tensor_stride` to host memory `dst + k * host_stride` (ggml's tensor_get_2d).
inline status tensor_get_2d(const tensor& t, void* dst, std::size_t offset, std::size_t size, std::size_t n_rows,
                            std::size_t tensor_stride, std::size_t host_stride) {
    if (auto s = detail::rows_2d_check("tensor_get_2d", t, dst, offset, size, n_rows, tensor_stride, host_stride); !s)
        return s;
    if (size == 0) return {};
    auto* to = static_cast<std::byte*>(dst);
    for (std::size_t k = 0; k < n_rows; ++k)
        if (auto s = tensor_get(t, to + k * host_stride, offset + k * tensor_stride, size); !s) return s;
    return {};
}

/// What the async 2-D copies need of a backend: synchronize() (a backend, an
/// any_backend, a backend_ref).
template <class B>
concept synchronizing_stream = requires(B& b) {
    { b.synchronize() } -> std::same_as<status>;
};

/// tensor_set_2d queued on backend b's stream: one set_tensor_async per row where b
/// has them (an async_backend or an any_backend: `src` must then stay alive and
/// unchanged until b.synchronize()); otherwise, and for a tensor without a buffer, b
/// is synchronized first and the rows are written at once (ggml's fallback).
template <synchronizing_stream B>
status tensor_set_2d_async(B& b, tensor& t, const void* src, std::size_t offset, std::size_t size,
                           std::size_t n_rows, std::size_t tensor_stride, std::size_t host_stride) {
    if (auto s = detail::rows_2d_check("tensor_set_2d_async", t, src, offset, size, n_rows, tensor_stride,
                                       host_stride);
        !s)
        return s;
    if constexpr (requires { { b.set_tensor_async(t, src, offset, size) } -> std::same_as<status>; }) {
        if (t.buffer != nullptr) {
            const auto* from = static_cast<const std::byte*>(src);
            for (std::size_t k = 0; size != 0 && k < n_rows; ++k)
                if (auto s = b.set_tensor_async(t, from + k * host_stride, offset + k * tensor_stride, size); !s)
                    return s;
            return {};
        }
    }
    if (auto s = b.synchronize(); !s) return s;
    return tensor_set_2d(t, src, offset, size, n_rows, tensor_stride, host_stride);
}

/// tensor_get_2d queued on backend b's stream (as tensor_set_2d_async: `dst` holds the
/// rows only after b.synchronize() where b is asynchronous).
template <synchronizing_stream B>
status tensor_get_2d_async(B& b, const tensor& t, void* dst, std::size_t offset, std::size_t size,
                           std::size_t n_rows, std::size_t tensor_stride, std::size_t host_stride) {
    if (auto s = detail::rows_2d_check("tensor_get_2d_async", t, dst, offset, size, n_rows, tensor_stride,
                                       host_stride);
        !s)
        return s;
    if constexpr (requires { { b.get_tensor_async(t, dst, offset, size) } -> std::same_as<status>; }) {
        if (t.buffer != nullptr) {
            auto* to = static_cast<std::byte*>(dst);
            for (std::size_t k = 0; size != 0 && k < n_rows; ++k)
                if (auto s = b.get_tensor_async(t, to + k * host_stride, offset + k * tensor_stride, size); !s)
                    return s;
            return {};
        }
    }
    if (auto s = b.synchronize(); !s) return s;
    return tensor_get_2d(t, dst, offset, size, n_rows, tensor_stride, host_stride);
}

/// Writes all of t from `values`: t contiguous, T its storage type (float for f32, f16_t,
/// bf16_t, block_q8_0, block_q4_0, std::int32_t for i32, std::int64_t for i64) or
/// std::byte for raw bytes.
/// Another T is an invalid_argument status: bytes are never reinterpreted.
template <class T>
    requires std::is_trivially_copyable_v<T>
status tensor_set(tensor& t, std::span<const T> values) {
    if (status s = detail::check_value_type<T>("tensor_set", t); !s) return s;
    if (!t.is_contiguous())
        return {errc::invalid_argument, "tensor_set: tensor '" + t.name + "' is not contiguous"};
    if (values.size_bytes() != t.nbytes())
        return {errc::out_of_range, "tensor_set: " + std::to_string(values.size_bytes()) + " bytes given for tensor '" +
                                        t.name + "' of " + std::to_string(t.nbytes()) + " bytes"};
    return tensor_set(t, values.data(), 0, values.size_bytes());
}
template <class T>
    requires std::is_trivially_copyable_v<T>
status tensor_set(tensor& t, const std::vector<T>& values) {
    return tensor_set(t, std::span<const T>(values));
}

/// Reads all of a contiguous tensor as values of its storage type T (as tensor_set: float
/// for f32, ..., std::byte for raw bytes). Another T is an invalid_argument status; to
/// convert any type to f32, use tensor_read_f32.
template <class T = float>
    requires std::is_trivially_copyable_v<T>
result<std::vector<T>> tensor_get_all(const tensor& t) {
    if (status s = detail::check_value_type<T>("tensor_get_all", t); !s) return s;
    if (!t.is_contiguous())
        return status(errc::invalid_argument, "tensor_get_all: tensor '" + t.name + "' is not contiguous");
    if (t.nbytes() % sizeof(T) != 0)
        return status(errc::invalid_argument, "tensor_get_all: tensor '" + t.name + "' of " +
                                                  std::to_string(t.nbytes()) + " bytes is not a whole number of values");
    std::vector<T> out(t.nbytes() / sizeof(T));
    if (auto s = tensor_get(t, out.data(), 0, t.nbytes()); !s) return s;
    return out;
}

/// Reads every element of t, of any type and layout and wherever it lives, converted to
/// f32 in index order (dim 0 fastest; quantized blocks dequantized, i32 and i64 converted).
[[nodiscard]] inline result<std::vector<float>> tensor_read_f32(const tensor& t) {
    if (status s = detail::check_buffer_alive("tensor_read_f32", t); !s) return s;
    try {
        const std::size_t n = t.nbytes();
        std::vector<std::byte> bytes;
        const std::byte* base = nullptr;
        if (t.data != nullptr && (t.buffer == nullptr || t.buffer->is_host())) {
            base = static_cast<const std::byte*>(t.data);
        } else {
            bytes.resize(n);
            if (auto s = tensor_get(t, bytes.data(), 0, n); !s) return s;
            base = bytes.data();
        }
        const std::int64_t ne0 = t.ne[0];
        const std::int64_t bs = block_size(t.type);
        std::vector<float> out(static_cast<std::size_t>(t.nelements()));
        std::vector<std::byte> row(row_size(t.type, ne0));
        float* y = out.data();
        for (std::int64_t i3 = 0; i3 < t.ne[3]; ++i3)
            for (std::int64_t i2 = 0; i2 < t.ne[2]; ++i2)
                for (std::int64_t i1 = 0; i1 < t.ne[1]; ++i1, y += ne0) {
                    const std::byte* r = base + static_cast<std::size_t>(i1) * t.nb[1] +
                                         static_cast<std::size_t>(i2) * t.nb[2] + static_cast<std::size_t>(i3) * t.nb[3];
                    if (t.nb[0] != type_size(t.type)) { // gather the row's blocks
                        for (std::int64_t b = 0; b < ne0 / bs; ++b)
                            std::memcpy(row.data() + static_cast<std::size_t>(b) * type_size(t.type),
                                        r + static_cast<std::size_t>(b) * t.nb[0], type_size(t.type));
                        r = row.data();
                    }
                    to_float_row(t.type, r, y, ne0);
                }
        return out;
    } catch (const std::bad_alloc&) {
        return status(errc::alloc_failed, "tensor_read_f32: out of host memory reading '" + t.name + "'");
    }
}

/// Sets `size` bytes of t at byte `offset` to `value`.
inline status tensor_memset(tensor& t, std::uint8_t value, std::size_t offset, std::size_t size) {
    if (t.buffer != nullptr) {
        if (status s = detail::check_buffer_alive("tensor_memset", t); !s) return s;
        return t.buffer->memset_tensor(t, value, offset, size);
    }
    if (auto s = detail::host_range_check("tensor_memset", t, offset, size); !s) return s;
    if (size) std::memset(static_cast<std::byte*>(t.data) + offset, value, size);
    return {};
}

} // namespace backplane
