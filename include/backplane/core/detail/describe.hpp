#pragma once
// Plain-string descriptions of tensors for error messages. Kept free of {fmt} so that
// core/ stays cheap to compile; the fmt formatters live in core/format.hpp.

#include <backplane/core/error.hpp>
#include <backplane/core/tensor.hpp>

#include <array>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

namespace backplane::detail {

/// "[4, 3, 1, 1]"
inline std::string shape_string(const std::array<std::int64_t, max_dims>& ne) {
    std::string s = "[";
    for (std::size_t i = 0; i < max_dims; ++i) {
        if (i) s += ", ";
        s += std::to_string(ne[i]);
    }
    s += ']';
    return s;
}

/// "'name' f32 [4, 3, 1, 1]" (or "f32 [4, 3, 1, 1]" when unnamed; "null" for null).
inline std::string describe(const tensor* t) {
    if (t == nullptr) return "null";
    std::string s;
    if (!t->name.empty()) {
        s += '\'';
        s += t->name;
        s += "' ";
    }
    s += to_string(t->type);
    s += ' ';
    s += shape_string(t->ne);
    if (!t->is_contiguous()) s += " (non-contiguous)";
    return s;
}

/// Throws backplane::error "<op>: <what>; a = ..., b = ..." naming the operands.
[[noreturn]] inline void op_error(std::string_view op, std::string_view what,
                                  std::initializer_list<std::pair<std::string_view, const tensor*>> operands = {}) {
    std::string msg{op};
    msg += ": ";
    msg += what;
    const char* sep = "; ";
    for (auto& [n, t] : operands) {
        msg += sep;
        msg += n;
        msg += " = ";
        msg += describe(t);
        sep = ", ";
    }
    throw error(msg, errc::invalid_argument);
}

inline void require_tensor(std::string_view op, std::string_view name, const tensor* t) {
    if (t == nullptr) op_error(op, std::string(name) + " is null");
}

} // namespace backplane::detail
