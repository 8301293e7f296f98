#pragma once
// The scheduler's plan in words and in Graphviz DOT: describe, explain and to_dot read a
// plan (sched/plan.hpp) and nothing else, so what they print is what the executor runs.

#include <backplane/core/detail/describe.hpp>
#include <backplane/core/tensor.hpp>
#include <backplane/memory/buffer.hpp>
#include <backplane/memory/graph_alloc.hpp>
#include <backplane/sched/placement.hpp>
#include <backplane/sched/plan.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <iterator>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace backplane::detail {
inline std::string human_bytes(std::size_t n) {
    static constexpr const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = static_cast<double>(n);
    std::size_t u = 0;
    while (v >= 1024.0 && u + 1 < std::size(units)) {
        v /= 1024.0;
        ++u;
    }
    char buf[32];
    std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
    return buf;
}


inline std::string human_seconds(double s) {
    char buf[32];
    if (s >= 1.0)
        std::snprintf(buf, sizeof buf, "%.3g s", s);
    else if (s >= 1e-3)
        std::snprintf(buf, sizeof buf, "%.3g ms", s * 1e3);
    else
        std::snprintf(buf, sizeof buf, "%.3g us", s * 1e6);
    return buf;
}

/// "f32 [8, 2, 1, 1]", as error messages write shapes.
inline std::string typed_shape(const tensor& t) { return std::string(to_string(t.type)) + " " + shape_string(t.ne); }

/// A DOT string literal (line breaks become DOT's \n).
inline std::string dot_quote(std::string_view s) {
    std::string out = "\"";
    for (char c : s) {
        if (c == '\n') {
            out += "\\n";
            continue;
        }
        if (c == '"' || c == '\\') out += '\\';
        out += c;
    }
    return out + '"';
}

/// One plan and what the explanation names around it.
struct plan_facts {
    const graph_numbering& num;
    const assignment& asg;
    const split_plan& plan;
    std::vector<std::string_view> backends; ///< names, by index
    int n_copies = 1;
    /// The cost policy's problem and result when they describe this plan (else null).
    const placement_problem* problem = nullptr;
    const placement_result* estimate = nullptr;

    [[nodiscard]] std::string name_of(std::int32_t b) const { return std::string(backends[static_cast<std::size_t>(b)]); }
};

/// The plan after the scheduler's first line: the totals, the cost estimate, then per
/// split its backend, nodes and inputs (level 2: every node with its backend and cause).
inline std::string describe_plan(const plan_facts& f, int level) {
    const graph_numbering& num = f.num;
    const split_plan& plan = f.plan;
    std::size_t copied = 0;
    for (std::int32_t s : plan.inputs) copied += num[static_cast<std::size_t>(s)].nbytes();
    std::string out = ", " + std::to_string(num.n_nodes()) + " nodes, " + std::to_string(plan.splits.size()) +
                      " split(s), " + std::to_string(plan.inputs.size()) + " input(s) copied per run (" +
                      human_bytes(copied) + "), pipeline copies " + std::to_string(f.n_copies) + "\n";
    if (f.estimate != nullptr)
        out += "cost policy: estimated " + human_seconds(f.estimate->seconds) + " per compute (greedy plan " +
               human_seconds(f.estimate->greedy_seconds) + "; search from " + f.estimate->start + ")\n";
    for (std::size_t k = 0; k < plan.splits.size(); ++k) {
        const split_rec& sp = plan.splits[k];
        std::size_t computing = 0;
        for (std::uint32_t i = sp.first; i < sp.last; ++i) computing += is_view_op(num[i].op) ? 0 : 1;
        out += "split " + std::to_string(k) + ": " + f.name_of(sp.backend) + ", nodes " + std::to_string(sp.first) +
               ".." + std::to_string(sp.last == 0 ? 0 : sp.last - 1) + " (" + std::to_string(computing) + " computing)";
        if (sp.in1 > sp.in0) {
            out += ", inputs:";
            for (std::uint32_t j = sp.in0; j < sp.in1; ++j) {
                const auto s = static_cast<std::size_t>(plan.inputs[j]);
                const tensor& t = num[s];
                out += " '" + t.name + "' (" + f.name_of(f.asg.backend[s]) + " -> " + f.name_of(sp.backend) + ", " +
                       human_bytes(t.nbytes()) + (t.has_flag(tensor_flag::input) ? ", user input" : "") + ")";
            }
        }
        out += "\n";
        if (level < 2) continue;
        for (std::uint32_t i = sp.first; i < sp.last; ++i) {
            const tensor& t = num[i];
            out += "  node " + std::to_string(i) + " '" + t.name + "' " + std::string(to_string(t.op)) + " " +
                   typed_shape(t) + " -> " + f.name_of(f.asg.backend[i]) + " (" +
                   std::string(to_string(f.asg.cause[i])) + ")";
            if (f.problem != nullptr && f.problem->computes[i])
                out += " est " + human_seconds(f.problem->node_cost[i * f.backends.size() +
                                                                    static_cast<std::size_t>(f.asg.backend[i])]);
            out += "\n";
        }
    }
    return out;
}

/// The cost policy's estimates for node i on each backend and for the copies it reads.
inline std::string explain_estimates(const plan_facts& f, std::size_t i) {
    const placement_problem& p = *f.problem;
    const std::size_t nb = f.backends.size();
    const auto b = static_cast<std::size_t>(f.asg.backend[i]);
    std::string out = ": estimated";
    for (std::size_t k = 0; k < nb; ++k) {
        const double c = p.node_cost[i * nb + k];
        out += (k ? ", " : " ") + std::string(f.backends[k]) + " " +
               (std::isfinite(c) ? human_seconds(c) : std::string("unsupported"));
    }
    std::string copies;
    for (std::int32_t s : f.num.srcs_of(i)) {
        if (s < 0) continue;
        const auto su = static_cast<std::size_t>(s);
        const std::int32_t cp = f.plan.copy_of.empty() ? -1 : f.plan.copy_of[su * nb + b];
        if (cp < 0) continue;
        const std::uint32_t m = f.num.info[su].mem;
        const std::size_t k =
            m != 0 ? m - 1 : static_cast<std::size_t>(p.backend_type[static_cast<std::size_t>(f.asg.backend[su])]);
        const double sec = p.link_latency[k * nb + b] + p.bytes[su] / p.link_bandwidth[k * nb + b];
        const tensor& t = f.num[su];
        copies += (copies.empty() ? "" : ", ") + ("'" + t.name + "' " + human_bytes(t.nbytes()) + " " + human_seconds(sec));
    }
    if (!copies.empty()) out += "; copies in: " + copies;
    return out;
}

/// Why node t runs where it does (with the cost policy's estimates when there are some).
inline std::string explain_node(const plan_facts& f, const tensor& t) {
    const std::int32_t k = f.num.find(&t);
    if (k == graph_index::none) return "'" + t.name + "' is not in the last graph";
    const auto i = static_cast<std::size_t>(k);
    std::string out = "'" + t.name + "' (" + std::string(to_string(t.op)) + ") runs on " + f.name_of(f.asg.backend[i]) +
                      " (" + std::string(to_string(f.asg.cause[i])) + ")";
    if (f.problem != nullptr && i < f.num.n_nodes() && f.problem->computes[i]) out += explain_estimates(f, i);
    return out;
}

/// The plan in Graphviz DOT: nodes coloured by backend, splits as clusters, copies as
/// labelled edges.
inline std::string plan_to_dot(const plan_facts& f) {
    static constexpr const char* palette[] = {"#8dd3c7", "#ffffb3", "#bebada", "#fb8072",
                                              "#80b1d3", "#fdb462", "#b3de69", "#fccde5"};
    const graph_numbering& num = f.num;
    const std::vector<std::int32_t>& bid = f.asg.backend;
    const std::size_t nb = f.backends.size();
    const auto colour = [](std::int32_t b) { return palette[static_cast<std::size_t>(b) % std::size(palette)]; };
    const auto label = [&](std::size_t i) {
        const tensor& t = num[i];
        return dot_quote((t.name.empty() ? "#" + std::to_string(i) : t.name) + "\n" + std::string(to_string(t.op)) +
                         " " + typed_shape(t) + "\n" + f.name_of(bid[i]) + " (" +
                         std::string(to_string(f.asg.cause[i])) + ")");
    };
    std::string out;
    for (std::size_t k = 0; k < f.plan.splits.size(); ++k) {
        const split_rec& sp = f.plan.splits[k];
        out += "  subgraph cluster_" + std::to_string(k) + " {\n    label=" +
               dot_quote("split " + std::to_string(k) + ": " + f.name_of(sp.backend)) + ";\n    style=rounded;\n";
        for (std::uint32_t i = sp.first; i < sp.last; ++i)
            out += "    t" + std::to_string(i) + " [label=" + label(i) + ", fillcolor=\"" + colour(bid[i]) + "\"];\n";
        out += "  }\n";
    }
    for (std::size_t i = num.n_nodes(); i < num.tensors().size(); ++i)
        out += "  t" + std::to_string(i) + " [shape=ellipse, label=" + label(i) + ", fillcolor=\"" + colour(bid[i]) +
               "\"];\n";
    for (std::size_t i = 0; i < num.n_nodes(); ++i)
        for (std::int32_t s : num.srcs_of(i)) {
            if (s < 0) continue;
            const auto su = static_cast<std::size_t>(s);
            out += "  t" + std::to_string(su) + " -> t" + std::to_string(i);
            const std::int32_t cp =
                f.plan.copy_of.empty() ? -1 : f.plan.copy_of[su * nb + static_cast<std::size_t>(bid[i])];
            if (cp >= 0 && bid[su] != bid[i])
                out += " [style=dashed, color=\"#d62728\", label=" + dot_quote("copy " + human_bytes(num[su].nbytes())) +
                       "]";
            out += ";\n";
        }
    return out;
}

/// A DOT document around `body` (plan_to_dot's statements, or none).
inline std::string dot_document(const std::string& body) {
    return "digraph backplane {\n  rankdir=TB;\n  node [shape=box, style=filled, fontname=\"monospace\"];\n" + body +
           "}\n";
}

/// describe()'s first words: how many backends, and their names.
inline std::string describe_backends(std::span<const std::string_view> names) {
    std::string out = "scheduler: " + std::to_string(names.size()) + " backend(s) (";
    for (std::size_t b = 0; b < names.size(); ++b) out += (b ? ", " : "") + std::string(names[b]);
    return out + ")";
}

/// describe()'s last line: each backend's compute buffer bytes, with its buffer type
/// where scheduler_params::buffer_types gave one.
inline std::string describe_buffers(std::span<const std::string_view> names, const graph_allocator& galloc,
                                    std::span<const buffer_type_ref> types,
                                    std::span<const std::optional<buffer_type_ref>> overrides) {
    const std::size_t nb = names.size();
    std::string out = "buffers:";
    for (std::size_t b = 0; b < nb; ++b) {
        const bool overridden = b < overrides.size() && overrides[b].has_value();
        out += " " + std::string(names[b]) + " " + human_bytes(galloc.buffer_size(static_cast<int>(b))) +
               (overridden ? " (" + std::string(types[b].name()) + ")" : "") + (b + 1 < nb ? "," : "");
    }
    return out + "\n";
}

} // namespace backplane::detail
