// expect: [^ ]*b\.compute\(g\)[^ ]* does not satisfy return-type-requirement
//
// A backend whose compute returns bool instead of status: the diagnostic must name the
// expression and its return type. g++ 12 says: "'b.compute(g)' does not satisfy
// return-type-requirement" (quotes are typographic in a UTF-8 locale, hence [^ ]*).
#include <backplane/core/concepts.hpp>
#include <backplane/memory/buffer.hpp>
#include <backplane/memory/host_buffer.hpp>

#include <string_view>

namespace {

// A complete device, so that the backend's only fault is the missing member.
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
    const backplane::cpu_buffer_type& buffer_type() { return backplane::cpu_buffer_type::instance(); }
    bool supports_op(const backplane::tensor&) const { return true; }
    bool supports_buffer_type(const backplane::buffer_type_ref&) const { return true; }
    bool compute(backplane::graph_view) { return true; } // must return status
    backplane::status synchronize() { return {}; }
    my_device device_;
};

} // namespace

static_assert(backplane::backend<my_backend>);
