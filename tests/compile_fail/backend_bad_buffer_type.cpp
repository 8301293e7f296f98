// expect: [^ ]*b\.buffer_type\(\)[^ ]* does not satisfy return-type-requirement
//
// A backend whose default buffer type is not a buffer_type model (its allocate returns
// the buffer itself, not result<buffer_t>). At the default diagnostics depth g++ 12 names
// the backend's member that leads to the fault: "'b.buffer_type()' does not satisfy
// return-type-requirement"; asserting buffer_type<T> beside the buffer type names
// allocate itself (see buffer_type_allocate_wrong_type.cpp).
#include <backplane/core/concepts.hpp>
#include <backplane/memory/buffer.hpp>
#include <backplane/memory/host_buffer.hpp>

#include <cstddef>
#include <string_view>

namespace {

struct my_buffer_type {
    using buffer_t = backplane::host_buffer;
    std::string_view name() const { return "MY"; }
    std::size_t alignment() const { return 64; }
    std::size_t max_size() const { return std::size_t{1} << 30; }
    std::size_t alloc_size(const backplane::tensor& t) const { return t.nbytes(); }
    bool is_host() const { return true; }
    backplane::host_buffer allocate(std::size_t) const; // must be result<buffer_t>
};

struct my_device {
    std::string_view name() const { return "MY"; }
    std::string_view description() const { return "my device"; }
    backplane::device_kind kind() const { return backplane::device_kind::accel; }
    backplane::memory_info memory() const { return {}; }
    backplane::device_caps caps() const { return {}; }
    const backplane::cpu_buffer_type& buffer_type() const { return backplane::cpu_buffer_type::instance(); }
    bool supports_op(const backplane::tensor&) const { return true; }
    bool supports_buffer_type(const backplane::buffer_type_ref&) const { return true; }
    int make_backend() const { return 0; }
};

struct my_backend {
    std::string_view name() const { return "MY"; }
    const my_device& device() const { return device_; }
    const my_buffer_type& buffer_type() { return buffer_type_; }
    bool supports_op(const backplane::tensor&) const { return true; }
    bool supports_buffer_type(const backplane::buffer_type_ref&) const { return true; }
    backplane::status compute(backplane::graph_view) { return {}; }
    backplane::status synchronize() { return {}; }
    my_device device_;
    my_buffer_type buffer_type_;
};

} // namespace

static_assert(backplane::backend<my_backend>);
