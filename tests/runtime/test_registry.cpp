// The registry and the type-erased devices and backends, in a program with the CPU (and,
// where built, BLAS) compiled in: enumeration, lookup by name / kind / best, features,
// typed capability queries, run-time registration, and clear errors for every miss.

#include "../support/test_backend.hpp"

#include "../support/scoped_env.hpp"
#include <backplane/backplane.hpp>
#include <backplane/runtime.hpp>

#include <catch2/catch.hpp>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

using namespace backplane;
using backplane::test::scoped_env;

namespace {

bool has_feature(const std::vector<feature>& fs, std::string_view name) {
    for (const auto& f : fs)
        if (f.name == name) return true;
    return false;
}

/// A device with an extra buffer type: the CPU device plus a second host buffer type
/// (an "extra_buffer_types_device" model written the way a backend author would).
struct extra_bt_device {
    [[nodiscard]] std::string_view name() const noexcept { return "CPU-extra"; }
    [[nodiscard]] std::string_view description() const noexcept { return "CPU with an extra buffer type"; }
    [[nodiscard]] device_kind kind() const noexcept { return device_kind::cpu; }
    [[nodiscard]] memory_info memory() const noexcept { return cpu_device::instance().memory(); }
    [[nodiscard]] device_caps caps() const noexcept { return {}; }
    [[nodiscard]] const cpu_buffer_type& buffer_type() const noexcept { return cpu_buffer_type::instance(); }
    [[nodiscard]] bool supports_op(const tensor& t) const { return cpu_device::instance().supports_op(t); }
    [[nodiscard]] bool supports_buffer_type(const buffer_type_ref& bt) const { return bt.is_host(); }
    [[nodiscard]] std::vector<buffer_type_ref> extra_buffer_types() const { return {buffer_type_ref(extra)}; }
    [[nodiscard]] cpu_backend make_backend() const { return cpu_backend(cpu_backend_params{.n_threads = 1}); }
    test::test_device extra_dev{test::test_device_params{.name = "EXTRA"}};
    const test::test_buffer_type& extra = extra_dev.buffer_type();
};
static_assert(extra_buffer_types_device<extra_bt_device>);

/// A graph y = relu(W x + b) on host memory; returns (ctx holds everything).
struct small_graph {
    context ctx{context_params{.no_alloc = false}};
    tensor* w = ctx.new_tensor_2d(elem_type::f32, 16, 8);
    tensor* x = ctx.new_tensor_2d(elem_type::f32, 16, 3);
    tensor* b = ctx.new_tensor_2d(elem_type::f32, 8, 1);
    tensor* y = nullptr;
    graph g;
    small_graph() {
        auto fill = [](tensor* t, float step) {
            auto* p = static_cast<float*>(t->data);
            for (std::int64_t i = 0; i < t->nelements(); ++i) p[i] = step * static_cast<float>((i % 7) - 3);
        };
        fill(w, 0.25f);
        fill(x, 0.5f);
        fill(b, 1.0f);
        y = relu(ctx, add(ctx, mul_mat(ctx, w, x), b));
        y->set_output();
        g.build_forward(y);
    }
    [[nodiscard]] float expected(std::int64_t m, std::int64_t n) const {
        const auto* W = static_cast<const float*>(w->data);
        const auto* X = static_cast<const float*>(x->data);
        float acc = static_cast<const float*>(b->data)[m];
        for (std::int64_t k = 0; k < 16; ++k) acc += W[m * 16 + k] * X[n * 16 + k];
        return acc > 0 ? acc : 0;
    }
};

} // namespace

TEST_CASE("registry: the compiled-in backends are registered at first use, listed in order", "[registry]") {
    registry& r = registry::global();
    const auto regs = r.regs();
    REQUIRE(!regs.empty());
    CHECK(regs.back().name() == "CPU"); // the host comes last
    CHECK(r.origin("CPU") == "built in");
#if BACKPLANE_WITH_BLAS
    CHECK(r.reg("BLAS"));
#endif
    const auto devs = r.devices();
    REQUIRE(!devs.empty());
    CHECK(devs.back().name() == "CPU");
    CHECK(devs.back().kind() == device_kind::cpu);
    CHECK(devs.back().memory().total > 0);
    CHECK(devs.back().memory().free <= devs.back().memory().total);
    CHECK(devs.back().caps().buffer_from_host_ptr);
    CHECK(devs.back().buffer_type().is_host());
    // the CPU's features name the instruction sets the kernels use and the threads
    const auto cpu_features = r.reg("cpu")->features();
    CHECK(has_feature(cpu_features, "kernels"));
    CHECK(has_feature(cpu_features, "threads"));
    CHECK(cpu_features == devs.back().features());
    // the global registry is one object
    CHECK(&registry::global() == &r);
}

TEST_CASE("registry: lookup by name (case-insensitive), by kind and best, misses name what exists", "[registry]") {
    registry r;
    for (const char* name : {"CPU", "cpu", "Cpu"}) {
        auto d = r.device(name);
        REQUIRE(d);
        CHECK(d->name() == "CPU");
    }
    auto by_kind = r.device(device_kind::cpu);
    REQUIRE(by_kind);
    CHECK(r.devices(device_kind::cpu).size() >= 1);
    auto best = r.best_device();
    REQUIRE(best);
    CHECK(best->name() == "CPU"); // no GPU here: the CPU entry's device

    auto missing = r.device("Vulkan7");
    REQUIRE_FALSE(missing);
    CHECK(missing.error().code() == errc::not_found);
    CHECK_THAT(missing.error().message(), Catch::Contains("Vulkan7") && Catch::Contains("CPU"));
    auto no_gpu = r.init_by_type(device_kind::gpu);
    REQUIRE_FALSE(no_gpu);
    CHECK(no_gpu.error().code() == errc::not_found);
    CHECK_THAT(no_gpu.error().message(), Catch::Contains("gpu"));
    auto no_reg = r.reg("nothing");
    REQUIRE_FALSE(no_reg);
    CHECK(no_reg.error().code() == errc::not_found);
    CHECK_THAT(no_reg.error().message(), Catch::Contains("nothing") && Catch::Contains("CPU"));
    auto no_backend = r.init_by_name("nothing");
    REQUIRE_FALSE(no_backend);
    CHECK(no_backend.error().code() == errc::not_found);
    CHECK(r.unload("nothing").code() == errc::not_found);

    auto b = r.init_by_name("cpu", {.n_threads = 2});
    REQUIRE(b);
    CHECK(b->name() == "CPU");
    CHECK(b->n_threads() == 2);
    auto bb = r.init_best();
    REQUIRE(bb);
    CHECK(bb->device() == *best);
}

TEST_CASE("registry: an empty registry, run-time entries and devices, duplicate names", "[registry]") {
    registry r(registry_options{.builtins = false});
    CHECK(r.regs().empty());
    CHECK(r.devices().empty());
    auto none = r.best_device();
    REQUIRE_FALSE(none);
    CHECK(none.error().code() == errc::not_found);
    CHECK_THAT(r.device("CPU").error().message(), Catch::Contains("devices: none"));

    REQUIRE(r.add(cpu_reg()));
    CHECK(r.origin("CPU") == "added");
    const status dup = r.add(cpu_reg());
    CHECK(dup.code() == errc::invalid_argument);
    CHECK_THAT(dup.message(), Catch::Contains("already registered"));

    // a device registered at run time: a new entry, then a second device in it
    auto dev = std::make_shared<const test::test_device>(test::test_device_params{.name = "MYDEV0"});
    REQUIRE(r.add_device("Mine", any_device::make(dev)));
    REQUIRE(r.add_device("mine", any_device::make(std::make_shared<const test::test_device>(
                                       test::test_device_params{.name = "MYDEV1", .kind = device_kind::accel}))));
    REQUIRE(r.reg("Mine")->devices().size() == 2);
    auto found = r.device("mydev1");
    REQUIRE(found);
    CHECK(found->kind() == device_kind::accel);
    CHECK(r.device("Mine")->name() == "MYDEV0"); // an entry's name: its first device
    // a GPU now exists, so it is the best device
    auto best = r.best_device();
    REQUIRE(best);
    CHECK(best->name() == "MYDEV0");
    CHECK(best->get_if<test::test_device>() == dev.get());
    REQUIRE(r.unload("MINE"));
    CHECK_FALSE(r.reg("Mine"));
    CHECK(r.best_device()->name() == "CPU");
}

TEST_CASE("registry: BACKPLANE_DISABLE_BACKENDS keeps compiled-in backends out", "[registry]") {
    {
        scoped_env env("BACKPLANE_DISABLE_BACKENDS", "blas, Cpu");
        registry r;
        CHECK_FALSE(r.reg("CPU"));
        CHECK_FALSE(r.reg("BLAS"));
    }
    registry r;
    CHECK(r.reg("CPU"));
}

TEST_CASE("any_device: every member of the device concept, optional ones as typed queries", "[registry]") {
    const any_device cpu = any_device::borrow(cpu_device::instance());
    CHECK(cpu.name() == "CPU");
    CHECK(cpu.description() == cpu_device::instance().description());
    CHECK(cpu.kind() == device_kind::cpu);
    CHECK(cpu.get_if<cpu_device>() == &cpu_device::instance());
    CHECK(cpu.get_if<test::test_device>() == nullptr);
    CHECK(cpu.buffer_type() == buffer_type_ref(cpu_buffer_type::instance()));
    REQUIRE(cpu.host_buffer_type());
    CHECK(cpu.host_buffer_type()->is_host());
    CHECK(cpu.extra_buffer_types().empty());
    CHECK(cpu.supports_buffer_type(cpu_buffer_type::instance()));

    // buffer from host memory: the CPU wraps it; the test device (private memory) cannot
    std::vector<float> host(64, 2.0f);
    auto buf = cpu.buffer_from_host_ptr(host.data(), host.size() * sizeof(float));
    REQUIRE(buf);
    CHECK((*buf)->base() == host.data());
    auto tdev = any_device::make(std::make_shared<const test::test_device>(test::test_device_params{.name = "T"}));
    auto refused = tdev.buffer_from_host_ptr(host.data(), 16);
    REQUIRE_FALSE(refused);
    CHECK(refused.error().code() == errc::not_supported);
    CHECK_THAT(refused.error().message(), Catch::Contains("T"));
    CHECK_FALSE(tdev.host_buffer_type());
    CHECK_FALSE(tdev.buffer_type().is_host());
    CHECK(tdev.caps().events);
    CHECK(tdev.features().empty());

    // an extra buffer type is listed, and allocates
    auto extra = any_device::make(std::make_shared<const extra_bt_device>());
    auto extras = extra.extra_buffer_types();
    REQUIRE(extras.size() == 1);
    CHECK(extras[0].name() == "EXTRA");
    auto eb = extras[0].allocate(256);
    REQUIRE(eb);
    CHECK((*eb)->size() >= 256);

    // ops: the device's own answer
    context ctx(context_params{.no_alloc = true});
    tensor* a = ctx.new_tensor_2d(elem_type::f32, 4, 4);
    tensor* s = soft_max(ctx, a);
    CHECK(cpu.supports_op(*s) == cpu_device::instance().supports_op(*s));
    CHECK_FALSE(cpu.offload_op(*s));
}

TEST_CASE("any_backend: typed capabilities instead of looked-up functions", "[registry]") {
    const any_device cpu_dev = any_device::borrow(cpu_device::instance());
    auto cpu = cpu_dev.make_backend({.n_threads = 1});
    REQUIRE(cpu);
    const backend_caps c = cpu->caps();
    CHECK(c.n_threads);
    CHECK(c.abort_callback);
    CHECK(c.plans);
    CHECK_FALSE(c.async);
    CHECK_FALSE(c.events);
    CHECK(cpu->n_threads() == 1);
    REQUIRE(cpu->set_n_threads(2));
    CHECK(cpu->n_threads() == 2);
    CHECK(cpu->get_if<cpu_backend>()->n_threads() == 2);
    const status bad = cpu->set_n_threads(0);
    CHECK(bad.code() == errc::invalid_argument);
    CHECK(cpu->n_threads() == 2);

    small_graph sg;
    REQUIRE(cpu->compute(sg.g));
    for (std::int64_t n = 0; n < 3; ++n)
        for (std::int64_t m = 0; m < 8; ++m)
            CHECK(static_cast<const float*>(sg.y->data)[n * 8 + m] == Approx(sg.expected(m, n)));

    // the abort callback stops a compute
    int asked = 0;
    REQUIRE(cpu->set_abort_callback([&] { return ++asked >= 2; }));
    const status aborted = cpu->compute(sg.g);
    CHECK(aborted.code() == errc::aborted);
    CHECK(asked >= 2);
    REQUIRE(cpu->set_abort_callback({}));
    REQUIRE(cpu->compute(sg.g));

    // options given at creation
    bool called = false;
    auto with_cb = cpu_dev.make_backend({.n_threads = 1, .abort_callback = [&] { return called = true; }});
    REQUIRE(with_cb);
    CHECK(with_cb->compute(sg.g).code() == errc::aborted);
    CHECK(called);

    // a backend without them says so, naming itself
    auto tdev = any_device::make(std::make_shared<const test::test_device>(test::test_device_params{.name = "T0"}));
    auto tb = tdev.make_backend({.n_threads = 4}); // ignored where there are no threads
    REQUIRE(tb);
    CHECK(tb->caps().async);
    CHECK(tb->caps().events);
    CHECK_FALSE(tb->caps().n_threads);
    CHECK_FALSE(tb->n_threads());
    const status s1 = tb->set_n_threads(2);
    CHECK(s1.code() == errc::not_supported);
    CHECK_THAT(s1.message(), Catch::Contains("T0") && Catch::Contains("thread"));
    const status s2 = tb->set_abort_callback([] { return false; });
    CHECK(s2.code() == errc::not_supported);
    CHECK(tb->device() == tdev);
    CHECK(tb->get_if<test::test_backend>() != nullptr);
    CHECK(tb->get_if<cpu_backend>() == nullptr);

    // moved-from
    any_backend moved = std::move(*tb);
    CHECK(moved);
    CHECK_FALSE(*tb);
}

TEST_CASE("any_backend: asynchronous transfers where the backend has them, synchronous otherwise", "[registry]") {
    auto tdev = any_device::make(std::make_shared<const test::test_device>(test::test_device_params{.name = "T1"}));
    auto tb = tdev.make_backend();
    REQUIRE(tb);
    context ctx(context_params{.no_alloc = true});
    tensor* t = ctx.new_tensor_1d(elem_type::f32, 32);
    auto bufs = alloc_tensors(ctx, tdev.buffer_type());
    REQUIRE(bufs);
    std::vector<float> in(32), out(32, 0.0f);
    for (int i = 0; i < 32; ++i) in[static_cast<std::size_t>(i)] = static_cast<float>(i) * 0.5f;
    REQUIRE(tb->set_tensor_async(*t, in.data(), 0, sizeof(float) * 32));
    REQUIRE(tb->get_tensor_async(*t, out.data(), 0, sizeof(float) * 32));
    REQUIRE(tb->synchronize());
    CHECK(out == in);
    CHECK(tb->get_if<test::test_backend>()->counters().n_sets() == 1); // went through the stream

    // the CPU: synchronous through the buffer, same results; errors are statuses
    auto cpu = any_device::borrow(cpu_device::instance()).make_backend();
    REQUIRE(cpu);
    context hctx(context_params{.no_alloc = true});
    tensor* h = hctx.new_tensor_1d(elem_type::f32, 32);
    CHECK(cpu->set_tensor_async(*h, in.data(), 0, 16).code() == errc::invalid_argument); // no buffer yet
    auto hb = alloc_tensors(hctx, cpu->buffer_type());
    REQUIRE(hb);
    REQUIRE(cpu->set_tensor_async(*h, in.data(), 0, sizeof(float) * 32));
    std::fill(out.begin(), out.end(), 0.0f);
    REQUIRE(cpu->get_tensor_async(*h, out.data(), 0, sizeof(float) * 32));
    CHECK(out == in);
    CHECK(cpu->get_tensor_async(*h, out.data(), 0, sizeof(float) * 33).code() == errc::out_of_range);
}

TEST_CASE("any_device: a device whose make_backend fails gives its status", "[registry]") {
    // a Vulkan-like device that cannot make a stream: a result with an error
    struct failing_device : extra_bt_device {
        [[nodiscard]] std::string_view name() const noexcept { return "FAIL0"; }
        [[nodiscard]] result<cpu_backend> make_backend() const {
            return status(errc::device_error, "FAIL0: the device is lost");
        }
    };
    struct throwing_device : extra_bt_device {
        [[nodiscard]] std::string_view name() const noexcept { return "THROW0"; }
        [[nodiscard]] cpu_backend make_backend() const { throw std::runtime_error("driver exploded"); }
    };
    auto f = any_device::make(std::make_shared<const failing_device>()).make_backend();
    REQUIRE_FALSE(f);
    CHECK(f.error().code() == errc::device_error);
    CHECK_THAT(f.error().message(), Catch::Contains("lost"));
    auto t = any_device::make(std::make_shared<const throwing_device>()).make_backend();
    REQUIRE_FALSE(t);
    CHECK(t.error().code() == errc::failed);
    CHECK_THAT(t.error().message(), Catch::Contains("THROW0") && Catch::Contains("driver exploded"));
}

namespace {

/// A buffer type written without device_name (it does not model device_buffer_type).
struct unnamed_buffer_type {
    using buffer_t = host_buffer;
    [[nodiscard]] std::string_view name() const noexcept { return "unnamed"; }
    [[nodiscard]] std::size_t alignment() const noexcept { return host_alignment; }
    [[nodiscard]] std::size_t max_size() const noexcept { return std::size_t{1} << 30; }
    [[nodiscard]] std::size_t alloc_size(const tensor& t) const noexcept { return t.nbytes(); }
    [[nodiscard]] bool is_host() const noexcept { return true; }
    [[nodiscard]] result<host_buffer> allocate(std::size_t size) const {
        return cpu_buffer_type::instance().allocate(size);
    }
};
static_assert(buffer_type<unnamed_buffer_type> && !device_buffer_type<unnamed_buffer_type>);

} // namespace

TEST_CASE("buffer types name their device through buffer_type_ref and any_buffer_type", "[registry][buffer_type]") {
    // the CPU's memory is the CPU device's (BLAS computes in it too)
    CHECK(buffer_type_ref(cpu_buffer_type::instance()).device_name() == "CPU");
    const any_device cpu_dev = any_device::borrow(cpu_device::instance());
    const any_buffer_type cpu_bt = cpu_dev.buffer_type();
    CHECK(cpu_bt.device_name() == "CPU");
    REQUIRE(cpu_bt.device());
    CHECK(*cpu_bt.device() == cpu_dev);
    auto found = registry::global().device(cpu_bt.device_name());
    REQUIRE(found);
    CHECK(found->name() == "CPU");

    // a device of the test backend: both faces name it, and device() is the same handle
    const any_device tdev =
        any_device::make(std::make_shared<const test::test_device>(test::test_device_params{.name = "TDEV"}));
    const any_buffer_type tbt = tdev.buffer_type();
    CHECK(tbt.device_name() == "TDEV");
    CHECK(buffer_type_ref(tbt).device_name() == "TDEV");
    REQUIRE(tbt.device());
    CHECK(*tbt.device() == tdev);
    CHECK(tbt.device()->buffer_type() == tbt);

    // a buffer type handed out by a device but naming another: device() says nothing
    const any_device extra = any_device::make(std::make_shared<const extra_bt_device>());
    const auto extras = extra.extra_buffer_types();
    REQUIRE(extras.size() == 1);
    CHECK(extras[0].device_name() == "EXTRA");
    CHECK_FALSE(extras[0].device());

    // a buffer type that does not say: "" from both faces, and no device
    const unnamed_buffer_type unnamed;
    CHECK(buffer_type_ref(unnamed).device_name().empty());
    CHECK(any_buffer_type(unnamed).device_name().empty());
    CHECK_FALSE(any_buffer_type(unnamed).device());
}
