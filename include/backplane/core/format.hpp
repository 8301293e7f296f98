#pragma once
// {fmt} formatters for the core types: elem_type, op_kind, errc, status, buffer_usage,
// device_kind, shape, tensor, graph and graph_view.
//
// Not included by backplane/core.hpp on purpose: <fmt/format.h> is a heavy include, and a
// translation unit that only builds graphs should not pay for it. Include this header
// where you print.
//
//     fmt::print("{}\n", t->shape());      // [4, 3, 1, 1]
//     fmt::print("{:s}\n", t->shape());    // [4, 3]          (trailing 1s dropped)
//     fmt::print("{}\n", *t);              // 'h' f32 [4, 3, 1, 1] op=add
//     fmt::print("{}\n", backplane::show(t)); // the same from a tensor* ("null" for null)
//     fmt::print("{}\n", g);               // one line per leaf and node
//
// Enumerations, status, shape and tensor accept the standard string specs (fill, align,
// width), so they line up in tables: fmt::format("{:<8}", elem_type::f16). Shape and
// tensor also take the presentation type 's' ("squeezed"): trailing extents of 1 are left
// out of the shape (at least one extent is always printed).

#include <backplane/core/concepts.hpp>
#include <backplane/core/error.hpp>
#include <backplane/core/graph.hpp>
#include <backplane/core/tensor.hpp>
#include <backplane/core/types.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string>
#include <string_view>
#include <unordered_map>

namespace backplane {

/// A tensor pointer made printable. {fmt} refuses to format pointers other than void*
/// (and prints those as addresses), so a `tensor*` is wrapped:
///     fmt::print("{}\n", backplane::show(t)); // "null" when t is null
struct tensor_display {
    const tensor* t = nullptr;
};
[[nodiscard]] constexpr tensor_display show(const tensor* t) noexcept { return {t}; }

namespace detail {

/// True when a format spec (the text after ':' up to the closing '}') ends with the
/// presentation type 's'. Nested replacement fields ("{:>{}s}") are skipped over.
constexpr bool spec_is_squeezed(const char* it, const char* end) noexcept {
    int depth = 0;
    char last = '\0';
    for (; it != end; ++it) {
        if (*it == '{') {
            ++depth;
        } else if (*it == '}') {
            if (depth == 0) break;
            --depth;
        }
        last = *it;
    }
    return last == 's';
}

/// "[4, 3, 1, 1]", or with `squeeze` "[4, 3]".
inline void format_shape_to(fmt::memory_buffer& out, const std::array<std::int64_t, max_dims>& ne, bool squeeze) {
    std::size_t n = max_dims;
    if (squeeze)
        while (n > 1 && ne[n - 1] == 1) --n;
    out.push_back('[');
    for (std::size_t i = 0; i < n; ++i) {
        if (i) {
            out.push_back(',');
            out.push_back(' ');
        }
        fmt::format_to(fmt::appender(out), "{}", ne[i]);
    }
    out.push_back(']');
}

/// "'name' f32 [4, 3, 1, 1] op=add", plus " nb=[...]" (strides in bytes) when the tensor
/// is not contiguous; the name part is left out for unnamed tensors.
inline void format_tensor_to(fmt::memory_buffer& out, const tensor& t, bool squeeze) {
    if (!t.name.empty()) fmt::format_to(fmt::appender(out), "'{}' ", t.name);
    const std::string_view type = to_string(t.type);
    out.append(type.data(), type.data() + type.size());
    out.push_back(' ');
    format_shape_to(out, t.ne, squeeze);
    const std::string_view op = to_string(t.op);
    fmt::format_to(fmt::appender(out), " op={}", fmt::string_view(op.data(), op.size()));
    if (!t.is_contiguous())
        fmt::format_to(fmt::appender(out), " nb=[{}, {}, {}, {}]", t.nb[0], t.nb[1], t.nb[2], t.nb[3]);
}

/// Base of the formatters that render to text and then pad it like a string.
struct padded_formatter : fmt::formatter<fmt::string_view> {
    bool squeeze = false;

    constexpr auto parse(fmt::format_parse_context& ctx) -> decltype(ctx.begin()) {
        squeeze = spec_is_squeezed(ctx.begin(), ctx.end());
        return fmt::formatter<fmt::string_view>::parse(ctx);
    }

protected:
    template <class FormatContext>
    auto write(const fmt::memory_buffer& text, FormatContext& ctx) const -> decltype(ctx.out()) {
        return fmt::formatter<fmt::string_view>::format(fmt::string_view(text.data(), text.size()), ctx);
    }
};

/// Formats an enumeration through its to_string, padded like a string.
template <class E>
struct enum_formatter : fmt::formatter<fmt::string_view> {
    template <class FormatContext>
    auto format(E e, FormatContext& ctx) const -> decltype(ctx.out()) {
        const std::string_view s = backplane::to_string(e);
        return fmt::formatter<fmt::string_view>::format(fmt::string_view(s.data(), s.size()), ctx);
    }
};

/// Not constexpr on purpose: reached while a format string is checked at compile time,
/// the compiler names this function in its error; at run time it throws.
[[noreturn]] inline void graph_listings_take_no_format_spec() {
    throw fmt::format_error("graph listings take no format spec");
}

/// Base of the multi-line formatters: they take no format spec.
struct listing_formatter {
    constexpr auto parse(fmt::format_parse_context& ctx) -> decltype(ctx.begin()) {
        auto it = ctx.begin();
        if (it != ctx.end() && *it != '}') graph_listings_take_no_format_spec();
        return it;
    }
};

/// Where each tensor of a listing appears, to name unnamed sources ("node 3", "leaf 0").
struct listing_index {
    std::unordered_map<const tensor*, std::size_t> nodes;
    std::unordered_map<const tensor*, std::size_t> leafs;
};

/// Appends a reference to `t` for a source list: its name, else its place in the listing.
inline void format_ref_to(fmt::memory_buffer& out, const tensor* t, const listing_index& index) {
    if (!t->name.empty()) {
        out.append(t->name.data(), t->name.data() + t->name.size());
    } else if (auto n = index.nodes.find(t); n != index.nodes.end()) {
        fmt::format_to(fmt::appender(out), "node {}", n->second);
    } else if (auto l = index.leafs.find(t); l != index.leafs.end()) {
        fmt::format_to(fmt::appender(out), "leaf {}", l->second);
    } else {
        out.push_back('?');
    }
}

/// One line of a listing: "    2  mul_mat   f32  [3, 2, 1, 1]         y <- w, x".
inline void format_listing_line_to(fmt::memory_buffer& out, std::size_t i, const tensor& t,
                                   const listing_index& index) {
    fmt::memory_buffer shape;
    format_shape_to(shape, t.ne, false);
    const std::string_view op = to_string(t.op);
    const std::string_view type = to_string(t.type);
    fmt::format_to(fmt::appender(out), "{:>5}  {:<9} {:<4} {:<20} {}", i, fmt::string_view(op.data(), op.size()),
                   fmt::string_view(type.data(), type.size()), fmt::string_view(shape.data(), shape.size()),
                   t.name.empty() ? std::string_view("-") : std::string_view(t.name));
    const char* sep = " <- ";
    for (const tensor* s : t.src) {
        if (s == nullptr) continue;
        fmt::format_to(fmt::appender(out), "{}", sep);
        format_ref_to(out, s, index);
        sep = ", ";
    }
}

template <class OutputIt>
OutputIt write_buffer_to(const fmt::memory_buffer& b, OutputIt out) {
    return std::copy(b.data(), b.data() + b.size(), out);
}

} // namespace detail
} // namespace backplane

template <>
struct fmt::formatter<backplane::elem_type> : backplane::detail::enum_formatter<backplane::elem_type> {};
template <>
struct fmt::formatter<backplane::op_kind> : backplane::detail::enum_formatter<backplane::op_kind> {};
template <>
struct fmt::formatter<backplane::errc> : backplane::detail::enum_formatter<backplane::errc> {};
template <>
struct fmt::formatter<backplane::buffer_usage> : backplane::detail::enum_formatter<backplane::buffer_usage> {};
template <>
struct fmt::formatter<backplane::device_kind> : backplane::detail::enum_formatter<backplane::device_kind> {};

/// status: its describe() text ("ok", "allocation failed: ... (native code 2)").
template <>
struct fmt::formatter<backplane::status> : fmt::formatter<fmt::string_view> {
    template <class FormatContext>
    auto format(const backplane::status& s, FormatContext& ctx) const -> decltype(ctx.out()) {
        const std::string text = s.describe();
        return fmt::formatter<fmt::string_view>::format(fmt::string_view(text), ctx);
    }
};

/// shape: "[4, 3, 1, 1]"; "{:s}" drops trailing 1s: "[4, 3]".
template <>
struct fmt::formatter<backplane::shape> : backplane::detail::padded_formatter {
    template <class FormatContext>
    auto format(const backplane::shape& s, FormatContext& ctx) const -> decltype(ctx.out()) {
        fmt::memory_buffer text;
        backplane::detail::format_shape_to(text, s.ne, squeeze);
        return write(text, ctx);
    }
};

/// tensor: "'name' f32 [4, 3, 1, 1] op=add" (+ " nb=[...]" when not contiguous).
template <>
struct fmt::formatter<backplane::tensor> : backplane::detail::padded_formatter {
    template <class FormatContext>
    auto format(const backplane::tensor& t, FormatContext& ctx) const -> decltype(ctx.out()) {
        fmt::memory_buffer text;
        backplane::detail::format_tensor_to(text, t, squeeze);
        return write(text, ctx);
    }
};

/// backplane::show(tensor*): the tensor, or "null".
template <>
struct fmt::formatter<backplane::tensor_display> : backplane::detail::padded_formatter {
    template <class FormatContext>
    auto format(backplane::tensor_display d, FormatContext& ctx) const -> decltype(ctx.out()) {
        fmt::memory_buffer text;
        if (d.t == nullptr)
        {
            constexpr std::string_view null = "null";
            text.append(null.data(), null.data() + null.size());
        }
        else
            backplane::detail::format_tensor_to(text, *d.t, squeeze);
        return write(text, ctx);
    }
};

/// graph_view: "graph_view: N nodes" and one line per node (index within the view, op,
/// type, shape, name, sources).
template <>
struct fmt::formatter<backplane::graph_view> : backplane::detail::listing_formatter {
    template <class FormatContext>
    auto format(const backplane::graph_view& g, FormatContext& ctx) const -> decltype(ctx.out()) {
        backplane::detail::listing_index index;
        for (std::size_t i = 0; i < g.size(); ++i) index.nodes.emplace(g[i], i);
        fmt::memory_buffer out;
        fmt::format_to(fmt::appender(out), "graph_view: {} node{}", g.size(), g.size() == 1 ? "" : "s");
        for (std::size_t i = 0; i < g.size(); ++i) {
            out.push_back('\n');
            backplane::detail::format_listing_line_to(out, i, *g[i], index);
        }
        return backplane::detail::write_buffer_to(out, ctx.out());
    }
};

/// graph: "graph: N nodes, M leafs", then the leafs and the nodes, one line each.
template <>
struct fmt::formatter<backplane::graph> : backplane::detail::listing_formatter {
    template <class FormatContext>
    auto format(const backplane::graph& g, FormatContext& ctx) const -> decltype(ctx.out()) {
        backplane::detail::listing_index index;
        for (std::size_t i = 0; i < g.n_nodes(); ++i) index.nodes.emplace(g.nodes()[i], i);
        for (std::size_t i = 0; i < g.n_leafs(); ++i) index.leafs.emplace(g.leafs()[i], i);
        fmt::memory_buffer out;
        fmt::format_to(fmt::appender(out), "graph: {} node{}, {} leaf{}", g.n_nodes(), g.n_nodes() == 1 ? "" : "s",
                       g.n_leafs(), g.n_leafs() == 1 ? "" : "s");
        if (g.n_leafs() != 0) fmt::format_to(fmt::appender(out), "\nleafs:");
        for (std::size_t i = 0; i < g.n_leafs(); ++i) {
            out.push_back('\n');
            backplane::detail::format_listing_line_to(out, i, *g.leafs()[i], index);
        }
        if (g.n_nodes() != 0) fmt::format_to(fmt::appender(out), "\nnodes:");
        for (std::size_t i = 0; i < g.n_nodes(); ++i) {
            out.push_back('\n');
            backplane::detail::format_listing_line_to(out, i, *g.nodes()[i], index);
        }
        return backplane::detail::write_buffer_to(out, ctx.out());
    }
};
