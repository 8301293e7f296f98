// expect: [^ ]*bt\.allocate\(size\)[^ ]* does not satisfy return-type-requirement
//
// A buffer type whose allocate returns a raw pointer instead of result<buffer_t>: the
// diagnostic must name the expression. g++ 12 says: "'bt.allocate(size)' does not
// satisfy return-type-requirement" (quotes are typographic in a UTF-8 locale, hence
// [^ ]*). A buffer type author asserts buffer_type<T> beside the type, as here.
#include <backplane/core/concepts.hpp>
#include <backplane/memory/buffer.hpp>
#include <backplane/memory/host_buffer.hpp>

#include <cstddef>
#include <string_view>

namespace {

struct my_buffer_type {
    using buffer_t = backplane::host_buffer; // a valid buffer, so that only allocate is wrong
    std::string_view name() const { return "MY"; }
    std::size_t alignment() const { return 64; }
    std::size_t max_size() const { return std::size_t{1} << 30; }
    std::size_t alloc_size(const backplane::tensor& t) const { return t.nbytes(); }
    bool is_host() const { return true; }
    backplane::host_buffer* allocate(std::size_t) const { return nullptr; } // must be result<buffer_t>
};

} // namespace

static_assert(backplane::buffer_type<my_buffer_type>);
