// backplane-conformance: every backend of this build against the CPU reference kernels,
// over the op catalogue of <backplane/conformance.hpp> (the one the tests use).
//
//   backplane-conformance [test|perf|support|list] [options]
//
//   test     (default) runs every claimed op x type x shape case on every backend,
//            prints a matrix (op x backend: passed / run, "-" unsupported) and each
//            failure, shrunk to its smallest failing shape, with the one-line command
//            that reproduces it; exit status 1 when anything failed or when no case
//            ran (filters that select nothing are an error in every mode, never a pass)
//   perf     times each op on each backend at its perf shape: GFLOP/s (mul_mat) or GB/s
//   support  the supports_op matrix: op x operand types x backend
//   list     the backends and the catalogue's families
//
// Options (each may be repeated or comma-separated where it names several things):
//   --backend NAME   only these devices ("CPU", "Vulkan0", "CUDA0", case-insensitive)
//   --op NAME        only these families ("mul_mat", "add", ...)
//   --types A,B      only this operand type combination ("f16,f32")
//   --shape AxBxCxD  only this main shape (test and perf)
//   --variant N      only this variant
//   --seed N         the seed of the case list (default 1), or of the one case that
//                    --shape selects
//   --cases N        random shapes per type combination (default 6)
//   --reduced        a quick pass: 2 shapes per combination, f32 / f16 / q8_0 / i32 only
//   --no-shrink      report failures as found
//   --skip-missing   exit with 77 (a skipped test) when no --backend name matches a device
//   --min-time S     perf: seconds per case (default 0.3)
//
// Backend plugins found by the registry (libbackplane-<name>.so in the directories of
// BACKPLANE_BACKEND_DIR and beside this program) are loaded and tested like compiled-in
// backends. BACKPLANE_DISABLE_BACKENDS=vulkan hides backends (registry rule).

#include <backplane/backplane.hpp>
#include <backplane/conformance.hpp>
#include <backplane/runtime.hpp>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace {

using namespace backplane;
namespace cf = backplane::conformance;

struct options {
    std::string mode = "test";
    std::vector<std::string> backends, ops;
    std::optional<std::vector<elem_type>> types;
    std::optional<cf::extents> shape;
    std::optional<int> variant;
    std::uint32_t seed = 1;
    int cases = 6;
    bool reduced = false;
    bool shrink = true;
    bool skip_missing = false;
    double min_time = 0.3;
};

std::vector<std::string> split(std::string_view s) {
    std::vector<std::string> out;
    while (!s.empty()) {
        const auto c = s.find(',');
        out.emplace_back(s.substr(0, c));
        if (c == std::string_view::npos)
            break;
        s.remove_prefix(c + 1);
    }
    return out;
}

template <class T> std::optional<T> number(std::string_view s) {
    T v{};
    const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc{} || p != s.data() + s.size())
        return std::nullopt;
    return v;
}

int usage(const char* why) {
    std::fprintf(stderr,
                 "backplane-conformance: %s\n"
                 "usage: backplane-conformance [test|perf|support|list] [--backend NAME] [--op "
                 "NAME] [--types A,B]\n"
                 "       [--shape AxBxCxD] [--variant N] [--seed N] [--cases N] [--reduced] "
                 "[--no-shrink] [--skip-missing] [--min-time S]\n",
                 why);
    return 2;
}

std::optional<options> parse(int argc, char** argv, std::string& error) {
    options o;
    int i = 1;
    if (i < argc && argv[i][0] != '-')
        o.mode = argv[i++];
    if (o.mode != "test" && o.mode != "perf" && o.mode != "support" && o.mode != "list") {
        error = "unknown mode '" + o.mode + "'";
        return std::nullopt;
    }
    for (; i < argc; ++i) {
        const std::string_view a = argv[i];
        auto value = [&]() -> std::optional<std::string_view> {
            if (i + 1 >= argc)
                return std::nullopt;
            return std::string_view(argv[++i]);
        };
        if (a == "--reduced") {
            o.reduced = true;
        } else if (a == "--no-shrink") {
            o.shrink = false;
        } else if (a == "--skip-missing") {
            o.skip_missing = true;
        } else if (a == "--backend" || a == "--op" || a == "--types" || a == "--shape" ||
                   a == "--variant" || a == "--seed" || a == "--cases" || a == "--min-time") {
            const auto v = value();
            if (!v) {
                error = std::string(a) + " needs a value";
                return std::nullopt;
            }
            if (a == "--backend") {
                for (auto& s : split(*v))
                    o.backends.push_back(s);
            } else if (a == "--op") {
                for (auto& s : split(*v)) {
                    if (cf::find_family(s) == nullptr) {
                        error = "unknown op '" + s +
                                "' (backplane-conformance list shows the families)";
                        return std::nullopt;
                    }
                    o.ops.push_back(s);
                }
            } else if (a == "--types") {
                std::vector<elem_type> ts;
                for (auto& s : split(*v)) {
                    const auto t = parse_elem_type(s);
                    if (!t) {
                        error = "unknown type '" + s + "'";
                        return std::nullopt;
                    }
                    ts.push_back(*t);
                }
                o.types = ts;
            } else if (a == "--shape") {
                cf::extents ne{1, 1, 1, 1};
                std::string_view s = *v;
                for (std::size_t d = 0; d < max_dims && !s.empty(); ++d) {
                    const auto x = s.find('x');
                    const auto n = number<std::int64_t>(s.substr(0, x));
                    if (!n || *n <= 0) {
                        error = "bad shape '" + std::string(*v) + "' (want AxBxCxD)";
                        return std::nullopt;
                    }
                    ne[d] = *n;
                    s = x == std::string_view::npos ? std::string_view{} : s.substr(x + 1);
                }
                o.shape = ne;
            } else if (a == "--variant") {
                o.variant = number<int>(*v);
                if (!o.variant) {
                    error = "bad variant";
                    return std::nullopt;
                }
            } else if (a == "--seed") {
                const auto n = number<std::uint32_t>(*v);
                if (!n) {
                    error = "bad seed";
                    return std::nullopt;
                }
                o.seed = *n;
            } else if (a == "--cases") {
                const auto n = number<int>(*v);
                if (!n || *n <= 0) {
                    error = "bad case count";
                    return std::nullopt;
                }
                o.cases = *n;
            } else {
                o.min_time = std::strtod(std::string(*v).c_str(), nullptr);
            }
        } else {
            error = "unknown argument '" + std::string(a) + "'";
            return std::nullopt;
        }
    }
    if (o.reduced)
        o.cases = std::min(o.cases, 2);
    return o;
}

struct target {
    std::string name;
    any_backend backend;
};

/// The options that select cases, as typed ("--op rope --shape 3x1x1x1"), for the
/// message that says none matched.
std::string filters(const options& o) {
    std::string s;
    auto add = [&](std::string_view flag, const std::string& v) {
        s += (s.empty() ? "" : " ") + std::string(flag) + (v.empty() ? "" : " " + v);
    };
    auto joined = [](const std::vector<std::string>& v) {
        std::string j;
        for (const auto& x : v) j += (j.empty() ? "" : ",") + x;
        return j;
    };
    if (!o.backends.empty()) add("--backend", joined(o.backends));
    if (!o.ops.empty()) add("--op", joined(o.ops));
    if (o.types) add("--types", cf::types_arg(*o.types));
    if (o.shape) add("--shape", cf::shape_arg(*o.shape));
    if (o.variant) add("--variant", std::to_string(*o.variant));
    if (o.reduced) add("--reduced", "");
    return s.empty() ? "none" : s;
}

/// Exit status 1 with a message when a mode selected nothing to run: an empty run is
/// a failure, never a pass.
int nothing_selected(const options& o, const std::string& why) {
    std::fprintf(stderr, "backplane-conformance: %s: no case matched the filters (%s)%s%s\n",
                 o.mode.c_str(), filters(o).c_str(), why.empty() ? "" : "; ", why.c_str());
    return 1;
}

bool reduced_type(elem_type t) {
    return t == elem_type::f32 || t == elem_type::f16 || t == elem_type::q8_0 ||
           t == elem_type::i32;
}

std::vector<const cf::op_cases*> families(const options& o) {
    std::vector<const cf::op_cases*> out;
    for (const cf::op_cases& f : cf::catalogue())
        if (o.ops.empty() || std::find(o.ops.begin(), o.ops.end(), f.name) != o.ops.end())
            out.push_back(&f);
    return out;
}

/// The operand type combinations of f the catalogue claims, filtered by the options.
std::vector<std::vector<elem_type>> combinations(cpu_backend& ref, const cf::op_cases& f,
                                                 const options& o) {
    std::vector<std::vector<elem_type>> out;
    for (auto& types : cf::type_combinations(f)) {
        if (o.types && *o.types != types)
            continue;
        if (o.reduced && !std::all_of(types.begin(), types.end(), reduced_type))
            continue;
        if (cf::claimed(ref, f, types))
            out.push_back(types);
    }
    return out;
}

std::vector<cf::case_spec> specs(const cf::op_cases& f, const std::vector<elem_type>& types,
                                 const options& o) {
    if (o.shape) { // one case, exactly as named
        return {cf::case_spec{std::string(f.name), types, *o.shape, o.variant.value_or(0), o.seed}};
    }
    auto list = cf::cases_for(f, types, o.cases, o.seed);
    if (o.variant) {
        for (auto& c : list)
            c.variant = *o.variant;
    }
    return list;
}

std::string pad(std::string s, std::size_t w) {
    if (s.size() < w)
        s.append(w - s.size(), ' ');
    return s;
}

int run_test(const options& o, std::vector<target>& targets) {
    cpu_backend ref({.n_threads = 1, .reference = true});
    struct cell {
        int run = 0, passed = 0, unsupported = 0;
    };
    std::map<std::pair<std::string, std::string>, cell> matrix;
    std::vector<std::string> failures;
    int n_fail = 0, n_run = 0, n_unsupported = 0;
    std::string invalid; // why the first case that could not be built was not
    for (const cf::op_cases* f : families(o)) {
        const auto combos = combinations(ref, *f, o);
        for (target& t : targets) {
            cell& c = matrix[{std::string(f->name), t.name}];
            for (const auto& types : combos)
                for (const cf::case_spec& spec : specs(*f, types, o)) {
                    const cf::case_result r = cf::run_case(ref, t.backend, spec);
                    if (r.result == cf::outcome::unsupported) {
                        ++c.unsupported;
                        ++n_unsupported;
                        continue;
                    }
                    if (r.result == cf::outcome::invalid) {
                        if (invalid.empty())
                            invalid = r.message;
                        continue;
                    }
                    ++c.run;
                    ++n_run;
                    if (r.result == cf::outcome::pass) {
                        ++c.passed;
                        continue;
                    }
                    ++n_fail;
                    std::string line = t.name + ": " + cf::to_string(spec) + ": " + r.message;
                    if (o.shrink) {
                        const cf::case_spec small = cf::shrink(ref, t.backend, spec);
                        if (!(small == spec)) {
                            const cf::case_result rs = cf::run_case(ref, t.backend, small);
                            line += "\n    shrunk to " + cf::to_string(small) + ": " + rs.message;
                        }
                        line += "\n    repro: backplane-conformance test --backend " + t.name +
                                " " + cf::repro_args(small);
                    } else {
                        line += "\n    repro: backplane-conformance test --backend " + t.name +
                                " " + cf::repro_args(spec);
                    }
                    failures.push_back(line);
                    std::fprintf(stderr, "FAIL %s\n", line.c_str());
                }
        }
    }
    // the matrix
    std::printf("%s", pad("op", 10).c_str());
    for (const target& t : targets)
        std::printf(" %s", pad(t.name, 14).c_str());
    std::printf("\n");
    for (const cf::op_cases* f : families(o)) {
        std::printf("%s", pad(std::string(f->name), 10).c_str());
        for (const target& t : targets) {
            const cell& c = matrix[{std::string(f->name), t.name}];
            std::string s = c.run == 0 ? "-"
                                       : (c.passed == c.run ? "ok " : "FAIL ") +
                                             std::to_string(c.passed) + "/" + std::to_string(c.run);
            if (c.unsupported)
                s += " (" + std::to_string(c.unsupported) + " u)";
            std::printf(" %s", pad(s, 14).c_str());
        }
        std::printf("\n");
    }
    std::printf("\n%d cases run, %d failed (\"u\": cases the backend does not support; \"-\": none "
                "supported)\n",
                n_run, n_fail);
    for (const std::string& f : failures)
        std::printf("FAIL %s\n", f.c_str());
    if (n_run == 0)
        return nothing_selected(
            o, n_unsupported > 0 ? std::to_string(n_unsupported) +
                                       " case(s) selected, none supported by the backends named"
                                 : invalid);
    return n_fail == 0 ? 0 : 1;
}

int run_support(const options& o, std::vector<target>& targets) {
    cpu_backend ref({.n_threads = 1, .reference = true});
    std::printf("%s %s", pad("op", 10).c_str(), pad("types", 12).c_str());
    for (const target& t : targets)
        std::printf(" %s", pad(t.name, 8).c_str());
    std::printf("\n");
    int n_rows = 0;
    for (const cf::op_cases* f : families(o))
        for (const auto& types : combinations(ref, *f, o)) {
            ++n_rows;
            std::printf("%s %s", pad(std::string(f->name), 10).c_str(),
                        pad(cf::types_arg(types), 12).c_str());
            for (target& t : targets)
                std::printf(" %s",
                            pad(cf::supports(t.backend, *f, types) ? "yes" : "no", 8).c_str());
            std::printf("\n");
        }
    return n_rows == 0 ? nothing_selected(o, "") : 0;
}

int run_perf(const options& o, std::vector<target>& targets) {
    cpu_backend ref({.n_threads = 1, .reference = true});
    int n_fail = 0, n_timed = 0;
    std::printf("%s %s %s %s %s %s\n", pad("backend", 10).c_str(), pad("op", 10).c_str(),
                pad("types", 12).c_str(), pad("shape", 22).c_str(), pad("us/run", 12).c_str(),
                "rate");
    for (const cf::op_cases* f : families(o))
        for (const auto& types : combinations(ref, *f, o)) {
            if (!o.types && types != cf::plain_types(*f) &&
                !(f->name == "mul_mat" &&
                  types == std::vector<elem_type>{elem_type::f16, elem_type::f32}) &&
                !(f->name == "mul_mat" &&
                  types == std::vector<elem_type>{elem_type::q8_0, elem_type::f32}))
                continue; // the default perf list: f32 values (i32 indices), plus f16 and q8_0 weights
            const cf::case_spec spec{std::string(f->name), types, o.shape.value_or(f->perf_shape),
                                     o.variant.value_or(0), o.seed};
            for (target& t : targets) {
                const cf::perf_result r = cf::run_perf(t.backend, spec, o.min_time);
                std::string rate;
                if (r.result != cf::outcome::unsupported && r.result != cf::outcome::invalid)
                    ++n_timed;
                if (r.result == cf::outcome::pass) {
                    char buf[64];
                    if (r.gflops > 0)
                        std::snprintf(buf, sizeof buf, "%.2f GFLOP/s", r.gflops);
                    else
                        std::snprintf(buf, sizeof buf, "%.2f GB/s", r.gbytes);
                    rate = buf;
                } else if (r.result == cf::outcome::unsupported) {
                    rate = "unsupported";
                } else {
                    rate = "FAIL: " + r.message;
                    ++n_fail;
                }
                char us[32];
                std::snprintf(us, sizeof us, "%.1f", r.seconds * 1e6);
                std::printf("%s %s %s %s %s %s\n", pad(t.name, 10).c_str(),
                            pad(std::string(f->name), 10).c_str(),
                            pad(cf::types_arg(types), 12).c_str(),
                            pad(cf::shape_arg(spec.ne), 22).c_str(),
                            pad(r.result == cf::outcome::pass ? us : "", 12).c_str(), rate.c_str());
                std::fflush(stdout);
            }
        }
    if (n_timed == 0)
        return nothing_selected(o, "");
    return n_fail == 0 ? 0 : 1;
}

} // namespace

int main(int argc, char** argv) {
    try {
        std::string why;
        const auto o = parse(argc, argv, why);
        if (!o)
            return usage(why.c_str());

        // backend plugins (libbackplane-*.so in BACKPLANE_BACKEND_DIR and beside this
        // program) join the compiled-in backends; none found is no error
        if (auto loaded = registry::global().load_all(); loaded && loaded->loaded() > 0)
            std::fprintf(stderr, "backplane-conformance: %zu backend plugin(s) loaded\n",
                         loaded->loaded());

        std::vector<target> targets;
        for (any_device& d : registry::global().devices()) {
            const std::string name(d.name());
            if (!o->backends.empty() &&
                std::none_of(o->backends.begin(), o->backends.end(), [&](const std::string& b) {
                    return backplane::detail::iequal(b, name);
                }))
                continue;
            auto b = d.make_backend();
            if (!b) {
                std::fprintf(stderr, "backplane-conformance: %s: %s\n", name.c_str(),
                             b.error().describe().c_str());
                return 1;
            }
            targets.push_back({name, std::move(*b)});
        }
        if (o->mode == "list") {
            std::printf("backends:");
            for (const target& t : targets)
                std::printf(" %s", t.name.c_str());
            std::printf("\nfamilies (types, variants):\n");
            for (const cf::op_cases& f : cf::catalogue())
                std::printf("  %s (%d, %d)\n", std::string(f.name).c_str(), f.n_types,
                            f.n_variants);
            return 0;
        }
        if (targets.empty()) {
            std::fprintf(stderr,
                         "backplane-conformance: no device matches the --backend names given%s\n",
                         o->skip_missing ? ", skipping" : "");
            return o->skip_missing ? 77 : 1;
        }
        if (o->mode == "support")
            return run_support(*o, targets);
        if (o->mode == "perf")
            return run_perf(*o, targets);
        return run_test(*o, targets);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "backplane-conformance: %s\n", e.what());
        return 1;
    }
}
