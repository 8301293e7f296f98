// The CUDA backend's memory: device buffers, pinned host buffers and user memory pinned
// in place. With a GPU: round trips, fills, device-side copies (same device, peers,
// uploads) against the values written. Without one: every allocation is a clear
// not_supported status, never an abort.

#include <backplane/backends/cuda/memory.hpp>
#include <backplane/memory.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <numeric>
#include <vector>

using namespace backplane;

namespace {

bool have_gpu() {
    auto d = cuda::physical_devices();
    if (!d) WARN("no usable CUDA device, checking the error paths only: " << d.error().message());
    return static_cast<bool>(d);
}

std::vector<float> iota_floats(std::size_t n, float from) {
    std::vector<float> v(n);
    std::iota(v.begin(), v.end(), from);
    return v;
}

} // namespace

TEST_CASE("cuda memory: no driver means clear statuses", "[cuda]") {
    if (have_gpu()) {
        auto bad = cuda_buffer_type::of(1 << 20);
        REQUIRE_FALSE(bad);
        CHECK(bad.error().code() == errc::invalid_argument);
        CHECK_THAT(bad.error().message(), Catch::Contains("no device"));
        return;
    }
    auto bt = cuda_buffer_type::of(0);
    REQUIRE_FALSE(bt);
    CHECK(bt.error().code() == errc::not_supported);
    auto pinned = cuda_host_buffer_type::instance().allocate(4096);
    REQUIRE_FALSE(pinned);
    CHECK(pinned.error().code() == errc::not_supported);
    CHECK_THAT(pinned.error().message(), Catch::Contains("pinned host memory") && Catch::Contains("4096"));
    std::vector<float> host(256);
    auto reg = cuda_host_buffer::register_memory(host.data(), host.size() * sizeof(float));
    REQUIRE_FALSE(reg);
    CHECK(reg.error().code() == errc::not_supported);
    // and the generic path through alloc_tensors reports it too
    context ctx(context_params{.no_alloc = true});
    ctx.new_tensor_1d(elem_type::f32, 16);
    auto bufs = alloc_tensors(ctx, cuda_host_buffer_type::instance());
    REQUIRE_FALSE(bufs);
    CHECK(bufs.error().code() == errc::not_supported);
}

TEST_CASE("cuda memory: argument errors need no device", "[cuda]") {
    auto null = cuda_host_buffer::register_memory(nullptr, 64);
    REQUIRE_FALSE(null);
    CHECK(null.error().code() == errc::invalid_argument);
    float x = 0;
    auto empty = cuda_host_buffer::register_memory(&x, 0);
    REQUIRE_FALSE(empty);
    CHECK(empty.error().code() == errc::invalid_argument);
    CHECK(cuda_host_buffer_type::instance().is_host());
    CHECK(cuda_host_buffer_type::instance().name() == "CUDA_Host");
}

TEST_CASE("cuda memory: device buffers round-trip, fill and copy on the device", "[cuda]") {
    if (!have_gpu()) return;
    auto bt = cuda_buffer_type::of(0);
    REQUIRE(bt);
    CHECK((*bt)->name() == "CUDA0");
    CHECK_FALSE((*bt)->is_host());
    CHECK(cuda_buffer_type::of(0).value() == *bt); // one object per device

    context ctx(context_params{.no_alloc = true});
    tensor* a = ctx.new_tensor_2d(elem_type::f32, 300, 7);
    tensor* b = ctx.new_tensor_2d(elem_type::f32, 300, 7);
    auto bufs = alloc_tensors(ctx, **bt);
    REQUIRE(bufs);
    const auto in = iota_floats(300 * 7, -100.0f);
    REQUIRE(tensor_set(*a, in.data(), 0, in.size() * sizeof(float)));
    std::vector<float> out(in.size());
    REQUIRE(tensor_get(*a, out.data(), 0, out.size() * sizeof(float)));
    CHECK(out == in);
    // a byte range in the middle
    REQUIRE(tensor_get(*a, out.data(), 400, 40));
    CHECK(std::equal(out.begin(), out.begin() + 10, in.begin() + 100));
    // fill, then copy a -> b on the device
    REQUIRE(tensor_memset(*b, 0, 0, b->nbytes()));
    REQUIRE(b->buffer->copy_tensor(*a, *b));
    REQUIRE(tensor_get(*b, out.data(), 0, out.size() * sizeof(float)));
    CHECK(out == in);
    // out of range is the generic layer's status
    CHECK(tensor_get(*a, out.data(), 0, a->nbytes() + 4).code() == errc::out_of_range);
    // an impossible allocation is alloc_failed, and the device stays usable
    auto huge = (*bt)->allocate((*bt)->max_size() * 4);
    REQUIRE_FALSE(huge);
    CHECK(huge.error().code() == errc::alloc_failed);
    REQUIRE(tensor_get(*a, out.data(), 0, out.size() * sizeof(float)));
    CHECK(out == in);
}

TEST_CASE("cuda memory: pinned and registered host memory", "[cuda]") {
    if (!have_gpu()) return;
    context ctx(context_params{.no_alloc = true});
    tensor* h = ctx.new_tensor_1d(elem_type::f32, 1000);
    auto bufs = alloc_tensors(ctx, cuda_host_buffer_type::instance());
    REQUIRE(bufs);
    const auto in = iota_floats(1000, 0.5f);
    REQUIRE(tensor_set(*h, in.data(), 0, in.size() * sizeof(float)));
    CHECK(std::equal(in.begin(), in.end(), static_cast<const float*>(h->data))); // host memory, in place

    std::vector<float> user(1024, 1.0f);
    auto reg = cuda_host_buffer::register_memory(user.data(), user.size() * sizeof(float));
    REQUIRE(reg);
    CHECK(reg->registered());
    CHECK(reg->base() == user.data());

    // an upload from pinned memory into a device tensor
    auto bt = cuda_buffer_type::of(0);
    REQUIRE(bt);
    context dctx(context_params{.no_alloc = true});
    tensor* d = dctx.new_tensor_1d(elem_type::f32, 1000);
    auto dbufs = alloc_tensors(dctx, **bt);
    REQUIRE(dbufs);
    REQUIRE(d->buffer->copy_tensor(*h, *d));
    std::vector<float> out(1000);
    REQUIRE(tensor_get(*d, out.data(), 0, out.size() * sizeof(float)));
    CHECK(out == in);
}
