#pragma once
// Copying a tensor's data into another tensor of the same layout, wherever the two live:
// context host data, host buffers, device buffers of any backend.
//
//     if (auto s = tensor_copy(*w_host, *w_gpu); !s) return s;              // blocking
//     if (auto s = tensor_copy_async(cpu, gpu, *x_host, *x_gpu); !s) ...    // queued on gpu
//
// tensor_copy picks the cheapest path that is correct:
//  * both sides in host memory: memcpy (per run of elements for a strided view);
//  * the destination's buffer copies device-side (buffer_handle::copy_tensor: same
//    device, or a peer it can read);
//  * one side in host memory: one set_tensor / get_tensor of the whole span;
//  * neither: staged through host memory in chunks of at most staging_chunk bytes.
// A view with holes between its elements (a transposed or strided view) never has its
// holes written: host destinations get one memcpy per run, device destinations a write
// per run when there are few runs, else a read-modify-write of the span (the holes keep
// the bytes just read from them; nothing else may write them meanwhile).
//
// Layouts must match exactly (type, extents and strides, as same_layout): converting
// types or shapes is a graph op (cpy), not a transfer. Everything is a status: a missing
// address, differing layouts, overlapping source and destination, out of memory, a
// device error.

#include <backplane/core/concepts.hpp>
#include <backplane/core/detail/describe.hpp>
#include <backplane/core/error.hpp>
#include <backplane/core/tensor.hpp>
#include <backplane/memory/buffer.hpp>
#include <backplane/memory/tensor_io.hpp>

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <string>
#include <vector>

namespace backplane {

/// Calls f(byte offset, length) for each run of bytes holding t's elements, relative to
/// t.data, in increasing order of elements: one run when t is contiguous, one per row
/// when its rows are, else one per element (block). The holes of a view are never named.
template <class F> void for_each_byte_run(const tensor& t, F&& f) {
    if (t.nbytes() == 0)
        return;
    if (t.is_contiguous()) {
        f(std::size_t{0}, t.nbytes());
        return;
    }
    const std::size_t ts = type_size(t.type);
    const std::int64_t blocks = t.ne[0] / block_size(t.type);
    for (std::int64_t i3 = 0; i3 < t.ne[3]; ++i3)
        for (std::int64_t i2 = 0; i2 < t.ne[2]; ++i2)
            for (std::int64_t i1 = 0; i1 < t.ne[1]; ++i1) {
                const std::size_t row = static_cast<std::size_t>(i1) * t.nb[1] +
                                        static_cast<std::size_t>(i2) * t.nb[2] +
                                        static_cast<std::size_t>(i3) * t.nb[3];
                if (t.nb[0] == ts)
                    f(row, static_cast<std::size_t>(blocks) * ts);
                else
                    for (std::int64_t b = 0; b < blocks; ++b)
                        f(row + static_cast<std::size_t>(b) * t.nb[0], ts);
            }
}

/// How many runs for_each_byte_run names for t (without walking them).
[[nodiscard]] inline std::size_t byte_run_count(const tensor& t) noexcept {
    if (t.nbytes() == 0)
        return 0;
    if (t.is_contiguous())
        return 1;
    const auto rows = static_cast<std::size_t>(t.nrows());
    return t.nb[0] == type_size(t.type)
               ? rows
               : rows * static_cast<std::size_t>(t.ne[0] / block_size(t.type));
}

/// Tuning of tensor_copy.
struct tensor_copy_options {
    /// Host memory staged at a time for a copy between two non-host buffers that cannot
    /// copy device-side.
    std::size_t staging_chunk = std::size_t{16} << 20;
    /// A strided view in device memory is written run by run up to this many runs, else
    /// by one read-modify-write of its span.
    std::size_t max_device_runs = 64;
};

namespace detail {

/// What tensor_copy_async needs of a backend: synchronize().
template <class B>
concept synchronizable = requires(B& b) {
    { b.synchronize() } -> std::same_as<status>;
};

/// True when t's bytes are addressable from the host (context data or a host buffer).
inline bool in_host_memory(const tensor& t) {
    return t.data != nullptr && (t.buffer == nullptr || t.buffer->is_host());
}

inline std::string layout_of(const tensor& t) {
    std::string s = std::string(to_string(t.type)) + " [";
    for (std::size_t i = 0; i < max_dims; ++i)
        s += (i ? ", " : "") + std::to_string(t.ne[i]);
    s += "] strides [";
    for (std::size_t i = 0; i < max_dims; ++i)
        s += (i ? ", " : "") + std::to_string(t.nb[i]);
    return s + "]";
}

/// The checks every copy makes: addresses, layout, overlap.
inline status check_copy(const char* what, const tensor& src, const tensor& dst) {
    if (src.data == nullptr)
        return {errc::invalid_argument, std::string(what) + ": source " + describe(&src) +
                                            " has no data (allocate it first)"};
    if (dst.data == nullptr)
        return {errc::invalid_argument, std::string(what) + ": destination " + describe(&dst) +
                                            " has no data (allocate it first)"};
    if (status s = check_buffer_alive(what, src); !s) return s;
    if (status s = check_buffer_alive(what, dst); !s) return s;
    if (!same_layout(src, dst))
        return {errc::invalid_argument,
                std::string(what) + ": layouts differ: source " + describe(&src) + " is " +
                    layout_of(src) + ", destination " + describe(&dst) + " is " + layout_of(dst) +
                    " (convert with a cpy node in a graph)"};
    const bool same_space =
        src.buffer == dst.buffer || (in_host_memory(src) && in_host_memory(dst));
    if (same_space && src.data != dst.data) {
        const auto a = reinterpret_cast<std::uintptr_t>(src.data);
        const auto b = reinterpret_cast<std::uintptr_t>(dst.data);
        const std::size_t n = src.nbytes();
        if (n != 0 && a < b + n && b < a + n)
            return {errc::invalid_argument, std::string(what) + ": source " + describe(&src) +
                                                " and destination " + describe(&dst) + " overlap"};
    }
    return {};
}

inline status stage_alloc(std::vector<std::byte>& v, std::size_t n, const tensor& t) {
    try {
        if (v.size() < n)
            v.resize(n);
    } catch (const std::bad_alloc&) {
        return {errc::alloc_failed, "tensor_copy: out of host memory staging " + std::to_string(n) +
                                        " bytes of " + describe(&t)};
    }
    return {};
}

/// Writes the element runs of dst from `from` (host bytes laid out as dst, element 0 at
/// from[0]).
inline status write_runs(tensor& dst, const std::byte* from, const tensor_copy_options& o,
                         std::vector<std::byte>& scratch) {
    const std::size_t n = dst.nbytes();
    if (in_host_memory(dst)) {
        auto* to = static_cast<std::byte*>(dst.data);
        for_each_byte_run(
            dst, [&](std::size_t off, std::size_t len) { std::memcpy(to + off, from + off, len); });
        return {};
    }
    if (dst.is_contiguous())
        return tensor_set(dst, from, 0, n);
    if (byte_run_count(dst) <= o.max_device_runs) {
        status s;
        for_each_byte_run(dst, [&](std::size_t off, std::size_t len) {
            if (s)
                s = tensor_set(dst, from + off, off, len);
        });
        return s;
    }
    // read-modify-write: the holes keep what they hold
    if (auto s = stage_alloc(scratch, n, dst); !s)
        return s;
    if (auto s = tensor_get(dst, scratch.data(), 0, n); !s)
        return s;
    for_each_byte_run(dst, [&](std::size_t off, std::size_t len) {
        std::memcpy(scratch.data() + off, from + off, len);
    });
    return tensor_set(dst, scratch.data(), 0, n);
}

} // namespace detail

/// Copies src's data into dst (same layout), blocking until it is done, staging through
/// `staging` where a copy goes through host memory: a caller that copies often (the
/// scheduler, a collective) keeps one vector and pays for its allocation once. See the
/// file comment for the paths taken.
[[nodiscard]] inline status tensor_copy(const tensor& src, tensor& dst,
                                        std::vector<std::byte>& staging,
                                        const tensor_copy_options& o = {}) {
    if (auto s = detail::check_copy("tensor_copy", src, dst); !s)
        return s;
    const std::size_t n = src.nbytes();
    if (n == 0 || (&src == &dst) || (src.data == dst.data && src.buffer == dst.buffer))
        return {};
    const bool src_host = detail::in_host_memory(src);
    const bool dst_host = detail::in_host_memory(dst);

    if (src.is_contiguous()) {
        if (src_host && dst_host) {
            std::memcpy(dst.data, src.data, n);
            return {};
        }
        if (dst.buffer != nullptr && dst.buffer->copy_tensor(src, dst))
            return {};
        if (src_host)
            return tensor_set(dst, src.data, 0, n);
        if (dst_host)
            return tensor_get(src, dst.data, 0, n);
        // device to device through a bounded staging area
        const std::size_t chunk = std::max<std::size_t>(o.staging_chunk, 1);
        if (auto s = detail::stage_alloc(staging, std::min(n, chunk), src); !s)
            return s;
        for (std::size_t off = 0; off < n; off += chunk) {
            const std::size_t len = std::min(chunk, n - off);
            if (auto s = tensor_get(src, staging.data(), off, len); !s)
                return s;
            if (auto s = tensor_set(dst, staging.data(), off, len); !s)
                return s;
        }
        return {};
    }

    // a view with holes: never write the holes of dst
    std::vector<std::byte> scratch; // a device destination's span, for read-modify-write
    const std::byte* from = nullptr;
    if (src_host) {
        from = static_cast<const std::byte*>(src.data);
    } else {
        if (auto s = detail::stage_alloc(staging, n, src); !s)
            return s;
        if (auto s = tensor_get(src, staging.data(), 0, n); !s)
            return s;
        from = staging.data();
    }
    return detail::write_runs(dst, from, o, scratch);
}

/// tensor_copy with a staging vector of its own.
[[nodiscard]] inline status tensor_copy(const tensor& src, tensor& dst,
                                        const tensor_copy_options& o = {}) {
    std::vector<std::byte> staging;
    return tensor_copy(src, dst, staging, o);
}

/// Copies src into dst on the stream of `to` (dst's backend) when it can queue the copy
/// (its copy_tensor_async accepts these buffers); otherwise synchronizes both backends
/// and copies with tensor_copy. Once this returns, src may be overwritten only after
/// to.synchronize(); with the fallback the copy is already done.
/// (Backends modelling the concept and the type-erased any_backend both qualify.)
template <class From, class To>
requires detail::synchronizable<From> && detail::synchronizable<To>
[[nodiscard]] status tensor_copy_async(From& from, To& to, const tensor& src, tensor& dst) {
    if (auto s = detail::check_copy("tensor_copy_async", src, dst); !s)
        return s;
    if (src.nbytes() == 0 || (src.data == dst.data && src.buffer == dst.buffer))
        return {};
    if constexpr (requires {
                      { to.copy_tensor_async(src, dst) } -> std::same_as<bool>;
                  }) {
        if (src.is_contiguous() && to.copy_tensor_async(src, dst))
            return {};
    }
    // the synchronous fallback: whatever either stream still has queued lands first
    if (auto s = from.synchronize(); !s)
        return s;
    if (auto s = to.synchronize(); !s)
        return s;
    return tensor_copy(src, dst);
}

} // namespace backplane
