#pragma once
// Reading and writing tensor data from the host, wherever the tensor lives: context host
// data (no buffer) or any backend buffer, through its runtime handle. Range checked:
// an access outside the tensor is a status, never a stray write.

#include <backplane/core/error.hpp>
#include <backplane/core/tensor.hpp>
#include <backplane/memory/buffer.hpp>

#include <cstddef>
#include <cstring>
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
/// bf16_t bf16, block_q8_0 q8_0, block_q4_0 q4_0, std::int32_t i32.
template <class T>
constexpr std::optional<elem_type> elem_type_of() noexcept {
    if constexpr (std::is_same_v<T, float>) return elem_type::f32;
    else if constexpr (std::is_same_v<T, f16_t>) return elem_type::f16;
    else if constexpr (std::is_same_v<T, bf16_t>) return elem_type::bf16;
    else if constexpr (std::is_same_v<T, block_q8_0>) return elem_type::q8_0;
    else if constexpr (std::is_same_v<T, block_q4_0>) return elem_type::q4_0;
    else if constexpr (std::is_same_v<T, std::int32_t>) return elem_type::i32;
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

/// Writes all of t from `values`: t contiguous, T its storage type (float for f32, f16_t,
/// bf16_t, block_q8_0, block_q4_0, std::int32_t for i32) or std::byte for raw bytes.
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
/// f32 in index order (dim 0 fastest; quantized blocks dequantized, i32 converted).
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
