#pragma once
// What the example programs share on their command lines: an option's value read as a
// word, an integer, a weight type or one of a few words, each with the message that says
// what the option needs; and main's last line of defence.

#include <backplane/core/error.hpp>
#include <backplane/core/types.hpp>

#include <charconv>
#include <cstdio>
#include <exception>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

namespace examples {

/// Whether s is a whole decimal integer; its value in out.
inline bool parse_int(std::string_view s, int& out) {
    const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    return ec == std::errc() && p == s.data() + s.size();
}

/// A command line read one option at a time. Each reader of a value takes the next word
/// and returns none, or the message that the option needs another value.
class command_line {
  public:
    command_line(int argc, char** argv) noexcept : argc_(argc), argv_(argv) {}

    /// The next option; none past the last word.
    std::optional<std::string_view> next() noexcept {
        if (++i_ >= argc_)
            return std::nullopt;
        option_ = argv_[i_];
        return option_;
    }

    /// The option's value: the next word (consumed); none at the end.
    std::optional<std::string_view> value() noexcept {
        if (i_ + 1 >= argc_)
            return std::nullopt;
        return std::string_view(argv_[++i_]);
    }

    /// Any word (what: "a file", "a name").
    std::optional<std::string> word(std::string& out, const char* what) {
        const auto v = value();
        if (!v)
            return needs(what);
        out = std::string(*v);
        return std::nullopt;
    }

    /// An integer of at least `min`.
    std::optional<std::string> number(int& out, int min) {
        const auto v = value();
        if (!v || !parse_int(*v, out) || out < min)
            return needs("an integer >= " + std::to_string(min));
        return std::nullopt;
    }

    /// A weight type: f32, f16, bf16 or a quantized type.
    std::optional<std::string> weight_type(backplane::elem_type& out) {
        using backplane::elem_type;
        const auto v = value();
        const auto t = v ? backplane::parse_elem_type(*v) : std::nullopt;
        if (!t || (!backplane::is_quantized(*t) && *t != elem_type::f32 && *t != elem_type::f16 &&
                   *t != elem_type::bf16))
            return needs("a type (f32, f16, bf16 or a quantized type such as q8_0)");
        out = *t;
        return std::nullopt;
    }

    /// One of `words` ("cost or greedy" in the message).
    std::optional<std::string> one_of(std::string& out, std::initializer_list<std::string_view> words) {
        const auto v = value();
        std::string list;
        for (std::size_t k = 0; k < words.size(); ++k)
            list += (k == 0 ? "" : k + 1 == words.size() ? " or " : ", ") + std::string(words.begin()[k]);
        for (const std::string_view w : words)
            if (v && *v == w) {
                out = std::string(w);
                return std::nullopt;
            }
        return needs(list);
    }

    /// "--option needs <what>".
    std::string needs(const std::string& what) const { return std::string(option_) + " needs " + what; }

  private:
    int argc_;
    char** argv_;
    int i_ = 0;
    std::string_view option_;
};

/// Runs run(argc, argv); an exception that escapes it is printed after the program's
/// name and ends the program with status 1.
inline int guarded_main(const char* program, int (*run)(int, char**), int argc, char** argv) {
    try {
        return run(argc, argv);
    } catch (const backplane::error& e) {
        std::fprintf(stderr, "%s: %s\n", program, e.what());
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s: unexpected error: %s\n", program, e.what());
    }
    return 1;
}

} // namespace examples
