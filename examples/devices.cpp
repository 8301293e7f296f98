// devices: what the registry sees on this machine, then one graph on the best device.
//
//   devices [--device NAME] [PLUGIN-DIR]
//
// 1. with PLUGIN-DIR, loads the backend plugins (libbackplane-*.so) found there, in the
//    directories of BACKPLANE_BACKEND_DIR and beside the executable, and says what
//    happened to each file;
// 2. lists every registered backend (name, where it comes from, features) and every
//    device with its properties (kind, memory, capabilities, buffer types);
// 3. computes y = w x + b with the weights w and b in the memory of the best device
//    (registry::init_best(): a GPU, else an integrated GPU, else the CPU; --device NAME
//    picks one by name instead, "vulkan0" say) and the CPU as the host fallback, in a
//    dynamic_scheduler over a std::vector<any_backend>, and checks y against the same
//    product computed here in plain C++.
//
// Every failure prints its status and makes the program exit with 1.
// BACKPLANE_DISABLE_BACKENDS=vulkan (a comma-separated list) hides compiled-in backends.

#include <backplane/backplane.hpp>
#include <backplane/runtime.hpp>
#include <backplane/sched.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace {

using namespace backplane;

constexpr std::size_t mib = std::size_t{1} << 20;

int fail(const char* what, const status& s) {
    std::fprintf(stderr, "devices: %s: %s\n", what, s.describe().c_str());
    return 1;
}

const char* yes_no(bool b) { return b ? "yes" : "no"; }

/// Items joined with " | ", wrapped before `width` columns, each line after the first
/// indented by `indent` spaces.
std::string wrap(const std::vector<std::string>& items, std::size_t indent, std::size_t width = 92) {
    std::string out;
    std::size_t col = indent;
    for (std::size_t i = 0; i < items.size(); ++i) {
        const std::string sep = i == 0 ? "" : " | ";
        if (i > 0 && col + sep.size() + items[i].size() > width) {
            out += " |\n" + std::string(indent, ' ');
            col = indent;
        } else {
            out += sep;
            col += sep.size();
        }
        out += items[i];
        col += items[i].size();
    }
    return out;
}

std::string features_line(const std::vector<feature>& fs, std::size_t indent) {
    if (fs.empty()) return "none";
    std::vector<std::string> items;
    for (const auto& f : fs) items.push_back(f.name + " = " + f.value);
    return wrap(items, indent);
}

std::string buffer_type_line(const any_buffer_type& bt) {
    return std::string(bt.name()) + " (alignment " + std::to_string(bt.alignment()) + ", " +
           (bt.is_host() ? "host memory" : "device memory") + ")";
}

void print_device(const any_device& d, std::size_t index, const std::string& backend_name) {
    const memory_info mem = d.memory();
    const device_caps caps = d.caps();
    std::printf("  %zu. %.*s: %.*s\n", index, static_cast<int>(d.name().size()), d.name().data(),
                static_cast<int>(d.description().size()), d.description().data());
    std::printf("       backend:         %s\n", backend_name.c_str());
    std::printf("       kind:            %.*s\n", static_cast<int>(to_string(d.kind()).size()), to_string(d.kind()).data());
    std::printf("       memory:          %zu MiB free / %zu MiB total\n", mem.free / mib, mem.total / mib);
    std::printf("       caps:            async %s, host buffer %s, buffer from host ptr %s, events %s\n",
                yes_no(caps.async), yes_no(caps.host_buffer), yes_no(caps.buffer_from_host_ptr), yes_no(caps.events));
    std::printf("       buffer type:     %s\n", buffer_type_line(d.buffer_type()).c_str());
    if (auto host = d.host_buffer_type())
        std::printf("       host buffer:     %s\n", buffer_type_line(*host).c_str());
    else
        std::printf("       host buffer:     none\n");
    for (const auto& bt : d.extra_buffer_types()) std::printf("       extra buffer:    %s\n", buffer_type_line(bt).c_str());
}

void print_registry(const registry& reg) {
    const std::vector<backend_reg> regs = reg.regs();
    std::printf("Backends (%zu):\n", regs.size());
    for (const auto& r : regs) {
        const auto ds = r.devices();
        std::printf("  %-8s %zu device(s), %s\n", r.name().c_str(), ds.size(), reg.origin(r.name()).c_str());
        if (const status why = r.enumeration_status(); !why) std::printf("           no devices: %s\n", why.describe().c_str());
        std::printf("           features: %s\n", features_line(r.features(), 21).c_str());
    }

    std::printf("\nDevices (%zu):\n", reg.devices().size());
    std::size_t index = 0;
    for (const auto& r : regs)
        for (const auto& d : r.devices()) print_device(d, index++, r.name());
}

/// y = w x + b: x [k, n] (n columns of k values), w [k, m], b [m, 1] broadcast over the
/// columns, y [m, n]; y[col][row] = sum_i w[row][i] * x[col][i] + b[row].
std::vector<float> reference(const std::vector<float>& w, const std::vector<float>& x, const std::vector<float>& b,
                             std::int64_t k, std::int64_t m, std::int64_t n) {
    std::vector<float> y(static_cast<std::size_t>(m * n));
    for (std::int64_t col = 0; col < n; ++col)
        for (std::int64_t row = 0; row < m; ++row) {
            double acc = 0;
            for (std::int64_t i = 0; i < k; ++i)
                acc += static_cast<double>(w[static_cast<std::size_t>(row * k + i)]) * x[static_cast<std::size_t>(col * k + i)];
            y[static_cast<std::size_t>(col * m + row)] = static_cast<float>(acc + b[static_cast<std::size_t>(row)]);
        }
    return y;
}

int run_graph(registry& reg, const std::optional<std::string>& device_name) {
    // The best device (or the one asked for), and the CPU as the host fallback: the last
    // backend of a scheduler must use host memory and runs whatever the others cannot.
    auto first = device_name ? reg.init_by_name(*device_name) : reg.init_best();
    if (!first) return fail(device_name ? "init_by_name" : "init_best", first.error());
    // The registry's CPU, or the compiled-in one when BACKPLANE_DISABLE_BACKENDS hides it.
    auto host_dev = reg.device("CPU");
    if (!host_dev) host_dev = any_device::borrow(cpu_device::instance());

    std::vector<any_backend> backends;
    backends.push_back(std::move(*first));
    if (backends.front().device() != *host_dev) {
        auto host = host_dev->make_backend();
        if (!host) return fail("the CPU backend", host.error());
        backends.push_back(std::move(*host));
    }
    const any_device& dev = backends.front().device();

    std::printf("\nRunning y = w x + b on ");
    for (std::size_t i = 0; i < backends.size(); ++i) {
        const backend_caps c = backends[i].caps();
        std::printf("%s%.*s (async %s, events %s, threads %s)", i == 0 ? "" : " + ",
                    static_cast<int>(backends[i].name().size()), backends[i].name().data(), yes_no(c.async),
                    yes_no(c.events), c.n_threads ? std::to_string(*backends[i].n_threads()).c_str() : "-");
    }
    std::printf("\n");

    // weights in the device's memory, written through their buffer
    constexpr std::int64_t k = 64, m = 8, n = 3;
    context wctx({.no_alloc = true});
    tensor* w = wctx.new_tensor(elem_type::f32, {k, m});
    tensor* b = wctx.new_tensor(elem_type::f32, {m, 1});
    w->name = "w";
    b->name = "b";
    auto weights = alloc_tensors(wctx, dev.buffer_type(), buffer_usage::weights);
    if (!weights) return fail("allocating the weights", weights.error());

    // multiples of 1/8 and 1/4: every product and partial sum is exact in f32
    std::vector<float> wv(static_cast<std::size_t>(k * m)), xv(static_cast<std::size_t>(k * n)),
        bv(static_cast<std::size_t>(m));
    for (std::size_t i = 0; i < wv.size(); ++i) wv[i] = static_cast<float>(static_cast<int>((i * 7) % 11) - 5) * 0.125f;
    for (std::size_t i = 0; i < xv.size(); ++i) xv[i] = static_cast<float>(static_cast<int>((i * 3) % 5) - 2) * 0.25f;
    for (std::size_t i = 0; i < bv.size(); ++i) bv[i] = static_cast<float>(i) * 0.5f - 1.0f;
    if (status s = tensor_set(*w, wv); !s) return fail("writing w", s);
    if (status s = tensor_set(*b, bv); !s) return fail("writing b", s);

    // the graph: x is an input (the scheduler places it in host memory), y an output
    context ctx({.no_alloc = true});
    tensor* x = ctx.new_tensor(elem_type::f32, {k, n});
    x->name = "x";
    x->set_input();
    tensor* y = add(ctx, mul_mat(ctx, w, x), b);
    y->name = "y";
    y->set_output();
    graph g(y);

    dynamic_scheduler sched(backends); // throws backplane::error when the last backend is not host memory
    if (status s = sched.alloc_graph(g); !s) return fail("alloc_graph", s);
    if (status s = tensor_set(*x, xv); !s) return fail("writing x", s);
    if (status s = sched.compute(g); !s) return fail("compute", s);
    std::printf("%s", sched.describe(1).c_str());

    auto out = tensor_get_all<float>(*y);
    if (!out) return fail("reading y", out.error());
    const std::vector<float> want = reference(wv, xv, bv, k, m, n);

    // the exact answer in f32; a small tolerance all the same, for a backend that computes
    // products in lower precision
    auto differs = [&](std::size_t i) { return !(std::fabs((*out)[i] - want[i]) <= 1e-4f * (1.0f + std::fabs(want[i]))); };
    std::printf("y (%lld x %lld), one line per column:\n", static_cast<long long>(m), static_cast<long long>(n));
    std::size_t wrong = 0;
    for (std::int64_t col = 0; col < n; ++col) {
        std::printf("  ");
        for (std::int64_t row = 0; row < m; ++row) {
            const auto i = static_cast<std::size_t>(col * m + row);
            std::printf(" %8.4f", static_cast<double>((*out)[i]));
            if (differs(i)) ++wrong;
        }
        std::printf("\n");
    }
    if (wrong != 0) {
        std::fprintf(stderr, "devices: %zu of %zu values differ from the host's:\n", wrong, want.size());
        for (std::size_t i = 0; i < want.size(); ++i)
            if (differs(i))
                std::fprintf(stderr, "  y[%zu] = %g, expected %g\n", i, static_cast<double>((*out)[i]),
                             static_cast<double>(want[i]));
        return 1;
    }
    std::printf("matches the host's values\n");
    return 0;
}

int run(int argc, char** argv) {
    std::optional<std::string> plugin_dir, device_name;
    for (int i = 1; i < argc; ++i) {
        const std::string_view a = argv[i];
        if (a == "--device" && i + 1 < argc) {
            device_name = argv[++i];
        } else if (a == "-h" || a == "--help" || (!a.empty() && a.front() == '-') || plugin_dir) {
            const bool help = a == "-h" || a == "--help";
            if (!help) std::fprintf(stderr, "devices: unexpected argument '%s'\n", argv[i]);
            std::fprintf(help ? stdout : stderr, "usage: %s [--device NAME] [PLUGIN-DIR]\n", argv[0]);
            return help ? 0 : 2;
        } else {
            plugin_dir = std::string(a);
        }
    }

    registry& reg = registry::global();
    if (plugin_dir) {
        auto report = reg.load_all(std::filesystem::path(*plugin_dir));
        if (!report) return fail("load_all", report.error());
        std::printf("Plugins: searched");
        for (const auto& d : report->searched) std::printf(" %s", d.string().c_str());
        std::printf("; %zu loaded\n%s\n", report->loaded(), report->describe().c_str());
    }

    print_registry(reg);
    auto best = reg.best_device();
    if (!best) return fail("best_device", best.error());
    std::printf("\nBest device: %.*s\n", static_cast<int>(best->name().size()), best->name().data());

    return run_graph(reg, device_name);
}

} // namespace

int main(int argc, char** argv) {
    try {
        return run(argc, argv);
    } catch (const std::exception& e) { // building a graph or a scheduler throws backplane::error
        std::fprintf(stderr, "devices: %s\n", e.what());
        return 1;
    }
}
