// expect: call to non-[^ ]*constexpr[^ ]* function [^ ]*void backplane::detail::graph_listings_take_no_format_spec\(\)
//
// Graph listings take no format spec, and {fmt} checks format strings at compile time
// (C++20): "{:>4}" for a graph must not compile, and the error must say why by naming
// backplane::detail::graph_listings_take_no_format_spec (g++ 12: "call to non-'constexpr'
// function 'void backplane::detail::graph_listings_take_no_format_spec()'").
#include <backplane/core/format.hpp>

#include <string>

std::string listing(const backplane::graph& g) { return fmt::format("{:>4}", g); }
