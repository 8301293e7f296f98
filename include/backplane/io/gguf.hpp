#pragma once
// GGUF v3 files: reading (from memory or a memory-mapped file), loading tensors into host
// buffers over the mapping or into any backend's buffers, and writing.
//
//     auto f = gguf::file::open("model.gguf");            // result<gguf::file>
//     if (!f) return f.error();                           // what is wrong, and where
//     auto n_layer = f->get<std::uint32_t>("llama.block_count");
//     auto w = f->load(ctx);                              // tensors over the mapping
//     auto w = f->load(ctx, vk.buffer_type());            // or copied into device memory
//
//     gguf::writer out;
//     out.set("general.architecture", std::string("llama"));
//     out.add_tensor(*emb, "token_embd.weight");           // data read wherever it lives
//     if (auto s = out.write("model.gguf"); !s) ...
//
// The layout (little-endian): "GGUF", version (3), tensor count (u64), metadata count
// (u64); the metadata as (string key, u32 type, value); one info per tensor (string name,
// u32 n_dims, u64 extents, u32 ggml type, u64 offset into the data section); the data
// section at the next multiple of general.alignment (32 by default), each tensor's
// offset a multiple of it too. Strings are a u64 length and bytes, arrays a u32 type, a
// u64 count and the values.
//
// The reader trusts nothing: every read is bounds-checked against the bytes there are;
// counts and lengths are bounded by the bytes left before anything is allocated; extents
// must be positive and their product fit; tensor types must be one of backplane's element
// types (f32, f16, bf16, i32, i64 and the quantized q8_0, q4_0, q4_1, q5_0, q5_1, q2_K to
// q6_K, q8_K, iq4_nl, mxfp4, iq4_xs, iq3_xxs, iq3_s, iq2_xxs, iq2_xs, iq2_s, iq1_s, iq1_m,
// tq1_0, tq2_0) with whole blocks; each tensor's bytes must lie inside the data section,
// aligned (to general.alignment, and from the file's start to what its elements need:
// 8 bytes for i64, 4 for f32, i32 and q8_K, 1 for mxfp4 and iq1_m, 2 for the rest),
// without overlapping another.
// Any violation is an errc::invalid_argument status naming the byte offset and what was
// expected. Nothing aborts, nothing leaks.

#include <backplane/core/context.hpp>
#include <backplane/core/error.hpp>
#include <backplane/core/tensor.hpp>
#include <backplane/core/types.hpp>
#include <backplane/memory/alloc_tensors.hpp>
#include <backplane/memory/buffer.hpp>
#include <backplane/memory/host_buffer.hpp>
#include <backplane/memory/tensor_alloc.hpp>
#include <backplane/memory/tensor_io.hpp>

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace backplane::gguf {

static_assert(std::endian::native == std::endian::little, "gguf: a little-endian host is assumed");

inline constexpr std::uint32_t magic = 0x46554747u; // "GGUF"
inline constexpr std::uint32_t version = 3;
inline constexpr std::uint32_t default_alignment = 32;
inline constexpr int max_array_depth = 8;

/// Metadata value types (GGUF's numbering).
enum class value_type : std::uint32_t {
    u8 = 0,
    i8 = 1,
    u16 = 2,
    i16 = 3,
    u32 = 4,
    i32 = 5,
    f32 = 6,
    boolean = 7,
    string = 8,
    array = 9,
    u64 = 10,
    i64 = 11,
    f64 = 12,
};
inline constexpr std::uint32_t value_type_count = 13;

constexpr std::string_view to_string(value_type t) noexcept {
    constexpr std::string_view n[] = {"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                                      "bool", "string", "array", "u64", "i64", "f64"};
    const auto i = static_cast<std::uint32_t>(t);
    return i < value_type_count ? n[i] : std::string_view{"?"};
}

struct value;
/// An array: the element type and the elements (arrays of arrays are allowed).
struct array {
    value_type type = value_type::u8;
    std::vector<value> items;
};

/// One metadata value.
struct value {
    using storage = std::variant<std::uint8_t, std::int8_t, std::uint16_t, std::int16_t,
                                 std::uint32_t, std::int32_t, float, bool, std::string, array,
                                 std::uint64_t, std::int64_t, double>;
    storage v;

    value() = default;
    template <class T>
    requires std::is_constructible_v<storage, T&&> value(T&& x)
        : v(std::forward<T>(x)) {}              // NOLINT: implicit, as a variant
    value(const char* s) : v(std::string(s)) {} // NOLINT

    [[nodiscard]] value_type type() const noexcept { return static_cast<value_type>(v.index()); }
};
static_assert(std::variant_size_v<value::storage> == value_type_count);

namespace detail {
/// The alignment an element (or block) of t needs in memory: a tensor's data must start
/// at a multiple of it, since kernels read its elements as their C++ types.
constexpr std::size_t storage_alignment(elem_type t) noexcept {
    switch (t) {
    case elem_type::f32:
    case elem_type::i32: return 4;
    case elem_type::q8_K: return 4; // an f32 scale first
    case elem_type::i64: return 8;
    case elem_type::mxfp4:
    case elem_type::iq1_m: return 1; // bytes only
    default: return 2; // f16, bf16, and the other blocks (f16 scales)
    }
}
/// The names of every element type, comma-separated (for errors).
inline std::string type_names() {
    std::string out;
    for (elem_type t : all_elem_types) {
        if (!out.empty()) out += ", ";
        out += backplane::to_string(t);
    }
    return out;
}
} // namespace detail

/// The ggml type number of an element type, and back.
constexpr std::uint32_t ggml_type_of(elem_type t) noexcept {
    switch (t) {
    case elem_type::f32:
        return 0;
    case elem_type::f16:
        return 1;
    case elem_type::q4_0:
        return 2;
    case elem_type::q8_0:
        return 8;
    case elem_type::i32:
        return 26;
    case elem_type::i64:
        return 27;
    case elem_type::bf16:
        return 30;
    case elem_type::q4_1: return 3;
    case elem_type::q5_0: return 6;
    case elem_type::q5_1: return 7;
    case elem_type::q2_K: return 10;
    case elem_type::q3_K: return 11;
    case elem_type::q4_K: return 12;
    case elem_type::q5_K: return 13;
    case elem_type::q6_K: return 14;
    case elem_type::q8_K: return 15;
    case elem_type::iq4_nl: return 20;
    case elem_type::mxfp4: return 39;
    case elem_type::iq4_xs: return 23;
    case elem_type::iq3_xxs: return 18;
    case elem_type::iq3_s: return 21;
    case elem_type::iq2_xxs: return 16;
    case elem_type::iq2_xs: return 17;
    case elem_type::iq2_s: return 22;
    case elem_type::iq1_s: return 19;
    case elem_type::iq1_m: return 29;
    case elem_type::tq1_0: return 34;
    case elem_type::tq2_0: return 35;
    }
    return 0xffffffffu;
}
constexpr std::optional<elem_type> elem_type_of_ggml(std::uint32_t g) noexcept {
    for (elem_type t : all_elem_types)
        if (ggml_type_of(t) == g)
            return t;
    return std::nullopt;
}

/// A tensor as the file describes it.
struct tensor_info {
    std::string name;
    elem_type type = elem_type::f32;
    std::array<std::int64_t, max_dims> ne{1, 1, 1, 1};
    int n_dims = 1;
    std::uint64_t offset = 0; ///< into the data section
    std::size_t nbytes = 0;
};

namespace detail {

/// Bounds-checked little-endian reads over a byte span.
class cursor {
  public:
    explicit cursor(std::span<const std::byte> b) noexcept : b_(b) {}

    [[nodiscard]] std::size_t pos() const noexcept { return pos_; }
    [[nodiscard]] std::size_t left() const noexcept { return b_.size() - pos_; }

    template <class T> status read(T& out, const char* what) {
        static_assert(std::is_trivially_copyable_v<T>);
        if (left() < sizeof(T))
            return truncated(what, sizeof(T));
        std::memcpy(&out, b_.data() + pos_, sizeof(T));
        pos_ += sizeof(T);
        return {};
    }
    status read_string(std::string& out, const char* what) {
        std::uint64_t n = 0;
        if (auto s = read(n, what); !s)
            return s;
        if (n > left())
            return error(std::string(what) + " claims " + std::to_string(n) + " bytes, " +
                         std::to_string(left()) + " are left");
        out.assign(reinterpret_cast<const char*>(b_.data() + pos_), static_cast<std::size_t>(n));
        pos_ += static_cast<std::size_t>(n);
        return {};
    }
    status error(const std::string& what) const {
        return {errc::invalid_argument, "gguf: at byte " + std::to_string(pos_) + ": " + what};
    }

  private:
    status truncated(const char* what, std::size_t need) const {
        return error(std::string("truncated: ") + what + " needs " + std::to_string(need) +
                     " bytes, " + std::to_string(left()) + " are left");
    }
    std::span<const std::byte> b_;
    std::size_t pos_ = 0;
};

/// The fewest bytes one value of type t takes in a file (bounds array counts).
constexpr std::size_t min_bytes(value_type t) noexcept {
    switch (t) {
    case value_type::u8:
    case value_type::i8:
    case value_type::boolean:
        return 1;
    case value_type::u16:
    case value_type::i16:
        return 2;
    case value_type::u32:
    case value_type::i32:
    case value_type::f32:
        return 4;
    case value_type::string:
        return 8;
    case value_type::array:
        return 12;
    default:
        return 8;
    }
}

inline status read_value(cursor& c, value_type t, value& out, int depth);

template <class T> status read_scalar(cursor& c, value& out, const char* what) {
    T x{};
    if (auto s = c.read(x, what); !s)
        return s;
    out.v = x;
    return {};
}

inline status read_array(cursor& c, value& out, int depth) {
    if (depth >= max_array_depth)
        return c.error("arrays nested deeper than " + std::to_string(max_array_depth) + " levels");
    std::uint32_t et = 0;
    std::uint64_t n = 0;
    if (auto s = c.read(et, "array type"); !s)
        return s;
    if (et >= value_type_count)
        return c.error("unknown array element type " + std::to_string(et));
    if (auto s = c.read(n, "array count"); !s)
        return s;
    const auto t = static_cast<value_type>(et);
    if (n > c.left() / min_bytes(t))
        return c.error("array of " + std::to_string(n) + " " + std::string(to_string(t)) +
                       " values cannot fit in the " + std::to_string(c.left()) + " bytes left");
    array a;
    a.type = t;
    a.items.resize(static_cast<std::size_t>(n));
    for (auto& item : a.items)
        if (auto s = read_value(c, t, item, depth + 1); !s)
            return s;
    out.v = std::move(a);
    return {};
}

inline status read_value(cursor& c, value_type t, value& out, int depth) {
    switch (t) {
    case value_type::u8:
        return read_scalar<std::uint8_t>(c, out, "u8 value");
    case value_type::i8:
        return read_scalar<std::int8_t>(c, out, "i8 value");
    case value_type::u16:
        return read_scalar<std::uint16_t>(c, out, "u16 value");
    case value_type::i16:
        return read_scalar<std::int16_t>(c, out, "i16 value");
    case value_type::u32:
        return read_scalar<std::uint32_t>(c, out, "u32 value");
    case value_type::i32:
        return read_scalar<std::int32_t>(c, out, "i32 value");
    case value_type::f32:
        return read_scalar<float>(c, out, "f32 value");
    case value_type::u64:
        return read_scalar<std::uint64_t>(c, out, "u64 value");
    case value_type::i64:
        return read_scalar<std::int64_t>(c, out, "i64 value");
    case value_type::f64:
        return read_scalar<double>(c, out, "f64 value");
    case value_type::boolean: {
        std::uint8_t b = 0;
        if (auto s = c.read(b, "bool value"); !s)
            return s;
        if (b > 1)
            return c.error("bool value " + std::to_string(b) + " is neither 0 nor 1");
        out.v = b != 0;
        return {};
    }
    case value_type::string: {
        std::string s;
        if (auto st = c.read_string(s, "string value"); !st)
            return st;
        out.v = std::move(s);
        return {};
    }
    case value_type::array:
        return read_array(c, out, depth);
    }
    return c.error("unknown value type " + std::to_string(static_cast<std::uint32_t>(t)));
}

/// A read-only private mapping of a whole file, unmapped on destruction.
class mapping {
  public:
    static result<std::shared_ptr<mapping>> open(const std::filesystem::path& path) {
        const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            return status(errc::not_found,
                          "gguf: cannot open '" + path.string() + "': " + std::strerror(errno));
        struct stat st {};
        if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
            ::close(fd);
            return status(errc::invalid_argument,
                          "gguf: '" + path.string() + "' is not a regular file");
        }
        const auto size = static_cast<std::size_t>(st.st_size);
        void* p = nullptr;
        if (size > 0) {
            // private and writable: a CPU buffer over it may be written (copy on write),
            // the file never is
            p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
            if (p == MAP_FAILED) {
                const int e = errno;
                ::close(fd);
                return status(errc::alloc_failed,
                              "gguf: cannot map '" + path.string() + "': " + std::strerror(e));
            }
        }
        ::close(fd);
        auto m = std::shared_ptr<mapping>(new (std::nothrow) mapping(p, size));
        if (!m) {
            if (p)
                ::munmap(p, size);
            return status(errc::alloc_failed, "gguf: out of host memory");
        }
        return m;
    }
    mapping(const mapping&) = delete;
    mapping& operator=(const mapping&) = delete;
    ~mapping() {
        if (p_ != nullptr)
            ::munmap(p_, n_);
    }
    [[nodiscard]] std::byte* data() const noexcept { return static_cast<std::byte*>(p_); }
    [[nodiscard]] std::size_t size() const noexcept { return n_; }

  private:
    mapping(void* p, std::size_t n) noexcept : p_(p), n_(n) {}
    void* p_;
    std::size_t n_;
};

} // namespace detail

/// Tensors loaded from a file: each created in the caller's context, placed in `buffers`
/// (which hold the mapping alive when they are host buffers over it).
struct loaded {
    std::vector<tensor*> tensors; ///< in the file's order
    buffer_list buffers;
    std::shared_ptr<const void> keep_alive; ///< the mapping, for buffers over it
    /// The tensor of this name, or null.
    [[nodiscard]] tensor* find(std::string_view name) const noexcept {
        for (tensor* t : tensors)
            if (t->name == name)
                return t;
        return nullptr;
    }
};

/// A parsed GGUF file: its metadata, its tensor infos and a view of its data.
class file {
  public:
    /// Parses bytes the caller keeps alive as long as the file (and what it loads).
    static result<file> parse(std::span<const std::byte> bytes) {
        file f;
        f.bytes_ = bytes;
        if (auto s = f.parse_all(); !s)
            return s;
        return f;
    }
    /// Maps and parses the file at `path`.
    static result<file> open(const std::filesystem::path& path) {
        auto m = detail::mapping::open(path);
        if (!m)
            return m.error();
        auto f = parse(std::span<const std::byte>((*m)->data(), (*m)->size()));
        if (!f)
            return status(f.error().code(),
                          f.error().message() + " (file '" + path.string() + "')");
        f->map_ = std::move(*m);
        return f;
    }

    [[nodiscard]] std::uint32_t alignment() const noexcept { return alignment_; }
    [[nodiscard]] std::size_t data_offset() const noexcept { return data_offset_; }
    [[nodiscard]] const std::vector<std::pair<std::string, value>>& metadata() const noexcept {
        return kv_;
    }
    [[nodiscard]] const std::vector<tensor_info>& tensors() const noexcept { return tensors_; }

    /// The value of `key`, or null.
    [[nodiscard]] const value* find(std::string_view key) const noexcept {
        for (const auto& [k, v] : kv_)
            if (k == key)
                return &v;
        return nullptr;
    }
    /// The value of `key` as T (an integer type, float, double, bool or std::string):
    /// integers convert when the value fits, floats to floats. A missing key is
    /// not_found; another type invalid_argument; an integer outside T's range
    /// out_of_range (the message gives the value and the range).
    template <class T> [[nodiscard]] result<T> get(std::string_view key) const {
        const value* v = find(key);
        if (v == nullptr)
            return status(errc::not_found, "gguf: no metadata key '" + std::string(key) + "'");
        std::optional<T> out;
        std::string out_of_range; // the value, when it is an integer T cannot hold
        std::visit(
            [&](const auto& x) {
                using X = std::remove_cvref_t<decltype(x)>;
                if constexpr (std::is_same_v<T, std::string> || std::is_same_v<X, std::string> ||
                              std::is_same_v<T, bool> || std::is_same_v<X, bool>) {
                    if constexpr (std::is_same_v<T, X>)
                        out = x;
                } else if constexpr (std::is_same_v<X, array>) {
                } else if constexpr (std::is_floating_point_v<T>) {
                    out = static_cast<T>(x);
                } else if constexpr (std::is_integral_v<X>) {
                    if (std::in_range<T>(x))
                        out = static_cast<T>(x);
                    else
                        out_of_range = std::to_string(x);
                }
            },
            v->v);
        if constexpr (std::is_integral_v<T>)
            if (!out_of_range.empty())
                return status(errc::out_of_range,
                              "gguf: metadata '" + std::string(key) + "' is " + std::string(to_string(v->type())) +
                                  " " + out_of_range + ", outside the range of the integer type asked for (" +
                                  std::to_string(+std::numeric_limits<T>::min()) + ".." +
                                  std::to_string(+std::numeric_limits<T>::max()) + ")");
        if (!out)
            return status(errc::invalid_argument, "gguf: metadata '" + std::string(key) + "' is " +
                                                      std::string(to_string(v->type())) +
                                                      ", not the type asked for");
        return *out;
    }
    /// The tensor named `name`, or null.
    [[nodiscard]] const tensor_info* find_tensor(std::string_view name) const noexcept {
        for (const tensor_info& t : tensors_)
            if (t.name == name)
                return &t;
        return nullptr;
    }
    /// The bytes of a tensor of this file.
    [[nodiscard]] std::span<const std::byte> data(const tensor_info& t) const noexcept {
        return bytes_.subspan(data_offset_ + static_cast<std::size_t>(t.offset), t.nbytes);
    }

    /// Creates every tensor in ctx (which must be no_alloc) and places it over the file's
    /// memory-mapped data with a CPU host buffer: no copy. Needs a file from open() (or
    /// bytes the caller keeps alive and writable-by-copy: parse() data is used in place).
    [[nodiscard]] result<loaded> load(context& ctx) const {
        if (!ctx.no_alloc())
            return status(errc::invalid_argument, "gguf: load needs a no_alloc context");
        loaded out;
        auto* base = const_cast<std::byte*>(bytes_.data()) + data_offset_;
        const std::size_t size = bytes_.size() - data_offset_;
        auto buf = make_buffer(host_buffer::from_ptr(base, size),
                               buffer_type_ref(cpu_buffer_type::instance()));
        if (!buf)
            return buf.error();
        try {
            for (const tensor_info& ti : tensors_) {
                tensor* t = make_tensor(ctx, ti);
                place_tensor(*t, **buf, base + ti.offset);
                if (auto s = (*buf)->init_tensor(*t); !s)
                    return s;
                out.tensors.push_back(t);
            }
        } catch (const error& e) {
            return status(e.code(), e.what());
        }
        out.buffers.push_back(std::move(*buf));
        out.keep_alive = map_;
        return out;
    }

    /// Creates every tensor in ctx (no_alloc) in new buffers of type `bt` (any backend's
    /// memory) and copies the data there.
    [[nodiscard]] result<loaded> load(context& ctx, buffer_type_ref bt) const {
        if (!ctx.no_alloc())
            return status(errc::invalid_argument, "gguf: load needs a no_alloc context");
        loaded out;
        try {
            context staging{context_params{.no_alloc = true}};
            for (const tensor_info& ti : tensors_)
                out.tensors.push_back(make_tensor(staging, ti));
            auto bufs = alloc_tensors(staging, bt, buffer_usage::weights);
            if (!bufs)
                return bufs.error();
            // the tensors move into the caller's context with their placement
            std::vector<tensor*> moved;
            for (std::size_t i = 0; i < tensors_.size(); ++i) {
                tensor* t = make_tensor(ctx, tensors_[i]);
                place_like(*t, *out.tensors[i], out.tensors[i]->data);
                if (auto s = t->buffer->init_tensor(*t); !s)
                    return s;
                if (auto s = tensor_set(*t, data(tensors_[i]).data(), 0, tensors_[i].nbytes); !s)
                    return s;
                moved.push_back(t);
            }
            out.tensors = std::move(moved);
            out.buffers = std::move(*bufs);
        } catch (const error& e) {
            return status(e.code(), e.what());
        } catch (const std::bad_alloc&) {
            return status(errc::alloc_failed, "gguf: out of host memory loading");
        }
        return out;
    }

  private:
    file() = default;

    static tensor* make_tensor(context& ctx, const tensor_info& ti) {
        tensor* t = ctx.new_tensor(ti.type, std::span<const std::int64_t>(
                                                ti.ne.data(), static_cast<std::size_t>(ti.n_dims)));
        t->name = ti.name;
        return t;
    }

    status parse_all() {
        detail::cursor c(bytes_);
        std::uint32_t m = 0, ver = 0;
        std::uint64_t n_tensors = 0, n_kv = 0;
        if (auto s = c.read(m, "magic"); !s)
            return s;
        if (m != magic)
            return c.error("bad magic: not a GGUF file");
        if (auto s = c.read(ver, "version"); !s)
            return s;
        if (ver != version)
            return c.error("version " + std::to_string(ver) + " is not supported (only GGUF v" +
                           std::to_string(version) + ")");
        if (auto s = c.read(n_tensors, "tensor count"); !s)
            return s;
        if (auto s = c.read(n_kv, "metadata count"); !s)
            return s;
        constexpr std::size_t min_kv = 8 + 4 + 1, min_tensor = 8 + 4 + 8 + 4 + 8;
        if (n_kv > c.left() / min_kv)
            return c.error(std::to_string(n_kv) + " metadata entries cannot fit in the " +
                           std::to_string(c.left()) + " bytes left");
        if (n_tensors > c.left() / min_tensor)
            return c.error(std::to_string(n_tensors) + " tensors cannot fit in the " +
                           std::to_string(c.left()) + " bytes left");
        kv_.reserve(static_cast<std::size_t>(n_kv));
        for (std::uint64_t i = 0; i < n_kv; ++i) {
            std::string key;
            std::uint32_t t = 0;
            if (auto s = c.read_string(key, "metadata key"); !s)
                return s;
            if (find(key) != nullptr)
                return c.error("metadata key '" + key + "' appears twice");
            if (auto s = c.read(t, "metadata value type"); !s)
                return s;
            if (t >= value_type_count)
                return c.error("metadata '" + key + "' has unknown type " + std::to_string(t));
            value v;
            if (auto s = detail::read_value(c, static_cast<value_type>(t), v, 0); !s)
                return s;
            kv_.emplace_back(std::move(key), std::move(v));
        }
        if (const value* a = find("general.alignment")) {
            const auto* p = std::get_if<std::uint32_t>(&a->v);
            if (p == nullptr || *p == 0 || (*p & (*p - 1)) != 0 || *p > (1u << 20))
                return c.error("general.alignment must be a u32 power of two up to 1 MiB");
            alignment_ = *p;
        }
        tensors_.reserve(static_cast<std::size_t>(n_tensors));
        for (std::uint64_t i = 0; i < n_tensors; ++i) {
            tensor_info ti;
            std::uint32_t n_dims = 0, gt = 0;
            if (auto s = c.read_string(ti.name, "tensor name"); !s)
                return s;
            if (find_tensor(ti.name) != nullptr)
                return c.error("tensor '" + ti.name + "' appears twice");
            if (auto s = c.read(n_dims, "tensor dimension count"); !s)
                return s;
            if (n_dims == 0 || n_dims > static_cast<std::uint32_t>(max_dims))
                return c.error("tensor '" + ti.name + "' has " + std::to_string(n_dims) +
                               " dimensions (1 to " + std::to_string(max_dims) + " supported)");
            ti.n_dims = static_cast<int>(n_dims);
            for (std::uint32_t d = 0; d < n_dims; ++d) {
                std::uint64_t n = 0;
                if (auto s = c.read(n, "tensor extent"); !s)
                    return s;
                if (n == 0 || n > (std::uint64_t{1} << 40))
                    return c.error("tensor '" + ti.name + "' has extent " + std::to_string(n) +
                                   " in dimension " + std::to_string(d));
                ti.ne[d] = static_cast<std::int64_t>(n);
            }
            if (auto s = c.read(gt, "tensor type"); !s)
                return s;
            const auto et = elem_type_of_ggml(gt);
            if (!et)
                return c.error("tensor '" + ti.name + "' has ggml type " + std::to_string(gt) +
                               ", not one backplane reads (" + detail::type_names() + ")");
            ti.type = *et;
            if (ti.ne[0] % block_size(ti.type) != 0)
                return c.error("tensor '" + ti.name + "' rows of " + std::to_string(ti.ne[0]) +
                               " " + std::string(backplane::to_string(ti.type)) +
                               " values are not whole blocks");
            const auto elems = checked_nelements(ti.ne);
            if (!elems || *elems > (std::int64_t{1} << 50))
                return c.error("tensor '" + ti.name + "' has too many elements");
            ti.nbytes = static_cast<std::size_t>(*elems / block_size(ti.type)) * type_size(ti.type);
            if (auto s = c.read(ti.offset, "tensor offset"); !s)
                return s;
            if (ti.offset % alignment_ != 0)
                return c.error("tensor '" + ti.name + "' offset " + std::to_string(ti.offset) +
                               " is not a multiple of " + std::to_string(alignment_));
            tensors_.push_back(std::move(ti));
        }
        // the data section
        const std::size_t end_of_infos = c.pos();
        data_offset_ = (end_of_infos + alignment_ - 1) / alignment_ * alignment_;
        if (data_offset_ > bytes_.size() && !tensors_.empty())
            return c.error("truncated: the data section would start at byte " +
                           std::to_string(data_offset_) + " of a " + std::to_string(bytes_.size()) +
                           "-byte file");
        if (data_offset_ > bytes_.size())
            data_offset_ = bytes_.size();
        const std::uint64_t data_size = bytes_.size() - data_offset_;
        std::vector<const tensor_info*> by_offset;
        for (const tensor_info& t : tensors_) {
            if ((data_offset_ + t.offset) % detail::storage_alignment(t.type) != 0)
                return status(errc::invalid_argument,
                              "gguf: tensor '" + t.name + "' (" + std::string(backplane::to_string(t.type)) +
                                  ") starts at byte " + std::to_string(data_offset_ + t.offset) +
                                  " of the file, not a multiple of its element's " +
                                  std::to_string(detail::storage_alignment(t.type)) +
                                  " bytes (general.alignment " + std::to_string(alignment_) + " is too small)");
            if (t.offset > data_size || t.nbytes > data_size - t.offset)
                return status(errc::invalid_argument,
                              "gguf: tensor '" + t.name + "' at offset " + std::to_string(t.offset) +
                                  " + size " + std::to_string(t.nbytes) +
                                  " lies outside the data section of " + std::to_string(data_size) +
                                  " bytes (truncated file?)");
            by_offset.push_back(&t);
        }
        std::sort(by_offset.begin(), by_offset.end(),
                  [](auto* a, auto* b) { return a->offset < b->offset; });
        for (std::size_t i = 1; i < by_offset.size(); ++i)
            if (by_offset[i - 1]->offset + by_offset[i - 1]->nbytes > by_offset[i]->offset)
                return status(errc::invalid_argument, "gguf: tensors '" + by_offset[i - 1]->name +
                                                          "' and '" + by_offset[i]->name +
                                                          "' overlap in the data section");
        return {};
    }

    std::span<const std::byte> bytes_;
    std::shared_ptr<detail::mapping> map_;
    std::uint32_t alignment_ = default_alignment;
    std::size_t data_offset_ = 0;
    std::vector<std::pair<std::string, value>> kv_;
    std::vector<tensor_info> tensors_;
};

/// Builds a GGUF file: metadata in the order set, tensors in the order added (their data
/// read when added, wherever they live).
class writer {
  public:
    /// Sets (or replaces) a metadata value. An array whose items are not all of its
    /// element type (at any depth) is refused: the file would not parse.
    status set(std::string key, value v) {
        if (!well_typed(v))
            return {errc::invalid_argument,
                    "gguf writer: array '" + key + "' holds items of another type"};
        for (auto& [k, old] : kv_)
            if (k == key) {
                old = std::move(v);
                return {};
            }
        kv_.emplace_back(std::move(key), std::move(v));
        return {};
    }
    /// Adds tensor t (contiguous, 1 to 4 dimensions as its extents say) under `name`
    /// (t's own name when empty), reading its data now.
    status add_tensor(const tensor& t, std::string name = {}) {
        if (name.empty())
            name = t.name;
        if (name.empty())
            return {errc::invalid_argument, "gguf writer: a tensor needs a name"};
        for (const auto& e : tensors_)
            if (e.info.name == name)
                return {errc::invalid_argument, "gguf writer: tensor '" + name + "' added twice"};
        if (!t.is_contiguous())
            return {errc::invalid_argument, "gguf writer: tensor '" + name + "' is not contiguous"};
        entry e;
        e.info.name = std::move(name);
        e.info.type = t.type;
        e.info.ne = t.ne;
        e.info.n_dims = t.n_dims();
        e.info.nbytes = t.nbytes();
        try {
            e.bytes.resize(e.info.nbytes);
        } catch (const std::bad_alloc&) {
            return {errc::alloc_failed, "gguf writer: out of host memory"};
        }
        if (auto s = tensor_get(t, e.bytes.data(), 0, e.bytes.size()); !s)
            return s;
        tensors_.push_back(std::move(e));
        return {};
    }

    /// The whole file as bytes.
    [[nodiscard]] std::vector<std::byte> bytes() const {
        std::vector<std::byte> out;
        std::uint32_t align = default_alignment;
        for (const auto& [k, v] : kv_)
            if (k == "general.alignment")
                if (const auto* p = std::get_if<std::uint32_t>(&v.v))
                    align = *p;
        put(out, magic);
        put(out, version);
        put(out, static_cast<std::uint64_t>(tensors_.size()));
        put(out, static_cast<std::uint64_t>(kv_.size()));
        for (const auto& [k, v] : kv_) {
            put_string(out, k);
            put(out, static_cast<std::uint32_t>(v.type()));
            put_value(out, v);
        }
        std::uint64_t offset = 0;
        for (const auto& e : tensors_) {
            put_string(out, e.info.name);
            put(out, static_cast<std::uint32_t>(e.info.n_dims));
            for (int d = 0; d < e.info.n_dims; ++d)
                put(out, static_cast<std::uint64_t>(e.info.ne[static_cast<std::size_t>(d)]));
            put(out, ggml_type_of(e.info.type));
            put(out, offset);
            offset += (e.info.nbytes + align - 1) / align * align;
        }
        out.resize((out.size() + align - 1) / align * align);
        for (const auto& e : tensors_) {
            out.insert(out.end(), e.bytes.begin(), e.bytes.end());
            out.resize((out.size() + align - 1) / align * align);
        }
        return out;
    }

    /// Writes the file at `path`.
    [[nodiscard]] status write(const std::filesystem::path& path) const {
        try {
            const auto b = bytes();
            std::ofstream f(path, std::ios::binary | std::ios::trunc);
            if (!f)
                return {errc::invalid_argument,
                        "gguf writer: cannot create '" + path.string() + "'"};
            f.write(reinterpret_cast<const char*>(b.data()),
                    static_cast<std::streamsize>(b.size()));
            if (!f)
                return {errc::device_error, "gguf writer: writing '" + path.string() + "' failed"};
            return {};
        } catch (const std::bad_alloc&) {
            return {errc::alloc_failed, "gguf writer: out of host memory"};
        }
    }

  private:
    static bool well_typed(const value& v) {
        const auto* a = std::get_if<array>(&v.v);
        if (a == nullptr)
            return true;
        for (const value& item : a->items)
            if (item.type() != a->type || !well_typed(item))
                return false;
        return true;
    }
    struct entry {
        tensor_info info;
        std::vector<std::byte> bytes;
    };
    template <class T> static void put(std::vector<std::byte>& out, const T& x) {
        const auto* p = reinterpret_cast<const std::byte*>(&x);
        out.insert(out.end(), p, p + sizeof(T));
    }
    static void put_string(std::vector<std::byte>& out, const std::string& s) {
        put(out, static_cast<std::uint64_t>(s.size()));
        const auto* p = reinterpret_cast<const std::byte*>(s.data());
        out.insert(out.end(), p, p + s.size());
    }
    static void put_value(std::vector<std::byte>& out, const value& v) {
        std::visit(
            [&](const auto& x) {
                using X = std::remove_cvref_t<decltype(x)>;
                if constexpr (std::is_same_v<X, std::string>) {
                    put_string(out, x);
                } else if constexpr (std::is_same_v<X, array>) {
                    put(out, static_cast<std::uint32_t>(x.type));
                    put(out, static_cast<std::uint64_t>(x.items.size()));
                    for (const value& item : x.items)
                        put_value(out, item);
                } else if constexpr (std::is_same_v<X, bool>) {
                    put(out, static_cast<std::uint8_t>(x ? 1 : 0));
                } else {
                    put(out, x);
                }
            },
            v.v);
    }
    std::vector<std::pair<std::string, value>> kv_;
    std::vector<entry> tensors_;
};

} // namespace backplane::gguf
