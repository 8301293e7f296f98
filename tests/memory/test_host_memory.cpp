// The special host buffer types (memory/host_memory.hpp): huge pages, a NUMA node and
// high-bandwidth memory. Each either gives memory of its kind, which tensors live in and
// the CPU backend computes in, or a status that matches what this machine lacks.

#include <backplane/backplane.hpp>
#include <backplane/memory/host_memory.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

using namespace backplane;

namespace {

/// The VmFlags line of /proc/self/smaps for the mapping that holds p ("" if not found).
std::string vm_flags_of(const void* p) {
    std::ifstream smaps("/proc/self/smaps");
    const auto addr = reinterpret_cast<std::uintptr_t>(p);
    bool inside = false;
    for (std::string line; std::getline(smaps, line);) {
        std::uintptr_t lo = 0, hi = 0;
        char dash = 0;
        std::istringstream head(line);
        if (head >> std::hex >> lo >> dash >> hi && dash == '-') {
            inside = addr >= lo && addr < hi;
            continue;
        }
        if (inside && line.rfind("VmFlags:", 0) == 0) return line;
    }
    return {};
}

/// Tensors of a small graph placed in bt's memory, computed by the CPU backend: c = a + b.
void compute_in(buffer_type_ref bt) {
    context ctx{context_params{.no_alloc = true}};
    tensor* a = ctx.new_tensor_1d(elem_type::f32, 1000);
    tensor* b = ctx.new_tensor_1d(elem_type::f32, 1000);
    tensor* c = add(ctx, a, b);
    auto bufs = alloc_tensors(ctx, bt);
    REQUIRE(bufs.ok());
    CHECK(c->buffer != nullptr);
    CHECK(c->buffer->type().name() == bt.name());
    std::vector<float> va(1000), vb(1000);
    for (int i = 0; i < 1000; ++i) {
        va[static_cast<std::size_t>(i)] = static_cast<float>(i);
        vb[static_cast<std::size_t>(i)] = static_cast<float>(2 * i + 1);
    }
    REQUIRE(tensor_set(*a, va).ok());
    REQUIRE(tensor_set(*b, vb).ok());
    cpu_backend cpu({.n_threads = 2});
    REQUIRE(cpu.compute(graph(c)).ok());
    auto out = tensor_get_all<float>(*c);
    REQUIRE(out.ok());
    for (int i = 0; i < 1000; ++i) CHECK((*out)[static_cast<std::size_t>(i)] == static_cast<float>(3 * i + 1));
}

} // namespace

TEST_CASE("host memory: CPU_HUGEPAGE gives 2 MiB-aligned huge-page memory, or says why not", "[memory][host_memory]") {
    const hugepage_buffer_type& bt = hugepage_buffer_type::instance();
    CHECK(bt.name() == "CPU_HUGEPAGE");
    CHECK(bt.is_host());
    const long reserved = std::stol("0" + std::string([] {
        std::ifstream f("/proc/sys/vm/nr_hugepages");
        std::string s;
        std::getline(f, s);
        return s;
    }()));
    auto buf = bt.allocate(3u << 20);
    if (!hugepage_buffer_type::transparent_available() && reserved < 2) {
        REQUIRE_FALSE(buf.ok());
        CHECK(buf.error().code() == errc::not_supported);
        CHECK(buf.error().describe().find("transparent huge pages are disabled") != std::string::npos);
        return;
    }
    REQUIRE(buf.ok());
    CHECK(buf->size() == (3u << 20));
    CHECK(reinterpret_cast<std::uintptr_t>(buf->base()) % hugepage_buffer_type::page_bytes == 0);
    // the whole block is usable memory
    auto* p = static_cast<unsigned char*>(buf->base());
    for (std::size_t i = 0; i < buf->size(); i += 4096) p[i] = static_cast<unsigned char>(i >> 12);
    for (std::size_t i = 0; i < buf->size(); i += 4096) CHECK(p[i] == static_cast<unsigned char>(i >> 12));
    // the mapping is huge-page memory: hugetlb ("ht") or advised for transparent huge pages ("hg")
    const std::string flags = vm_flags_of(buf->base());
    INFO(flags);
    CHECK((flags.find(" ht") != std::string::npos || flags.find(" hg") != std::string::npos));

    compute_in(bt);

    SECTION("sizes it cannot map are statuses") {
        auto huge = bt.allocate(static_cast<std::size_t>(-1) / 2);
        REQUIRE_FALSE(huge.ok());
        CHECK(huge.error().code() == errc::alloc_failed);
    }
    SECTION("an empty buffer still maps one page") {
        auto empty = bt.allocate(0);
        REQUIRE(empty.ok());
        CHECK(empty->size() == 0);
        CHECK(empty->base() != nullptr);
    }
}

TEST_CASE("host memory: CPU_NUMA<n> binds memory to node n, or says why not", "[memory][host_memory]") {
    CHECK(numa_buffer_type::node(0).name() == "CPU_NUMA0");
    CHECK(numa_buffer_type::node(3).name() == "CPU_NUMA3");
    CHECK(numa_buffer_type::node(3).node_index() == 3);
    CHECK(&numa_buffer_type::node(-1) == &numa_buffer_type::node(1000)); // the invalid instance
    auto top = numa_buffer_type::max_node();
    if (!top) {
        CHECK(top.error().code() == errc::not_supported);
        CHECK(top.error().describe().find("CPU_NUMA") != std::string::npos);
        auto buf = numa_buffer_type::node(0).allocate(4096);
        REQUIRE_FALSE(buf.ok());
        CHECK(buf.error().code() == errc::not_supported);
        return;
    }
    REQUIRE(*top >= 0);
    auto buf = numa_buffer_type::node(0).allocate(1u << 20);
    REQUIRE(buf.ok());
    auto* p = static_cast<unsigned char*>(buf->base());
    for (std::size_t i = 0; i < buf->size(); ++i) p[i] = static_cast<unsigned char>(i);
#if defined(__linux__) && defined(SYS_get_mempolicy)
    // where the touched pages live: get_mempolicy(MPOL_F_NODE | MPOL_F_ADDR)
    for (std::size_t off : {std::size_t{0}, std::size_t{512} << 10}) {
        int node = -1;
        const long r = ::syscall(SYS_get_mempolicy, &node, nullptr, 0UL, p + off, 3UL /* MPOL_F_NODE | MPOL_F_ADDR */);
        REQUIRE(r == 0);
        CHECK(node == 0);
    }
#endif
    compute_in(numa_buffer_type::node(0));

    auto none = numa_buffer_type::node(*top + 1).allocate(4096);
    REQUIRE_FALSE(none.ok());
    CHECK(none.error().code() == errc::invalid_argument);
    CHECK(none.error().describe().find("no NUMA node") != std::string::npos);
    auto invalid = numa_buffer_type::node(-1).allocate(4096);
    REQUIRE_FALSE(invalid.ok());
    CHECK(invalid.error().code() == errc::invalid_argument);
}

TEST_CASE("host memory: CPU_HBM gives high-bandwidth memory where the machine has it, else a status",
          "[memory][host_memory]") {
    const hbm_buffer_type& bt = hbm_buffer_type::instance();
    CHECK(bt.name() == "CPU_HBM");
    const status avail = hbm_buffer_type::available();
    auto buf = bt.allocate(1u << 20);
    if (!avail) {
        INFO(avail.describe());
        CHECK(avail.code() == errc::not_supported);
        const std::string why = avail.describe();
        CHECK((why.find("libmemkind is not installed") != std::string::npos ||
               why.find("no high-bandwidth memory") != std::string::npos));
        REQUIRE_FALSE(buf.ok());
        CHECK(buf.error().code() == errc::not_supported);
        return;
    }
    REQUIRE(buf.ok());
    CHECK(reinterpret_cast<std::uintptr_t>(buf->base()) % host_alignment == 0);
    compute_in(bt);
}
