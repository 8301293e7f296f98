#pragma once
// {fmt} formatters for the scheduler (opt-in, like core/format.hpp: <fmt/format.h> is a
// heavy include):
//
//     fmt::print("{}\n", sched);    // the splits, their backends and inputs with bytes
//     fmt::print("{:v}\n", sched);  // also every node: shape, backend and cause
//     fmt::print("{}\n", sched.cause_of(*t));
//
// The text is basic_scheduler::describe(1) or describe(2).

#include <backplane/sched/scheduler.hpp>

#include <fmt/format.h>

#include <string_view>

namespace backplane::detail {

/// Parses the scheduler's format spec: empty or 'v' (verbose).
struct sched_format_spec {
    int level = 1;
    constexpr auto parse(fmt::format_parse_context& ctx) {
        auto it = ctx.begin();
        if (it != ctx.end() && *it == 'v') {
            level = 2;
            ++it;
        }
        if (it != ctx.end() && *it != '}') throw fmt::format_error("a scheduler takes the format spec '' or 'v'");
        return it;
    }
};

} // namespace backplane::detail

template <backplane::backend... Bs>
struct fmt::formatter<backplane::scheduler<Bs...>> : fmt::formatter<backplane::basic_scheduler<backplane::tuple_backend_set<Bs...>>> {};

template <backplane::backend_set Set, class Policy>
struct fmt::formatter<backplane::basic_scheduler<Set, Policy>> : backplane::detail::sched_format_spec {
    auto format(const backplane::basic_scheduler<Set, Policy>& s, fmt::format_context& ctx) const {
        return fmt::format_to(ctx.out(), "{}", s.describe(level));
    }
};

template <class Policy, backplane::backend... Bs>
struct fmt::formatter<backplane::policy_scheduler<Policy, Bs...>>
    : fmt::formatter<backplane::basic_scheduler<backplane::tuple_backend_set<Bs...>, Policy>> {};

template <>
struct fmt::formatter<backplane::placement_cause> : fmt::formatter<std::string_view> {
    auto format(backplane::placement_cause c, fmt::format_context& ctx) const {
        return fmt::formatter<std::string_view>::format(backplane::to_string(c), ctx);
    }
};
