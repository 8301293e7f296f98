// The CUDA runtime as the backend sees it: the devices the driver reports, or, on a
// machine without a usable driver, a clear not_supported status (never an abort).

#include <backplane/backends/cuda/runtime.hpp>

#include <catch2/catch.hpp>

#include <string>

using namespace backplane;

TEST_CASE("cuda: devices from the driver, or a clear reason why there are none", "[cuda]") {
    const std::string runtime = cuda::runtime_version();
    CHECK(runtime != "unknown");
    auto devs = cuda::physical_devices();
    if (!devs) {
        // no driver (this CI machine), a driver older than the runtime, or no device
        CHECK(devs.error().code() == errc::not_supported);
        CHECK_THAT(devs.error().message(), Catch::Contains("cuda:") && Catch::Contains("counting devices") ||
                                               Catch::Contains("no device"));
        WARN("no usable CUDA device (driver " << cuda::driver_version() << ", runtime " << runtime
                                              << "): " << devs.error().message());
        // asking again gives the same answer: the error is not sticky
        auto again = cuda::physical_devices();
        REQUIRE_FALSE(again);
        CHECK(again.error().code() == devs.error().code());
        return;
    }
    REQUIRE(!devs->empty());
    CHECK(cuda::driver_version() != "none");
    for (const auto& d : *devs) {
        INFO("device " << d.index << ": " << d.name);
        CHECK(!d.name.empty());
        CHECK(d.cc_major >= 5);
        CHECK(d.total_memory > 0);
        CHECK(d.multiprocessors > 0);
    }
}

TEST_CASE("cuda: runtime errors become statuses with the runtime's name, text and code", "[cuda]") {
    const status oom = cuda::detail::fail("allocating 1 TiB", cudaErrorMemoryAllocation);
    CHECK(oom.code() == errc::alloc_failed);
    CHECK(oom.native() == static_cast<std::int32_t>(cudaErrorMemoryAllocation));
    CHECK_THAT(oom.message(), Catch::Contains("allocating 1 TiB") && Catch::Contains("cudaErrorMemoryAllocation"));
    CHECK(cuda::detail::fail("x", cudaErrorInsufficientDriver).code() == errc::not_supported);
    CHECK(cuda::detail::fail("x", cudaErrorNoDevice).code() == errc::not_supported);
    CHECK(cuda::detail::fail("x", cudaErrorLaunchFailure).code() == errc::device_error);
    CHECK(cuda::detail::check("x", cudaSuccess));
}
