#pragma once
// The tensor: element type, shape and strides, the op that computes it, its sources,
// and where its data lives. Tensors are owned by a context (stable addresses) and are
// handled by pointer, as in ggml, so graphs are cheap to build and walk.

#include <backplane/core/op_kind.hpp>
#include <backplane/core/types.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

namespace backplane {

class buffer_handle; // memory layer: the runtime handle of the buffer a tensor lives in

inline constexpr int max_dims = 4;      ///< dimensions of a tensor (dim 0 fastest)
inline constexpr int max_srcs = 7;      ///< sources per op (ssm_scan, rwkv_wkv7: 7; flash_attn_ext: 5)
inline constexpr int max_op_params = 16; ///< 32-bit op parameter slots

/// Tensor roles that constrain allocation and scheduling.
enum class tensor_flag : std::uint32_t {
    input = 1u << 0,  ///< set by the user before compute; never overwritten by the allocator
    output = 1u << 1, ///< read by the user after compute; never freed or reused
    param = 1u << 2,  ///< a trainable parameter
};

/// Who placed a tensor in its buffer, which decides what happens when the tensor is met
/// again after that buffer was freed (docs/lifetime.md).
enum class placed_by : std::uint8_t {
    user,      ///< memory the user owns (weights, caches): a freed buffer is reported
    allocator, ///< a graph allocator's compute memory: the next allocation places it again
};

/// rope modes (values as ggml's: neox is bit 1, the M-RoPE modes have bit 3).
enum class rope_mode : std::int32_t { normal = 0, neox = 2, mrope = 8, vision = 24, imrope = 40 };

/// The gated linear unit functions of op_kind::glu (values as ggml's ggml_glu_op): the
/// activation applied to x before it multiplies the gate g.
enum class glu_op : std::int32_t {
    reglu = 0,       ///< relu(x) * g
    geglu = 1,       ///< gelu(x) * g (tanh approximation)
    swiglu = 2,      ///< silu(x) * g
    swiglu_oai = 3,  ///< min(x, limit) * sigmoid(alpha min(x, limit)) * (clamp(g, -limit, limit) + 1)
    geglu_erf = 4,   ///< gelu_erf(x) * g
    geglu_quick = 5, ///< gelu_quick(x) * g
};
inline constexpr std::int32_t glu_op_count = 6;

/// argsort's order (values as ggml's GGML_SORT_ORDER_ASC and _DESC).
enum class sort_order : std::int32_t { asc = 0, desc = 1 };

/// The extents of a tensor (dim 0 fastest), as a value (formatting, comparisons).
struct shape {
    std::array<std::int64_t, max_dims> ne{1, 1, 1, 1};
    friend constexpr bool operator==(const shape&, const shape&) = default;
};

// The members are ordered for graph walks (the scheduler, the allocator, supports_op
// checks): what they read of every tensor (type, op, flags, extents, sources, view
// source, buffer, data) comes first and spans three cache lines.
struct alignas(64) tensor {
    elem_type type = elem_type::f32;
    op_kind op = op_kind::none;
    placed_by placer = placed_by::user; ///< who placed it in `buffer` (set_placement)
    std::uint32_t flags = 0;
    std::array<std::int64_t, max_dims> ne{1, 1, 1, 1}; ///< elements per dimension
    std::array<tensor*, max_srcs> src{};

    tensor* view_src = nullptr; ///< the tensor whose memory this one aliases (never itself a view)
    // Where the data lives. Written only by set_placement, so the three always agree.
    buffer_handle* buffer = nullptr; ///< the buffer holding the data (null for context host data)
    std::uint64_t buffer_serial = 0; ///< that buffer's serial when placed (0: none); see buffer_alive
    void* data = nullptr;            ///< address of element 0 in that buffer's address space
    std::size_t view_offs = 0;  ///< byte offset into view_src

    std::array<std::size_t, max_dims> nb{}; ///< bytes per step in each dimension
    std::array<std::int32_t, max_op_params> op_params{};

    std::string name;

    // -- shape facts -------------------------------------------------------------------

    [[nodiscard]] backplane::shape shape() const noexcept { return {ne}; }
    [[nodiscard]] std::int64_t nelements() const noexcept { return ne[0] * ne[1] * ne[2] * ne[3]; }
    [[nodiscard]] std::int64_t nrows() const noexcept { return ne[1] * ne[2] * ne[3]; }
    [[nodiscard]] int n_dims() const noexcept {
        for (int i = max_dims - 1; i > 0; --i)
            if (ne[static_cast<std::size_t>(i)] > 1) return i + 1;
        return 1;
    }
    [[nodiscard]] std::size_t row_bytes() const noexcept { return row_size(type, ne[0]); }

    /// Bytes spanned from element 0 to one past the last element (0 for an empty tensor).
    [[nodiscard]] std::size_t nbytes() const noexcept {
        for (auto n : ne)
            if (n <= 0) return 0;
        // the last element of each dimension lies (ne - 1) strides past the first, for any
        // strides (a transposed view's dim 0 is not its fastest); blocks count as elements
        const auto blocks0 = static_cast<std::size_t>(ne[0] / block_size(type));
        std::size_t bytes = type_size(type) + (blocks0 - 1) * nb[0];
        for (std::size_t i = 1; i < max_dims; ++i) bytes += static_cast<std::size_t>(ne[i] - 1) * nb[i];
        return bytes;
    }

    /// Rows laid out one after another with no gaps (the layout new tensors get).
    [[nodiscard]] bool is_contiguous() const noexcept {
        std::size_t next = type_size(type);
        if (nb[0] != next && ne[0] != 1) return false;
        next = row_size(type, ne[0]);
        for (std::size_t i = 1; i < max_dims; ++i) {
            if (ne[i] != 1 && nb[i] != next) return false;
            next *= static_cast<std::size_t>(ne[i]);
        }
        return true;
    }
    /// Elements of each row are adjacent (dim 0 has unit stride).
    [[nodiscard]] bool rows_contiguous() const noexcept { return nb[0] == type_size(type); }
    /// Dims 0 and 1 swapped (stride of dim 0 larger than dim 1's).
    [[nodiscard]] bool is_transposed() const noexcept { return ne[0] > 1 && ne[1] > 1 && nb[0] > nb[1]; }
    [[nodiscard]] bool is_view() const noexcept { return view_src != nullptr; }
    [[nodiscard]] bool has_flag(tensor_flag f) const noexcept {
        return (flags & static_cast<std::uint32_t>(f)) != 0;
    }
    void set_flag(tensor_flag f) noexcept { flags |= static_cast<std::uint32_t>(f); }
    void clear_flag(tensor_flag f) noexcept { flags &= ~static_cast<std::uint32_t>(f); }
    void set_input() noexcept { set_flag(tensor_flag::input); }
    void set_output() noexcept { set_flag(tensor_flag::output); }

    /// Byte offset of element (i0, i1, i2, i3); i0 must be a multiple of the block size.
    [[nodiscard]] std::size_t offset_of(std::int64_t i0, std::int64_t i1 = 0, std::int64_t i2 = 0,
                                        std::int64_t i3 = 0) const noexcept {
        return static_cast<std::size_t>(i0 / block_size(type)) * nb[0] +
               static_cast<std::size_t>(i1) * nb[1] + static_cast<std::size_t>(i2) * nb[2] +
               static_cast<std::size_t>(i3) * nb[3];
    }

    // -- placement ---------------------------------------------------------------------

    /// Records where the tensor lives: `at` in buffer `buf`, whose serial is `serial`
    /// (buffer_handle::serial(); null and 0 for host data or none). The one place that
    /// writes `buffer`, `buffer_serial`, `data` and `placer`: use place_tensor,
    /// place_like and unplace_tensor (memory/buffer.hpp), which take the serial from the
    /// buffer or the source tensor. Placing a tensor where it already is writes nothing: a
    /// backend still reading it from another thread (an allocation replayed while earlier
    /// runs are in flight) sees no write.
    void set_placement(buffer_handle* buf, std::uint64_t serial, void* at, placed_by by = placed_by::user) noexcept {
        const std::uint64_t s = buf != nullptr ? serial : 0;
        if (buffer == buf && buffer_serial == s && data == at && placer == by) return;
        buffer = buf;
        buffer_serial = s;
        data = at;
        placer = by;
    }

    // -- op parameters (stored as raw 32-bit slots, like ggml's op_params) ------------

    template <class T>
    void set_param(std::size_t slot, T value) noexcept {
        static_assert(sizeof(T) == 4 && std::is_trivially_copyable_v<T>, "op params are 32-bit");
        std::memcpy(&op_params[slot], &value, sizeof(T));
    }
    template <class T>
    [[nodiscard]] T param(std::size_t slot) const noexcept {
        static_assert(sizeof(T) == 4 && std::is_trivially_copyable_v<T>, "op params are 32-bit");
        T v;
        std::memcpy(&v, &op_params[slot], sizeof(T));
        return v;
    }
};

/// Strides of a contiguous tensor of the given type and shape.
inline std::array<std::size_t, max_dims> contiguous_strides(elem_type t,
                                                            const std::array<std::int64_t, max_dims>& ne) noexcept {
    std::array<std::size_t, max_dims> nb{};
    nb[0] = type_size(t);
    nb[1] = row_size(t, ne[0]);
    for (std::size_t i = 2; i < max_dims; ++i) nb[i] = nb[i - 1] * static_cast<std::size_t>(ne[i - 1]);
    return nb;
}

/// Bytes spanned by a tensor of this type, extents and strides (what tensor::nbytes()
/// computes), or nullopt when an extent is negative or the count exceeds PTRDIFF_MAX.
/// nbytes() itself wraps around for absurd extents; validation uses this first.
/// ne[0] must be a multiple of the type's block size.
inline std::optional<std::size_t> checked_nbytes(elem_type t, const std::array<std::int64_t, max_dims>& ne,
                                                 const std::array<std::size_t, max_dims>& nb) noexcept {
    constexpr auto limit = static_cast<std::size_t>(std::numeric_limits<std::ptrdiff_t>::max());
    for (auto n : ne) {
        if (n < 0) return std::nullopt;
        if (n == 0) return std::size_t{0};
    }
    const auto mul = [](std::size_t a, std::size_t b, std::size_t& r) {
        if (b != 0 && a > limit / b) return false;
        r = a * b;
        return true;
    };
    std::size_t bytes = 0; // as tensor::nbytes(): first block plus (blocks - 1) strides
    if (!mul(static_cast<std::size_t>(ne[0] / block_size(t) - 1), nb[0], bytes) || bytes > limit - type_size(t))
        return std::nullopt;
    bytes += type_size(t);
    for (std::size_t i = 1; i < max_dims; ++i) {
        std::size_t step = 0;
        if (!mul(static_cast<std::size_t>(ne[i] - 1), nb[i], step) || step > limit - bytes) return std::nullopt;
        bytes += step;
    }
    return bytes;
}

/// ne[0] * ne[1] * ne[2] * ne[3], or nullopt when an extent is negative or the product
/// overflows int64.
inline std::optional<std::int64_t> checked_nelements(const std::array<std::int64_t, max_dims>& ne) noexcept {
    std::int64_t n = 1;
    for (auto e : ne) {
        if (e < 0) return std::nullopt;
        if (e != 0 && n > std::numeric_limits<std::int64_t>::max() / e) return std::nullopt;
        n *= e;
    }
    return n;
}

/// Same type, shape and strides: one can take over the other's memory element for element.
inline bool same_layout(const tensor& a, const tensor& b) noexcept {
    return a.type == b.type && a.ne == b.ne && a.nb == b.nb;
}
inline bool same_shape(const tensor& a, const tensor& b) noexcept { return a.ne == b.ne; }

} // namespace backplane

// What each op is (names, arity, rules) needs the complete tensor, and every reader of a
// tensor may ask it: the op table comes with this header, after the tensor.
#include <backplane/core/op_traits.hpp>
