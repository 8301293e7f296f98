// The Vulkan backend under misuse (label vulkan; bodies in
// tests/support/device_safety_cases.hpp): memory freed while work that uses it is still
// queued (the work keeps it alive), a backend destroyed with work queued, and get_rows
// indices out of range (errc::out_of_range at synchronize, as on the CPU). Staging forced
// on and off. Every validation-layer message fails the test. Without the keep-alive the
// first two crash lavapipe's queue thread, which the asan preset reports. Then the
// device its buffer types name (buffer_type_ref::device_name, any_buffer_type::device).

#include <backplane/backends/vulkan.hpp>
#include <backplane/runtime.hpp>

#include "../../support/device_safety_cases.hpp"

#include <catch2/catch.hpp>

#include "../../support/vulkan_test_support.hpp"

#include <cstdlib>
#include <optional>
#include <string>

using namespace backplane;
using backplane::test::open_or_skip;
using backplane::test::check_validation;

TEST_CASE("vulkan lifetime: buffers freed while a compute and a read that use them are queued stay alive until done",
          "[vulkan][lifetime]") {
    for (const bool staging : {false, true}) {
        auto dev = open_or_skip(staging);
        if (!dev) return;
        INFO("staging forced: " << staging);
        auto be = dev->make_backend();
        REQUIRE(be);
        test::check_free_while_queued(*dev, *be, true);
    }
    check_validation();
}

TEST_CASE("vulkan lifetime: a backend destroyed with work queued waits for it and queued transfers keep their memory",
          "[vulkan][lifetime]") {
    for (const bool staging : {false, true}) {
        auto dev = open_or_skip(staging);
        if (!dev) return;
        INFO("staging forced: " << staging);
        test::check_destroy_while_queued(*dev);
    }
    check_validation();
}

TEST_CASE("vulkan get_rows and set_rows: an index out of range is errc::out_of_range at synchronize as on the CPU",
          "[vulkan][get_rows][set_rows][errors]") {
    auto dev = open_or_skip(false);
    if (!dev) return;
    test::check_get_rows_out_of_range(*dev);
    test::check_set_rows_out_of_range(*dev);
    check_validation();
}

TEST_CASE("vulkan add_id: an expert id out of range is errc::out_of_range at synchronize as on the CPU",
          "[vulkan][add_id][errors]") {
    auto dev = open_or_skip(false);
    if (!dev) return;
    test::check_add_id_out_of_range(*dev);
    check_validation();
}

TEST_CASE("vulkan ssm_scan: a state id out of range is errc::out_of_range at synchronize as on the CPU",
          "[vulkan][ssm_scan][errors]") {
    auto dev = open_or_skip(false);
    if (!dev) return;
    test::check_ssm_scan_out_of_range(*dev);
    check_validation();
}

TEST_CASE("vulkan mul_mat_id: an expert id out of range is errc::out_of_range at synchronize as on the CPU",
          "[vulkan][mul_mat_id][errors]") {
    auto dev = open_or_skip(false);
    if (!dev) return;
    test::check_mul_mat_id_out_of_range(*dev);
    check_validation();
}

TEST_CASE("vulkan get_rows: an out-of-range index fails a scheduler's compute", "[vulkan][get_rows][errors]") {
    auto dev = open_or_skip(false);
    if (!dev) return;
    test::check_get_rows_out_of_range_scheduled(*dev);
    check_validation();
}

TEST_CASE("vulkan buffer types name their device", "[vulkan][buffer_type]") {
    auto dev = vulkan_device::open({.index = 0, .name = "VkNamed"});
    if (!dev) {
        WARN("no Vulkan device, skipping: " << dev.error().describe());
        return;
    }
    CHECK(buffer_type_ref(dev->buffer_type()).device_name() == "VkNamed");
    CHECK(buffer_type_ref(dev->host_buffer_type()).device_name() == "VkNamed");
    const any_device any = any_device::make(*dev);
    const auto host = any.host_buffer_type();
    REQUIRE(host);
    CHECK(host->device_name() == "VkNamed");
    REQUIRE(host->device());
    CHECK(*host->device() == any);
    REQUIRE(any.buffer_type().device());
    CHECK(any.buffer_type().device()->name() == "VkNamed");
}
