// Backend plugins: the test backend built as shared libraries (tests/runtime/plugins),
// loaded, used through the scheduler, unloaded and loaded again; variants chosen by
// score; every broken plugin refused with a clear status; the library really closed once
// the last object it made is gone. And the Vulkan backend as a plugin, where it is built.
// Then the dynamic scheduler over any_backend against the tuple scheduler (one file with
// the plugins: both use the random graphs of sched_fixtures.hpp).

#include "../sched/sched_fixtures.hpp"

#include "../support/scoped_env.hpp"
#include <backplane/runtime.hpp>

#include <catch2/catch.hpp>

#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <string>
#include <vector>

#include <dlfcn.h>

using namespace backplane;
using namespace backplane::test;

namespace {

const std::filesystem::path plugin_root = BP_PLUGIN_ROOT;
const std::filesystem::path single = plugin_root / "single" / "libbackplane-test.so";

/// Whether the library at `p` is mapped in this process now (without loading it).
bool is_mapped(const std::filesystem::path& p) {
    void* h = ::dlopen(p.c_str(), RTLD_LAZY | RTLD_NOLOAD);
    if (h == nullptr) return false;
    ::dlclose(h);
    return true;
}

/// Runs random graph `seed` with weights on `dev` (a non-host device) and the host,
/// through a dynamic scheduler over {a backend of dev, the CPU}; checks the outputs
/// against the CPU reference.
void run_random_graph(const any_device& dev, std::uint32_t seed) {
    auto b = dev.make_backend();
    REQUIRE(b);
    auto cpu = any_device::borrow(cpu_device::instance()).make_backend({.n_threads = 1});
    REQUIRE(cpu);
    std::vector<any_backend> backends;
    backends.push_back(std::move(*b));
    backends.push_back(std::move(*cpu));
    random_setup setup(seed, {dev.buffer_type(), cpu_buffer_type::instance()});
    random_graph& r = setup.r;
    dynamic_scheduler sched(backends);
    REQUIRE(sched.alloc_graph(r.g));
    fill_inputs(r, seed);
    const status s = sched.compute(r.g);
    INFO(sched.describe(1));
    REQUIRE(s);
    const auto expected = random_reference_outputs(seed, 2);
    for (std::size_t i = 0; i < r.outputs.size(); ++i)
        CHECK(nmse_of(expected[i], read_f32(*r.outputs[i])) <= (r.has_f16 ? 5e-4 : 1e-6));
}

} // namespace

TEST_CASE("plugin: loaded, used through the scheduler, unloaded, loaded again", "[registry][plugin]") {
    registry reg;
    for (int round = 0; round < 2; ++round) {
        INFO("round " << round);
        auto info = reg.load(single);
        REQUIRE(info);
        CHECK(info->name == "Test");
        CHECK(info->score == 10);
        CHECK(info->path == single);
        CHECK(reg.origin("test") == single.string());
        REQUIRE(reg.plugins().size() == 1);
        CHECK(is_mapped(single));

        auto test_reg = reg.reg("Test");
        REQUIRE(test_reg);
        CHECK(test_reg->features() == std::vector<feature>{{"variant", "default"}, {"score", "10"}});
        auto dev = reg.device("test1");
        REQUIRE(dev);
        CHECK(dev->name() == "TEST1");
        CHECK_THAT(std::string(dev->description()), Catch::Contains("plugin test device 1"));
        CHECK(dev->kind() == device_kind::gpu);
        CHECK(reg.best_device()->name() == "TEST0"); // a GPU beats the CPU
        // the plugin's types are its own: the host's instantiation does not match
        CHECK(dev->get_if<test_device>() == nullptr);

        for (std::uint32_t seed = 1; seed <= 6; ++seed) run_random_graph(*dev, 700 + seed + 10 * static_cast<std::uint32_t>(round));

        REQUIRE(reg.unload("test"));
        CHECK_FALSE(reg.reg("Test"));
        CHECK(reg.plugins().empty());
        // test_reg and dev still hold the library
        CHECK(is_mapped(single));
        dev.value() = any_device::borrow(cpu_device::instance());
        test_reg = status(errc::not_found, "dropped");
        CHECK_FALSE(is_mapped(single)); // the last object is gone: closed
    }
}

TEST_CASE("plugin: unloading never invalidates what the plugin made, the library closes after the last", "[registry][plugin]") {
    registry reg;
    REQUIRE(reg.load(single));
    auto dev = reg.device("TEST0");
    REQUIRE(dev);
    auto b = dev->make_backend();
    REQUIRE(b);
    auto bt = dev->buffer_type();
    context ctx(context_params{.no_alloc = true});
    tensor* t = ctx.new_tensor_1d(elem_type::f32, 100);
    auto bufs = alloc_tensors(ctx, bt);
    REQUIRE(bufs);
    dev.value() = any_device::borrow(cpu_device::instance()); // only the backend, the buffer type and the buffer hold it

    REQUIRE(reg.unload("Test"));
    CHECK(is_mapped(single));
    // the backend and the buffer still work after the registry let go
    std::vector<float> in(100), out(100);
    for (int i = 0; i < 100; ++i) in[static_cast<std::size_t>(i)] = 0.25f * static_cast<float>(i);
    REQUIRE(b->set_tensor_async(*t, in.data(), 0, sizeof(float) * in.size()));
    REQUIRE(b->synchronize());
    REQUIRE(tensor_get(*t, out.data(), 0, sizeof(float) * out.size()));
    CHECK(out == in);

    { const any_backend gone = std::move(*b); } // the backend goes
    CHECK(is_mapped(single));                   // the buffer (and the buffer type) remain
    bufs = status(errc::not_found, "dropped");
    CHECK(is_mapped(single)); // the buffer type still holds it
    bt = any_buffer_type(cpu_buffer_type::instance());
    CHECK_FALSE(is_mapped(single));

    // and it loads again, fresh
    REQUIRE(reg.load(single));
    CHECK(reg.device("TEST0"));
}

TEST_CASE("plugin: load_all loads the best variant of each backend, from the given and the listed directories",
          "[registry][plugin]") {
    {
        registry reg;
        auto report = reg.load_all(plugin_root / "variants");
        REQUIRE(report);
        INFO(report->describe());
        REQUIRE(report->attempts.size() == 3);
        CHECK(report->loaded() == 1);
        REQUIRE(reg.plugins().size() == 1);
        CHECK(reg.plugins()[0].score == 20);
        CHECK(reg.plugins()[0].path.filename() == "libbackplane-test-high.so");
        CHECK(reg.reg("Test")->features()[0].value == "high");
        for (const auto& a : report->attempts) {
            CHECK(a.name == "Test");
            if (a.path.filename() == "libbackplane-test-high.so") {
                CHECK(a.loaded);
                CHECK(a.why);
            } else if (a.path.filename() == "libbackplane-test-low.so") {
                CHECK_FALSE(a.loaded);
                CHECK_THAT(a.why.message(), Catch::Contains("scores higher"));
            } else {
                CHECK(a.path.filename() == "libbackplane-test-zero.so");
                CHECK_FALSE(a.loaded);
                CHECK(a.why.code() == errc::not_supported);
                CHECK_THAT(a.why.message(), Catch::Contains("cannot run on this machine"));
            }
        }
        // the losers were closed
        CHECK_FALSE(is_mapped(plugin_root / "variants" / "libbackplane-test-low.so"));
        CHECK_FALSE(is_mapped(plugin_root / "variants" / "libbackplane-test-zero.so"));
        // a second load_all: already registered
        auto again = reg.load_all(plugin_root / "variants");
        REQUIRE(again);
        CHECK(again->loaded() == 0);
        REQUIRE(reg.unload("Test"));
    }
    CHECK_FALSE(is_mapped(plugin_root / "variants" / "libbackplane-test-high.so"));

    // BACKPLANE_BACKEND_DIR adds directories; the executable's directory is searched last
    {
        scoped_env env("BACKPLANE_BACKEND_DIR", (plugin_root / "empty").string() + ":" + (plugin_root / "single").string());
        const auto path = registry::plugin_search_path(plugin_root / "empty");
        REQUIRE(path.size() >= 3);
        CHECK(path[0] == std::filesystem::weakly_canonical(plugin_root / "empty"));
        CHECK(path[1] == std::filesystem::weakly_canonical(plugin_root / "single")); // the duplicate removed
        CHECK(path.back() == std::filesystem::weakly_canonical(std::filesystem::read_symlink("/proc/self/exe").parent_path()));
        registry reg;
        auto report = reg.load_all(plugin_root / "empty");
        REQUIRE(report);
        CHECK(report->loaded() == 1);
        CHECK(reg.reg("Test"));
    }
    // BACKPLANE_DISABLE_BACKENDS applies to plugins too
    {
        scoped_env env("BACKPLANE_DISABLE_BACKENDS", "test");
        registry reg;
        auto report = reg.load_all(plugin_root / "single");
        REQUIRE(report);
        CHECK(report->loaded() == 0);
        CHECK_THAT(report->describe(), Catch::Contains("BACKPLANE_DISABLE_BACKENDS"));
    }
}

TEST_CASE("plugin: every failure is a clear status and leaves nothing loaded", "[registry][plugin]") {
    registry reg(registry_options{.builtins = false});
    const auto broken = plugin_root / "broken";
    struct expectation {
        const char* file;
        errc code;
        const char* says;
    };
    // the broken plugin claims plugin_api_version + 998 (tests/runtime/plugins/broken_plugin.cpp)
    const std::string bad_version = "plugin API version " + std::to_string(plugin_api_version + 998);
    const expectation cases[] = {
        {"libbackplane-badversion.so", errc::not_supported, bad_version.c_str()},
        {"libbackplane-badabi.so", errc::not_supported, "another compiler"},
        {"libbackplane-noentry.so", errc::not_found, "no entry point 'backplane_plugin_entry'"},
        {"libbackplane-notalib.so", errc::invalid_argument, "cannot be loaded as a shared library"},
        {"libbackplane-throwing.so", errc::failed, "no hardware for the throwing backend"},
        {"libbackplane-misnamed.so", errc::invalid_argument, "named 'Other'"},
    };
    for (const auto& c : cases) {
        INFO(c.file);
        auto r = reg.load(broken / c.file);
        REQUIRE_FALSE(r);
        CHECK(r.error().code() == c.code);
        CHECK_THAT(r.error().message(), Catch::Contains(c.file) && Catch::Contains(c.says));
        CHECK_FALSE(is_mapped(broken / c.file));
    }
    CHECK(reg.regs().empty());

    auto missing = reg.load(plugin_root / "libbackplane-nothere.so");
    REQUIRE_FALSE(missing);
    CHECK(missing.error().code() == errc::not_found);
    CHECK_THAT(missing.error().message(), Catch::Contains("no such file"));
    auto dir = reg.load(plugin_root / "single");
    REQUIRE_FALSE(dir);
    CHECK(dir.error().code() == errc::invalid_argument);
    CHECK_THAT(dir.error().message(), Catch::Contains("directory"));

    // a plugin whose devices cannot be enumerated loads, with no devices and the reason
    auto failing = reg.load(broken / "libbackplane-failing.so");
    REQUIRE(failing);
    auto fr = reg.reg("Failing");
    REQUIRE(fr);
    CHECK(fr->devices().empty());
    CHECK(fr->enumeration_status().code() == errc::device_error);
    auto nodev = reg.init_by_name("Failing");
    REQUIRE_FALSE(nodev);
    CHECK(nodev.error().code() == errc::not_found);
    CHECK_THAT(nodev.error().message(), Catch::Contains("driver did not answer"));
    fr = status(errc::not_found, "dropped");
    REQUIRE(reg.unload("failing"));
    CHECK_FALSE(is_mapped(broken / "libbackplane-failing.so"));

    // a second load of a loaded backend
    REQUIRE(reg.load(single));
    auto twice = reg.load(single);
    REQUIRE_FALSE(twice);
    CHECK(twice.error().code() == errc::invalid_argument);
    CHECK_THAT(twice.error().message(), Catch::Contains("already registered"));
    REQUIRE(reg.unload("Test"));

    // load_all over the broken directory: a report, one line per file, one loaded
    auto report = reg.load_all(broken);
    REQUIRE(report);
    INFO(report->describe());
    CHECK(report->attempts.size() == 7);
    CHECK(report->loaded() == 1); // "Failing" loads (and has no devices)
    REQUIRE(reg.unload("Failing"));

    // directories: one with no plugins, one that does not exist
    auto empty = reg.load_all(plugin_root / "empty");
    if (empty) { // the executable's directory may hold plugins on some installs
        CHECK(empty->loaded() == 0);
    } else {
        CHECK(empty.error().code() == errc::not_found);
        CHECK_THAT(empty.error().message(), Catch::Contains("no backend plugins") && Catch::Contains("empty"));
    }
    auto nodir = reg.load_all(plugin_root / "no-such-directory");
    REQUIRE_FALSE(nodir);
    CHECK(nodir.error().code() == errc::not_found);
    CHECK_THAT(nodir.error().message(), Catch::Contains("no-such-directory"));
    CHECK(reg.regs().empty());
}

TEST_CASE("plugin: the Vulkan backend as a plugin", "[registry][plugin][vulkan]") {
    const std::filesystem::path vk_plugin = BP_VULKAN_PLUGIN;
    if (vk_plugin.empty()) {
        WARN("the Vulkan backend is not built in this configuration: its plugin is not tested");
        return;
    }
    registry reg(registry_options{.builtins = false});
    for (int round = 0; round < 2; ++round) {
        INFO("round " << round);
        auto info = reg.load(vk_plugin);
        REQUIRE(info);
        CHECK(info->name == "Vulkan");
        auto dev = reg.device("vulkan0");
        REQUIRE(dev);
        CHECK_THAT(reg.reg("Vulkan")->features(), Catch::Predicate<std::vector<feature>>([](const auto& fs) {
                       for (const auto& f : fs)
                           if (f.name == "Vulkan0.subgroup_size") return true;
                       return false;
                   }));
        CHECK(dev->caps().async);
        REQUIRE(dev->host_buffer_type());
        for (std::uint32_t seed = 1; seed <= 4; ++seed) run_random_graph(*dev, 900 + seed + 10 * static_cast<std::uint32_t>(round));
        dev.value() = any_device::borrow(cpu_device::instance());
        REQUIRE(reg.unload("Vulkan"));
    }
}

// ---------------------------------------------------------------------------------------
// The scheduler over a run-time std::vector<any_backend> runs the same partitioner as the
// compile-time tuple: the same random graphs give identical plans (every node on the same
// backend for the same reason, the same splits and split inputs) and identical results,
// bit for bit, both equal to the CPU reference.

namespace {

template <class A, class B>
void check_same_plan(A& a, B& b, const random_graph& ra, const random_graph& rb) {
    REQUIRE(a.n_splits() == b.n_splits());
    REQUIRE(a.n_split_inputs() == b.n_split_inputs());
    REQUIRE(ra.g.n_nodes() == rb.g.n_nodes());
    for (std::size_t i = 0; i < ra.g.n_nodes(); ++i) {
        INFO("node " << ra.g.nodes()[i]->name);
        CHECK(a.backend_of(*ra.g.nodes()[i]) == b.backend_of(*rb.g.nodes()[i]));
        CHECK(a.cause_of(*ra.g.nodes()[i]) == b.cause_of(*rb.g.nodes()[i]));
    }
    for (std::size_t k = 0; k < a.n_splits(); ++k) {
        const split_info x = a.split_at(k), y = b.split_at(k);
        CHECK(x.backend == y.backend);
        CHECK(x.first == y.first);
        CHECK(x.last == y.last);
        CHECK(x.inputs.size() == y.inputs.size());
    }
}

} // namespace

TEST_CASE("dynamic scheduler over any_backend: the tuple scheduler's plans and results", "[registry][sched]") {
    for (std::uint32_t i = 0; i < 60; ++i) {
        const std::uint32_t seed = 31000 + i;
        INFO("seed " << seed);
        // the static face: concrete types
        test_device dev(random_support("TEST0", seed));
        test_backend tb = dev.make_backend();
        cpu_backend cpu(cpu_backend_params{.n_threads = 2});
        // the dynamic face: the same device, erased, and backends made through it
        const any_device adev = any_device::borrow(dev);
        std::vector<any_backend> backends;
        auto ab = adev.make_backend();
        REQUIRE(ab);
        backends.push_back(std::move(*ab));
        auto acpu = any_device::borrow(cpu_device::instance()).make_backend({.n_threads = 2});
        REQUIRE(acpu);
        backends.push_back(std::move(*acpu));

        const std::vector<buffer_type_ref> homes = {dev.buffer_type(), cpu_buffer_type::instance()};
        random_setup gs(seed, homes), gd(seed, homes);
        scheduler sched(tb, cpu);
        dynamic_scheduler dyn(backends);
        REQUIRE(sched.alloc_graph(gs.r.g));
        REQUIRE(dyn.alloc_graph(gd.r.g));
        check_same_plan(sched, dyn, gs.r, gd.r);
        fill_inputs(gs.r, seed);
        fill_inputs(gd.r, seed);
        REQUIRE(sched.compute(gs.r.g));
        REQUIRE(dyn.compute(gd.r.g));

        const auto expected = random_reference_outputs(seed, 2);
        REQUIRE(gs.r.outputs.size() == gd.r.outputs.size());
        for (std::size_t o = 0; o < gs.r.outputs.size(); ++o) {
            const auto a = read_f32(*gs.r.outputs[o]), b = read_f32(*gd.r.outputs[o]);
            REQUIRE(a.size() == b.size());
            CHECK(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0); // identical, bit for bit
            CHECK(nmse_of(expected[o], b) <= (gd.r.has_f16 ? 5e-4 : 1e-6));
        }
        // user assignments by backend object: the concrete one, the any_backend (index 1)
        if (i % 10 == 0) {
            tensor* last_s = gs.r.outputs.back();
            tensor* last_d = gd.r.outputs.back();
            REQUIRE(sched.set_backend(*last_s, cpu));
            REQUIRE(dyn.set_backend(*last_d, backends[1]));
            CHECK(dyn.set_backend(*last_d, tb).code() == errc::invalid_argument); // not one of dyn's
            REQUIRE(sched.alloc_graph(gs.r.g));
            REQUIRE(dyn.alloc_graph(gd.r.g));
            CHECK(sched.backend_of(*last_s) == 1);
            CHECK(dyn.backend_of(*last_d) == 1);
            check_same_plan(sched, dyn, gs.r, gd.r);
        }
        // the same graph again: no re-plan on either face
        REQUIRE(sched.alloc_graph(gs.r.g));
        REQUIRE(dyn.alloc_graph(gd.r.g));
        check_same_plan(sched, dyn, gs.r, gd.r);
    }
}
