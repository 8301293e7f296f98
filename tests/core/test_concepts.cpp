// The backend contracts: small conforming and non-conforming models written here prove
// that each concept and each refinement holds exactly when the member exists with the
// right signature; the real models (CPU backend, device, buffer type, host buffer) are
// checked again. Then the runtime face generated from the models: make_buffer and the
// buffer handle (optional capabilities and their defaults), buffer_type_ref, and the
// status / result<T> error types.
//
// Non-conforming models are written by deriving from a conforming one and hiding one
// member with a wrong signature, or by leaving a member out of the mixins that make up a
// model; each says what is wrong with it.

#include <backplane/backends/cpu.hpp>
#include <backplane/core/concepts.hpp>
#include <backplane/core/error.hpp>
#include <backplane/memory/buffer.hpp>
#include <backplane/memory/host_buffer.hpp>

#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

using namespace backplane;
using Catch::Matchers::Contains;

namespace model {

// ---------------------------------------------------------------------------------------
// buffers

struct buffer_core { // everything a buffer needs except clear()
    void* base() const { return nullptr; }
    std::size_t size() const { return 0; }
    status set_tensor(tensor&, const void*, std::size_t, std::size_t) { return {}; }
    status get_tensor(const tensor&, void*, std::size_t, std::size_t) { return {}; }
    status memset_tensor(tensor&, std::uint8_t, std::size_t, std::size_t) { return {}; }
};
struct with_clear {
    status clear(std::uint8_t) { return {}; }
};

struct buffer_ok : buffer_core, with_clear {};
struct buffer_no_clear : buffer_core {};
struct buffer_set_returns_bool : buffer_ok {
    bool set_tensor(tensor&, const void*, std::size_t, std::size_t) { return true; }
};
struct buffer_get_takes_mutable : buffer_ok { // get_tensor must accept a const tensor
    status get_tensor(tensor&, void*, std::size_t, std::size_t) { return {}; }
};
struct buffer_base_returns_int : buffer_ok {
    int base() const { return 0; }
};
struct buffer_size_not_const : buffer_ok {
    std::size_t size() { return 0; }
};
struct buffer_immovable : buffer_ok {
    buffer_immovable() = default;
    buffer_immovable(buffer_immovable&&) = delete;
};

struct buffer_with_init : buffer_ok {
    status init_tensor(tensor&) { return {}; }
};
struct buffer_init_returns_void : buffer_ok {
    void init_tensor(tensor&) {}
};
struct not_a_buffer_with_init : buffer_no_clear {
    status init_tensor(tensor&) { return {}; }
};
struct buffer_with_copy : buffer_ok {
    bool copy_tensor(const tensor&, tensor&) { return false; }
};
struct buffer_copy_returns_status : buffer_ok {
    status copy_tensor(const tensor&, tensor&) { return {}; }
};
struct buffer_copy_takes_mutable_src : buffer_ok {
    bool copy_tensor(tensor&, tensor&) { return false; }
};
struct buffer_with_reset : buffer_ok {
    void reset() {}
};
struct buffer_reset_needs_arg : buffer_ok {
    void reset(int) {}
};

// ---------------------------------------------------------------------------------------
// buffer types

template <class Buffer>
struct buffer_type_of {
    using buffer_t = Buffer;
    std::string_view name() const { return "test"; }
    std::size_t alignment() const { return 32; }
    std::size_t max_size() const { return 1u << 20; }
    std::size_t alloc_size(const tensor& t) const { return t.nbytes(); }
    bool is_host() const { return false; }
    result<Buffer> allocate(std::size_t) const { return status(errc::alloc_failed, "test type allocates nothing"); }
};
using buffer_type_ok = buffer_type_of<buffer_ok>;

struct buffer_type_allocate_returns_buffer : buffer_type_ok {
    buffer_ok allocate(std::size_t) const { return {}; }
};
struct buffer_type_allocate_returns_other_result : buffer_type_ok {
    result<buffer_with_init> allocate(std::size_t) const { return buffer_with_init{}; }
};
using buffer_type_of_non_buffer = buffer_type_of<buffer_no_clear>;
struct buffer_type_without_buffer_t {
    std::string_view name() const { return "test"; }
    std::size_t alignment() const { return 32; }
    std::size_t max_size() const { return 1u << 20; }
    std::size_t alloc_size(const tensor& t) const { return t.nbytes(); }
    bool is_host() const { return false; }
    result<buffer_ok> allocate(std::size_t) const { return buffer_ok{}; }
};
struct buffer_type_name_returns_int : buffer_type_ok {
    int name() const { return 0; }
};
struct buffer_type_alloc_size_of_nothing : buffer_type_ok {
    std::size_t alloc_size() const { return 0; }
};
struct buffer_type_non_const_allocate : buffer_type_ok {
    result<buffer_ok> allocate(std::size_t) { return buffer_ok{}; }
};

struct host_type_ok : buffer_type_ok {
    static constexpr bool host_memory = true;
};
struct host_type_false : buffer_type_ok {
    static constexpr bool host_memory = false;
};
struct host_memory_but_no_buffer_type {
    static constexpr bool host_memory = true;
};

// ---------------------------------------------------------------------------------------
// events

struct event_ok {
    status synchronize() { return {}; }
};
struct event_sync_returns_void {
    void synchronize() {}
};
struct event_immovable {
    event_immovable() = default;
    event_immovable(event_immovable&&) = delete;
    status synchronize() { return {}; }
};

// ---------------------------------------------------------------------------------------
// devices

struct backend_ok;

struct device_core { // everything but make_backend()
    std::string_view name() const { return "TEST"; }
    std::string_view description() const { return "a test device"; }
    device_kind kind() const { return device_kind::accel; }
    memory_info memory() const { return {1, 2}; }
    device_caps caps() const { return {}; }
    const buffer_type_ok& buffer_type() const { return bt; }
    bool supports_op(const tensor&) const { return true; }
    bool supports_buffer_type(const buffer_type_ref&) const { return true; }
    buffer_type_ok bt;
};
struct with_make_backend {
    backend_ok make_backend() const; // defined once backend_ok is complete
};

struct device_ok : device_core, with_make_backend {};
struct device_no_make_backend : device_core {};
struct device_kind_returns_int : device_ok {
    int kind() const { return 0; }
};
struct device_memory_returns_pair : device_ok {
    std::pair<std::size_t, std::size_t> memory() const { return {}; }
};
struct device_buffer_type_by_value : device_ok { // must be a reference to a long-lived object
    buffer_type_ok buffer_type() const { return {}; }
};
struct device_buffer_type_not_a_buffer_type : device_ok {
    const buffer_type_of_non_buffer& buffer_type() const { return nb; }
    buffer_type_of_non_buffer nb;
};
struct device_supports_only_its_own_type : device_ok { // must accept any buffer_type_ref
    bool supports_buffer_type(const buffer_type_ok&) const { return true; }
};

struct device_with_host_type : device_ok {
    const host_type_ok& host_buffer_type() const { return ht; }
    host_type_ok ht;
};
struct device_host_type_by_value : device_ok {
    host_type_ok host_buffer_type() const { return {}; }
};
struct device_with_host_ptr : device_ok {
    result<buffer_ptr> buffer_from_host_ptr(void*, std::size_t) const { return status(errc::not_supported, "no"); }
};
struct device_host_ptr_without_size : device_ok {
    result<buffer_ptr> buffer_from_host_ptr(void*) const { return status(errc::not_supported, "no"); }
};
struct device_with_offload : device_ok {
    bool offload_op(const tensor&) const { return false; }
};
struct device_offload_not_const : device_ok {
    bool offload_op(const tensor&) { return false; }
};

// ---------------------------------------------------------------------------------------
// backends

struct backend_core { // everything but compute() and synchronize()
    std::string_view name() const { return "TEST"; }
    const device_ok& device() const { return dev; }
    const buffer_type_ok& buffer_type() { return dev.bt; }
    bool supports_op(const tensor&) const { return true; }
    bool supports_buffer_type(const buffer_type_ref&) const { return true; }
    device_ok dev;
};
struct with_compute {
    status compute(graph_view) { return {}; }
};
struct with_synchronize {
    status synchronize() { return {}; }
};

struct backend_ok : backend_core, with_compute, with_synchronize {};
struct backend_no_compute : backend_core, with_synchronize {};
struct backend_no_synchronize : backend_core, with_compute {};
struct backend_compute_returns_bool : backend_core, with_synchronize {
    bool compute(graph_view) { return true; }
};
struct backend_compute_takes_graph : backend_core, with_synchronize { // a view must do
    status compute(const graph&) { return {}; }
};
struct backend_synchronize_returns_void : backend_core, with_compute {
    void synchronize() {}
};
struct backend_name_not_const : backend_ok {
    std::string_view name() { return "TEST"; }
};
struct backend_device_not_a_device : backend_ok {
    const buffer_type_ok& device() const { return dev.bt; }
};
struct backend_buffer_type_by_value : backend_ok {
    buffer_type_ok buffer_type() { return {}; }
};
struct backend_without_supports_op : backend_core, with_compute, with_synchronize {
    bool supports_op() const { return true; }
};

struct backend_async : backend_ok {
    status set_tensor_async(tensor&, const void*, std::size_t, std::size_t) { return {}; }
    status get_tensor_async(const tensor&, void*, std::size_t, std::size_t) { return {}; }
    bool copy_tensor_async(const tensor&, tensor&) { return false; }
};
struct backend_async_no_copy : backend_ok {
    status set_tensor_async(tensor&, const void*, std::size_t, std::size_t) { return {}; }
    status get_tensor_async(const tensor&, void*, std::size_t, std::size_t) { return {}; }
};
struct backend_async_copy_returns_status : backend_async {
    status copy_tensor_async(const tensor&, tensor&) { return {}; }
};
struct backend_async_not_a_backend : backend_no_synchronize {
    status set_tensor_async(tensor&, const void*, std::size_t, std::size_t) { return {}; }
    status get_tensor_async(const tensor&, void*, std::size_t, std::size_t) { return {}; }
    bool copy_tensor_async(const tensor&, tensor&) { return false; }
};

template <class Event>
struct backend_events : backend_ok {
    using event_t = Event;
    result<Event> make_event() { return Event{}; }
    status record(Event&) { return {}; }
    status wait(Event&) { return {}; }
};
using backend_event_ok = backend_events<event_ok>;
using backend_event_not_an_event = backend_events<event_sync_returns_void>;
struct backend_make_event_returns_event : backend_event_ok {
    event_ok make_event() { return {}; }
};
struct backend_record_returns_void : backend_event_ok {
    void record(event_ok&) {}
};
struct backend_event_without_wait : backend_ok {
    using event_t = event_ok;
    result<event_ok> make_event() { return event_ok{}; }
    status record(event_ok&) { return {}; }
};

struct plan {};
struct backend_plan : backend_ok {
    using plan_t = plan;
    using with_compute::compute; // keep compute(graph_view) visible beside compute(plan&)
    result<plan> make_plan(graph_view) { return plan{}; }
    status compute(plan&) { return {}; }
};
struct backend_plan_hiding_compute : backend_ok { // forgets the using-declaration
    using plan_t = plan;
    result<plan> make_plan(graph_view) { return plan{}; }
    status compute(plan&) { return {}; }
};
struct backend_make_plan_returns_plan : backend_plan {
    plan make_plan(graph_view) { return {}; }
};
struct backend_plan_compute_returns_bool : backend_ok {
    using plan_t = plan;
    using with_compute::compute;
    result<plan> make_plan(graph_view) { return plan{}; }
    bool compute(plan&) { return true; }
};

struct backend_offload : backend_ok {
    bool offload_op(const tensor&) const { return true; }
};
struct backend_offload_not_const : backend_ok {
    bool offload_op(const tensor&) { return true; }
};

struct backend_host : backend_ok {
    const host_type_ok& buffer_type() { return ht; }
    host_type_ok ht;
};

inline backend_ok with_make_backend::make_backend() const { return {}; }

} // namespace model

// ---------------------------------------------------------------------------------------
// compile-time: each concept and refinement, positive and negative

// buffer
static_assert(buffer<model::buffer_ok>);
static_assert(!buffer<model::buffer_no_clear>);
static_assert(!buffer<model::buffer_set_returns_bool>);
static_assert(!buffer<model::buffer_get_takes_mutable>);
static_assert(!buffer<model::buffer_base_returns_int>);
static_assert(!buffer<model::buffer_size_not_const>);
static_assert(!buffer<model::buffer_immovable>);
static_assert(!buffer<int>);

// buffer refinements
static_assert(tensor_init_buffer<model::buffer_with_init>);
static_assert(!tensor_init_buffer<model::buffer_ok>);
static_assert(!tensor_init_buffer<model::buffer_init_returns_void>);
static_assert(!tensor_init_buffer<model::not_a_buffer_with_init>);
static_assert(copy_buffer<model::buffer_with_copy>);
static_assert(!copy_buffer<model::buffer_ok>);
static_assert(!copy_buffer<model::buffer_copy_returns_status>);
static_assert(!copy_buffer<model::buffer_copy_takes_mutable_src>);
static_assert(resettable_buffer<model::buffer_with_reset>);
static_assert(!resettable_buffer<model::buffer_ok>);
static_assert(!resettable_buffer<model::buffer_reset_needs_arg>);

// buffer_type and host_buffer_type
static_assert(buffer_type<model::buffer_type_ok>);
static_assert(!buffer_type<model::buffer_type_allocate_returns_buffer>);
static_assert(!buffer_type<model::buffer_type_allocate_returns_other_result>);
static_assert(!buffer_type<model::buffer_type_of_non_buffer>);
static_assert(!buffer_type<model::buffer_type_without_buffer_t>);
static_assert(!buffer_type<model::buffer_type_name_returns_int>);
static_assert(!buffer_type<model::buffer_type_alloc_size_of_nothing>);
static_assert(!buffer_type<model::buffer_type_non_const_allocate>);
static_assert(host_buffer_type<model::host_type_ok>);
static_assert(!host_buffer_type<model::buffer_type_ok>);
static_assert(!host_buffer_type<model::host_type_false>);
static_assert(!host_buffer_type<model::host_memory_but_no_buffer_type>);

// event
static_assert(event<model::event_ok>);
static_assert(!event<model::event_sync_returns_void>);
static_assert(!event<model::event_immovable>);

// device and refinements
static_assert(device<model::device_ok>);
static_assert(!device<model::device_no_make_backend>);
static_assert(!device<model::device_kind_returns_int>);
static_assert(!device<model::device_memory_returns_pair>);
static_assert(!device<model::device_buffer_type_by_value>);
static_assert(!device<model::device_buffer_type_not_a_buffer_type>);
static_assert(!device<model::device_supports_only_its_own_type>);
static_assert(host_buffer_device<model::device_with_host_type>);
static_assert(!host_buffer_device<model::device_ok>);
static_assert(!host_buffer_device<model::device_host_type_by_value>);
static_assert(host_ptr_device<model::device_with_host_ptr>);
static_assert(!host_ptr_device<model::device_ok>);
static_assert(!host_ptr_device<model::device_host_ptr_without_size>);
static_assert(offload_device<model::device_with_offload>);
static_assert(!offload_device<model::device_ok>);
static_assert(!offload_device<model::device_offload_not_const>);

// backend
static_assert(backend<model::backend_ok>);
static_assert(!backend<model::backend_no_compute>);
static_assert(!backend<model::backend_no_synchronize>);
static_assert(!backend<model::backend_compute_returns_bool>);
static_assert(!backend<model::backend_compute_takes_graph>);
static_assert(!backend<model::backend_synchronize_returns_void>);
static_assert(!backend<model::backend_name_not_const>);
static_assert(!backend<model::backend_device_not_a_device>);
static_assert(!backend<model::backend_buffer_type_by_value>);
static_assert(!backend<model::backend_without_supports_op>);
static_assert(!backend<int>);

// backend refinements
static_assert(async_backend<model::backend_async>);
static_assert(!async_backend<model::backend_ok>);
static_assert(!async_backend<model::backend_async_no_copy>);
static_assert(!async_backend<model::backend_async_copy_returns_status>);
static_assert(!async_backend<model::backend_async_not_a_backend>);
static_assert(event_backend<model::backend_event_ok>);
static_assert(!event_backend<model::backend_ok>);
static_assert(!event_backend<model::backend_event_not_an_event>);
static_assert(!event_backend<model::backend_make_event_returns_event>);
static_assert(!event_backend<model::backend_record_returns_void>);
static_assert(!event_backend<model::backend_event_without_wait>);
static_assert(plan_backend<model::backend_plan>);
static_assert(!plan_backend<model::backend_ok>);
static_assert(!backend<model::backend_plan_hiding_compute>); // compute(graph_view) hidden
static_assert(!plan_backend<model::backend_plan_hiding_compute>);
static_assert(!plan_backend<model::backend_make_plan_returns_plan>);
static_assert(!plan_backend<model::backend_plan_compute_returns_bool>);
static_assert(offload_backend<model::backend_offload>);
static_assert(!offload_backend<model::backend_ok>);
static_assert(!offload_backend<model::backend_offload_not_const>);
static_assert(host_backend<model::backend_host>);
static_assert(!host_backend<model::backend_ok>);
static_assert(!host_backend<model::backend_no_compute>);

// the real models
static_assert(buffer<host_buffer>);
static_assert(copy_buffer<host_buffer>);
static_assert(buffer_type<cpu_buffer_type>);
static_assert(host_buffer_type<cpu_buffer_type>);
static_assert(device<cpu_device>);
static_assert(host_buffer_device<cpu_device>);
static_assert(host_ptr_device<cpu_device>);
static_assert(featured_device<cpu_device>);
static_assert(!extra_buffer_types_device<cpu_device>);
static_assert(threaded_backend<cpu_backend>);
static_assert(abortable_backend<cpu_backend>);
static_assert(!timed_backend<cpu_backend>);
static_assert(backend<cpu_backend>);
static_assert(host_backend<cpu_backend>);

TEST_CASE("concepts: the compile-time checks of this file ran", "[concepts]") {
    // The static_asserts above are the test; this case makes them visible in the report.
    STATIC_REQUIRE(backend<cpu_backend>);
    STATIC_REQUIRE(backend<model::backend_ok>);
    STATIC_REQUIRE_FALSE(backend<model::backend_compute_returns_bool>);
    STATIC_REQUIRE_FALSE(backend<model::backend_no_synchronize>);
}

// ---------------------------------------------------------------------------------------
// runtime: make_buffer and the handle

namespace {

struct counters {
    int set = 0, get = 0, memset = 0, clear = 0, init = 0, copy = 0, reset = 0, destroyed = 0;
};

/// A buffer with host memory, every optional capability, and call counters.
struct counting_buffer {
    counters* c = nullptr;
    std::unique_ptr<std::byte[]> mem;
    std::size_t bytes = 0;

    counting_buffer(counters* cs, std::size_t n) : c(cs), mem(new std::byte[n]()), bytes(n) {}
    counting_buffer(counting_buffer&& o) noexcept
        : c(std::exchange(o.c, nullptr)), mem(std::move(o.mem)), bytes(std::exchange(o.bytes, 0)) {}
    ~counting_buffer() {
        if (c) ++c->destroyed; // moved-from shells do not count
    }

    void* base() const { return mem.get(); }
    std::size_t size() const { return bytes; }
    status set_tensor(tensor& t, const void* src, std::size_t offset, std::size_t n) {
        ++c->set;
        std::memcpy(static_cast<std::byte*>(t.data) + offset, src, n);
        return {};
    }
    status get_tensor(const tensor& t, void* dst, std::size_t offset, std::size_t n) {
        ++c->get;
        std::memcpy(dst, static_cast<const std::byte*>(t.data) + offset, n);
        return {};
    }
    status memset_tensor(tensor& t, std::uint8_t v, std::size_t offset, std::size_t n) {
        ++c->memset;
        std::memset(static_cast<std::byte*>(t.data) + offset, v, n);
        return {};
    }
    status clear(std::uint8_t v) {
        ++c->clear;
        std::memset(mem.get(), v, bytes);
        return {};
    }
    status init_tensor(tensor& t) {
        ++c->init;
        return t.name == "refuse" ? status(errc::not_supported, "refused " + t.name) : status{};
    }
    bool copy_tensor(const tensor& src, tensor&) {
        ++c->copy;
        return src.name == "copyable";
    }
    void reset() { ++c->reset; }
};
static_assert(tensor_init_buffer<counting_buffer> && copy_buffer<counting_buffer> && resettable_buffer<counting_buffer>);

/// A buffer with only the required members.
struct plain_buffer {
    std::vector<std::byte> mem = std::vector<std::byte>(256);
    void* base() const { return const_cast<std::byte*>(mem.data()); }
    std::size_t size() const { return mem.size(); }
    status set_tensor(tensor&, const void*, std::size_t, std::size_t) { return {}; }
    status get_tensor(const tensor&, void*, std::size_t, std::size_t) { return {}; }
    status memset_tensor(tensor&, std::uint8_t, std::size_t, std::size_t) { return {}; }
    status clear(std::uint8_t) { return {}; }
};
static_assert(buffer<plain_buffer> && !tensor_init_buffer<plain_buffer> && !copy_buffer<plain_buffer> &&
              !resettable_buffer<plain_buffer>);

/// A buffer type for counting buffers; allocation beyond max_size fails with a status.
struct counting_type {
    using buffer_t = counting_buffer;
    counters* c;
    std::string_view label = "COUNT";
    std::string_view name() const { return label; }
    std::size_t alignment() const { return 128; }
    std::size_t max_size() const { return 4096; }
    std::size_t alloc_size(const tensor& t) const { return t.nbytes() + 8; }
    bool is_host() const { return true; }
    result<counting_buffer> allocate(std::size_t n) const {
        if (n > max_size()) return status(errc::alloc_failed, "counting_type: " + std::to_string(n) + " bytes");
        return counting_buffer(c, n);
    }
};
static_assert(buffer_type<counting_type>);

struct plain_type {
    using buffer_t = plain_buffer;
    std::string_view name() const { return "PLAIN"; }
    std::size_t alignment() const { return 8; }
    std::size_t max_size() const { return 256; }
    std::size_t alloc_size(const tensor& t) const { return t.nbytes(); }
    bool is_host() const { return false; }
    result<plain_buffer> allocate(std::size_t) const { return plain_buffer{}; }
};
static_assert(buffer_type<plain_type>);

/// A tensor of n f32 values placed at `offset` in the buffer h.
tensor placed(buffer_handle& h, std::int64_t n, std::size_t offset, std::string name = {}) {
    tensor t;
    t.type = elem_type::f32;
    t.ne = {n, 1, 1, 1};
    t.nb = contiguous_strides(t.type, t.ne);
    place_tensor(t, h, static_cast<std::byte*>(h.base()) + offset);
    t.name = std::move(name);
    return t;
}

} // namespace

TEST_CASE("make_buffer: the handle calls the optional capabilities of the model", "[concepts][buffer]") {
    counters c;
    const counting_type bt{&c};
    {
        auto r = make_buffer(counting_buffer(&c, 1024), buffer_type_ref(bt));
        REQUIRE(r.ok());
        buffer_ptr h = std::move(*r);
        CHECK(c.destroyed == 0);
        CHECK(h->size() == 1024);
        CHECK(h->base() == h->get_if<counting_buffer>()->base());
        CHECK(h->get_if<plain_buffer>() == nullptr);
        CHECK(h->type() == buffer_type_ref(bt));
        CHECK(h->is_host());
        CHECK(h->usage() == buffer_usage::any);
        h->set_usage(buffer_usage::weights);
        CHECK(h->usage() == buffer_usage::weights);

        tensor t = placed(*h, 16, 64, "t");
        CHECK(h->init_tensor(t).ok());
        CHECK(c.init == 1);
        tensor refused = placed(*h, 4, 0, "refuse");
        const status s = h->init_tensor(refused);
        CHECK(s.code() == errc::not_supported); // the model's status comes back unchanged
        CHECK(s.message() == "refused refuse");
        CHECK(c.init == 2);

        tensor src;
        src.name = "copyable";
        CHECK(h->copy_tensor(src, t));
        src.name = "other";
        CHECK_FALSE(h->copy_tensor(src, t));
        CHECK(c.copy == 2);

        h->reset();
        h->reset();
        CHECK(c.reset == 2);

        // reads and writes reach the model after the handle's range checks
        const float in[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
        CHECK(h->set_tensor(t, in, 0, sizeof in).ok());
        float out[16] = {};
        CHECK(h->get_tensor(t, out, 0, sizeof out).ok());
        CHECK(std::memcmp(in, out, sizeof in) == 0);
        CHECK(h->memset_tensor(t, 0, 4, 8).ok());
        CHECK(h->clear(0).ok());
        CHECK(c.set == 1);
        CHECK(c.get == 1);
        CHECK(c.memset == 1);
        CHECK(c.clear == 1);
        // an out-of-range write is a status and never reaches the model
        CHECK(h->set_tensor(t, in, 8, sizeof in).code() == errc::out_of_range);
        CHECK(c.set == 1);
        // a tensor of another buffer is refused
        tensor foreign = t;
        foreign.set_placement(nullptr, 0, foreign.data);
        CHECK(h->get_tensor(foreign, out, 0, 4).code() == errc::invalid_argument);
        CHECK(c.get == 1);
    }
    CHECK(c.destroyed == 1); // the buffer_ptr destroyed the model, once
}

TEST_CASE("make_buffer: a buffer without optional members gets the defaults", "[concepts][buffer]") {
    const plain_type bt;
    auto r = make_buffer(plain_buffer{}, buffer_type_ref(bt));
    REQUIRE(r.ok());
    buffer_ptr h = std::move(*r);
    tensor t = placed(*h, 4, 0);
    const status s = h->init_tensor(t);
    CHECK(s.ok());          // nothing to prepare
    CHECK(s.message().empty());
    tensor src;
    CHECK_FALSE(h->copy_tensor(src, t)); // cannot copy device-side: callers stage through the host
    h->reset();                          // nothing to drop
    CHECK(h->size() == 256);
    CHECK_FALSE(h->is_host());
    CHECK(h->get_if<plain_buffer>() != nullptr);
    CHECK(h->get_if<counting_buffer>() == nullptr);
}

TEST_CASE("buffer_type_ref: identity, equality, get_if, forwarding", "[concepts][buffer_type]") {
    counters c;
    const counting_type a{&c, "A"};
    const counting_type b{&c, "B"};
    const plain_type p;
    const buffer_type_ref ra(a), ra2(a), rb(b), rp(p);
    CHECK(ra == ra2);
    CHECK_FALSE(ra == rb); // same type, other object
    CHECK_FALSE(ra == rp);
    CHECK(ra.id() == &a);
    CHECK(rb.id() == &b);
    CHECK(ra.get_if<counting_type>() == &a);
    CHECK(ra.get_if<plain_type>() == nullptr);
    CHECK(rp.get_if<plain_type>() == &p);
    CHECK(ra.get_if<cpu_buffer_type>() == nullptr);

    CHECK(ra.name() == "A");
    CHECK(rb.name() == "B");
    CHECK(ra.alignment() == 128);
    CHECK(ra.max_size() == 4096);
    CHECK(ra.is_host());
    CHECK_FALSE(rp.is_host());
    tensor t;
    t.ne = {10, 1, 1, 1};
    t.nb = contiguous_strides(elem_type::f32, t.ne);
    CHECK(ra.alloc_size(t) == 48); // the model's rule: nbytes + 8

    // allocation through the reference: a handle of that type
    {
        auto r = ra.allocate(100);
        REQUIRE(r.ok());
        CHECK((*r)->type() == ra);
        CHECK((*r)->size() == 100);
        REQUIRE((*r)->get_if<counting_buffer>() != nullptr);
    }
    CHECK(c.destroyed == 1);
    // failure is the model's status
    auto bad = ra.allocate(5000);
    REQUIRE_FALSE(bad.ok());
    CHECK(bad.error().code() == errc::alloc_failed);
    CHECK(bad.error().message() == "counting_type: 5000 bytes");

    // the CPU buffer type is one object, whoever hands it out
    CHECK(buffer_type_ref(cpu_buffer_type::instance()) == buffer_type_ref(cpu_device::instance().buffer_type()));
    CHECK(buffer_type_ref(cpu_backend{}.buffer_type()) == buffer_type_ref(cpu_buffer_type::instance()));
    CHECK(buffer_type_ref(cpu_buffer_type::instance()).get_if<cpu_buffer_type>() == &cpu_buffer_type::instance());
}

// ---------------------------------------------------------------------------------------
// status and result<T>

TEST_CASE("status", "[concepts][status]") {
    const status ok;
    CHECK(ok.ok());
    CHECK(static_cast<bool>(ok));
    CHECK(ok.code() == errc::ok);
    CHECK(ok.native() == 0);
    CHECK(ok.message().empty());
    CHECK(ok.describe() == "ok");
    CHECK(status::success().ok());
    CHECK_NOTHROW(ok.throw_if_failed());

    const status oom(errc::alloc_failed, "1 GiB on Vulkan0");
    CHECK_FALSE(oom.ok());
    CHECK_FALSE(static_cast<bool>(oom));
    CHECK(oom.describe() == "allocation failed: 1 GiB on Vulkan0");
    const status dev(errc::device_error, "submit", -4);
    CHECK(dev.native() == -4);
    CHECK(dev.describe() == "device error: submit (native code -4)");
    CHECK(status(errc::aborted, "").describe() == "aborted");

    try {
        dev.throw_if_failed();
        FAIL("throw_if_failed did not throw");
    } catch (const error& e) {
        CHECK(e.code() == errc::device_error);
        CHECK(std::string(e.what()) == "device error: submit (native code -4)");
    }

    const std::pair<errc, std::string_view> names[] = {
        {errc::ok, "ok"},
        {errc::invalid_argument, "invalid argument"},
        {errc::out_of_range, "out of range"},
        {errc::alloc_failed, "allocation failed"},
        {errc::not_supported, "not supported"},
        {errc::aborted, "aborted"},
        {errc::device_error, "device error"},
        {errc::not_found, "not found"},
        {errc::failed, "failed"}};
    for (auto [c, n] : names) CHECK(to_string(c) == n);
}

TEST_CASE("result<T>", "[concepts][status]") {
    result<int> good(42);
    CHECK(good.ok());
    CHECK(static_cast<bool>(good));
    CHECK(good.value() == 42);
    CHECK(*good == 42);
    CHECK(good.error().ok());
    CHECK(good.error_if() == nullptr);

    result<std::string> s(std::string("abc"));
    CHECK(s->size() == 3);

    result<int> bad(status(errc::not_supported, "no such op", 7));
    CHECK_FALSE(bad.ok());
    CHECK_FALSE(static_cast<bool>(bad));
    REQUIRE(bad.error_if() != nullptr);
    CHECK(bad.error_if()->native() == 7);
    CHECK(bad.error().code() == errc::not_supported);
    CHECK(bad.error().describe() == "not supported: no such op (native code 7)");
    try {
        (void)bad.value();
        FAIL("value() did not throw");
    } catch (const error& e) {
        CHECK(e.code() == errc::not_supported);
        CHECK_THAT(e.what(), Contains("no such op"));
        CHECK(std::string(e.what()) == bad.error().describe());
    }
    const result<int>& cbad = bad;
    CHECK_THROWS_AS(cbad.value(), error);
    CHECK_THROWS_AS(std::move(bad).value(), error);

    // a success status without a value is turned into a failure, never an empty "ok"
    result<int> odd(status{});
    CHECK_FALSE(odd.ok());
    CHECK(odd.error().code() == errc::failed);

    // move-only values move out
    result<std::unique_ptr<int>> p(std::make_unique<int>(5));
    std::unique_ptr<int> taken = std::move(p).value();
    REQUIRE(taken != nullptr);
    CHECK(*taken == 5);
}
