// The compiled-in Vulkan entry, in a program that links backplane::vulkan: devices named
// Vulkan<i>, device-qualified features, lookups, a backend through the registry running
// a graph with the CPU as host; a machine without Vulkan gives a reason, not a crash.

#include <backplane/backplane.hpp>
#include <backplane/runtime.hpp>

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using namespace backplane;

TEST_CASE("registry: the compiled-in Vulkan backend", "[registry][vulkan]") {
    registry& r = registry::global();
    REQUIRE(r.regs().front().name() == "Vulkan"); // GPU backends before the host
    CHECK(r.origin("vulkan") == "built in");
    auto vk = r.reg("Vulkan");
    REQUIRE(vk);
    const auto devs = vk->devices();
    if (devs.empty()) {
        WARN("no Vulkan device: " << vk->enumeration_status().message());
        CHECK_FALSE(vk->enumeration_status());
        return;
    }
    CHECK(devs[0].name() == "Vulkan0");
    const auto features = vk->features();
    bool subgroup = false, validation = false;
    for (const auto& f : features) {
        subgroup = subgroup || f.name == "Vulkan0.subgroup_size";
        validation = validation || f.name == "validation";
    }
    CHECK(subgroup);
    CHECK(validation);
    // the device's own list is unqualified
    bool fp16 = false;
    for (const auto& f : devs[0].features()) fp16 = fp16 || f.name == "fp16";
    CHECK(fp16);
    CHECK(devs[0].get_if<vulkan_device>() != nullptr);
    CHECK(devs[0].caps().async);
    REQUIRE(devs[0].host_buffer_type());
    CHECK(devs[0].host_buffer_type()->is_host());
    CHECK_FALSE(devs[0].buffer_from_host_ptr(nullptr, 0)); // not offered: not_supported

    auto by_name = r.init_by_name("VULKAN0");
    REQUIRE(by_name);
    CHECK(by_name->caps().events);
    CHECK(by_name->caps().timing);
    // lavapipe is a CPU-kind device: init_best still prefers the native CPU for it
    if (devs[0].kind() == device_kind::cpu) {
        CHECK(r.best_device()->name() == "CPU");
        CHECK(r.device(device_kind::cpu)->name() == "CPU"); // by kind too
    }
    CHECK(devs[0].caps().events); // what its backends do

    // a graph through {Vulkan, CPU}
    std::vector<any_backend> backends;
    backends.push_back(std::move(*by_name));
    auto cpu = r.init_by_name("CPU", {.n_threads = 1});
    REQUIRE(cpu);
    backends.push_back(std::move(*cpu));
    context ctx(context_params{.no_alloc = true});
    tensor* a = ctx.new_tensor_2d(elem_type::f32, 32, 16);
    tensor* x = ctx.new_tensor_2d(elem_type::f32, 32, 4);
    a->set_input();
    x->set_input();
    tensor* y = soft_max(ctx, mul_mat(ctx, a, x));
    y->set_output();
    graph g;
    g.build_forward(y);
    dynamic_scheduler sched(backends);
    // assignments by backend object: the any_backend in the vector
    REQUIRE(sched.set_backend(*y, backends[1]));
    CHECK(sched.set_backend(*y, backends[0].ref()));
    REQUIRE(sched.alloc_graph(g));
    CHECK(sched.backend_of(*y) == 0);
    std::vector<float> av(32 * 16), xv(32 * 4);
    for (std::size_t i = 0; i < av.size(); ++i) av[i] = 0.01f * static_cast<float>(static_cast<int>(i % 13) - 6);
    for (std::size_t i = 0; i < xv.size(); ++i) xv[i] = 0.02f * static_cast<float>(static_cast<int>(i % 5) - 2);
    REQUIRE(tensor_set(*a, av.data(), 0, av.size() * sizeof(float)));
    REQUIRE(tensor_set(*x, xv.data(), 0, xv.size() * sizeof(float)));
    REQUIRE(sched.compute(g));
    std::vector<float> out(16 * 4);
    REQUIRE(tensor_get(*y, out.data(), 0, out.size() * sizeof(float)));
    for (int n = 0; n < 4; ++n) {
        std::vector<double> z(16);
        double mx = -1e30, sum = 0;
        for (int m = 0; m < 16; ++m) {
            double acc = 0;
            for (int k = 0; k < 32; ++k) acc += double(av[static_cast<std::size_t>(m * 32 + k)]) * xv[static_cast<std::size_t>(n * 32 + k)];
            z[static_cast<std::size_t>(m)] = acc;
            mx = std::max(mx, acc);
        }
        for (auto& v : z) sum += (v = std::exp(v - mx));
        for (int m = 0; m < 16; ++m)
            CHECK(out[static_cast<std::size_t>(n * 16 + m)] == Approx(z[static_cast<std::size_t>(m)] / sum).epsilon(1e-4));
    }
}
