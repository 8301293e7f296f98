// backplane::mpi::communicator on every rank of the job (run by ctest through mpirun with
// 2, 3 and 4 ranks): the all-reduce's sums (exact ones, and random floats against a
// double sum), the same bits on every rank and from run to run, in both algorithms;
// broadcast, all-gather, point-to-point; MPI errors and misuse as statuses.
#include <catch2/catch.hpp>

#include <backplane/mpi/communicator.hpp>

#include "hash.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

using namespace backplane;

namespace mpi_comm_test {

mpi::communicator world(mpi::comm_options o = {}) {
    o.timeout = std::chrono::seconds(20);
    auto c = mpi::communicator::world(o);
    REQUIRE(c);
    return std::move(*c);
}

// every algorithm: doubling only, the ring wherever it applies
std::vector<mpi::comm_options> algorithms() {
    return {{.ring_min_bytes = SIZE_MAX}, {.ring_min_bytes = 1}};
}

const std::vector<std::size_t> sizes = {1, 3, 7, 1000, 1024, 1025, 4001, 16384, 65537};

std::vector<float> random_floats(int rank, std::size_t n) {
    std::mt19937 rng(1234u + 7u * static_cast<unsigned>(rank) + static_cast<unsigned>(n));
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> v(n);
    for (float& x : v) x = u(rng);
    return v;
}

// every rank's value of h, in rank order
std::vector<std::uint64_t> gather(mpi::communicator& c, std::uint64_t h) {
    std::vector<std::uint64_t> all(static_cast<std::size_t>(c.size()));
    REQUIRE(c.all_gather(std::as_bytes(std::span(&h, 1)), std::as_writable_bytes(std::span(all))));
    return all;
}

TEST_CASE("mpi all_reduce_sum: exact sums on every rank, both algorithms", "[mpi]") {
    for (const auto& o : algorithms()) {
        auto c = world(o);
        for (std::size_t n : sizes) {
            INFO("ring_min_bytes " << o.ring_min_bytes << ", " << n << " floats");
            std::vector<float> v(n);
            for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<float>(c.rank() + 1) * 0.25f * static_cast<float>(int(i % 13) - 6);
            REQUIRE(c.all_reduce_sum(std::span(v)));
            const float ranks = static_cast<float>(c.size() * (c.size() + 1) / 2);
            std::size_t wrong = 0;
            for (std::size_t i = 0; i < n; ++i) wrong += v[i] != ranks * 0.25f * static_cast<float>(int(i % 13) - 6) ? 1 : 0;
            CHECK(wrong == 0);
        }
    }
}

TEST_CASE("mpi all_reduce_sum: random floats, the same bits on every rank and in every run, close to a double sum", "[mpi]") {
    for (const auto& o : algorithms()) {
        auto c = world(o);
        for (std::size_t n : sizes) {
            INFO("ring_min_bytes " << o.ring_min_bytes << ", " << n << " floats");
            const std::vector<float> mine = random_floats(c.rank(), n);
            std::vector<float> a = mine, b = mine;
            REQUIRE(c.all_reduce_sum(std::span(a)));
            REQUIRE(c.all_reduce_sum(std::span(b)));
            CHECK(std::memcmp(a.data(), b.data(), n * 4) == 0);
            const auto hashes = gather(c, test::fnv(a.data(), n * 4));
            for (std::uint64_t h : hashes) CHECK(h == hashes.front());
            std::vector<double> ref(n, 0.0);
            for (int r = 0; r < c.size(); ++r) {
                const auto v = random_floats(r, n);
                for (std::size_t i = 0; i < n; ++i) ref[i] += v[i];
            }
            double err = 0, norm = 0;
            for (std::size_t i = 0; i < n; ++i) {
                err += (a[i] - ref[i]) * (a[i] - ref[i]);
                norm += ref[i] * ref[i];
            }
            CHECK(err / norm < 1e-12);
        }
    }
}

TEST_CASE("mpi all_reduce_sum: double and integer sums", "[mpi]") {
    auto c = world({.ring_min_bytes = 256});
    for (std::size_t n : {std::size_t{1}, std::size_t{5}, std::size_t{300}}) {
        std::vector<double> d(n);
        std::vector<std::int64_t> i64(n);
        std::vector<std::uint64_t> u64(n);
        std::vector<std::int32_t> i32(n);
        for (std::size_t i = 0; i < n; ++i) {
            d[i] = 0.5 * static_cast<double>(c.rank()) + static_cast<double>(i);
            i64[i] = -(std::int64_t{1} << 40) * c.rank() + static_cast<std::int64_t>(i);
            u64[i] = (std::uint64_t{1} << 50) + static_cast<std::uint64_t>(i);
            i32[i] = c.rank() - static_cast<std::int32_t>(i);
        }
        REQUIRE(c.all_reduce_sum(std::span(d)));
        REQUIRE(c.all_reduce_sum(std::span(i64)));
        REQUIRE(c.all_reduce_sum(std::span(u64)));
        REQUIRE(c.all_reduce_sum(std::span(i32)));
        const std::int64_t s = c.size(), tri = s * (s - 1) / 2;
        for (std::size_t i = 0; i < n; ++i) {
            const auto ii = static_cast<std::int64_t>(i);
            CHECK(d[i] == 0.5 * static_cast<double>(tri) + static_cast<double>(s * ii));
            CHECK(i64[i] == -(std::int64_t{1} << 40) * tri + s * ii);
            CHECK(u64[i] == static_cast<std::uint64_t>(s) * ((std::uint64_t{1} << 50) + static_cast<std::uint64_t>(i)));
            CHECK(i32[i] == static_cast<std::int32_t>(tri - s * ii));
        }
    }
    CHECK(c.all_reduces() == 12);
}

TEST_CASE("mpi broadcast and all_gather: every root, several sizes", "[mpi]") {
    auto c = world();
    for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{4096}, std::size_t{100001}}) {
        for (int root = 0; root < c.size(); ++root) {
            INFO(n << " bytes from rank " << root);
            std::vector<std::byte> v(n, std::byte{0});
            if (c.rank() == root)
                for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::byte>((i * 31 + static_cast<std::size_t>(root)) & 255);
            REQUIRE(c.broadcast(v, root));
            std::size_t wrong = 0;
            for (std::size_t i = 0; i < n; ++i) wrong += v[i] != static_cast<std::byte>((i * 31 + static_cast<std::size_t>(root)) & 255) ? 1 : 0;
            CHECK(wrong == 0);
        }
        std::vector<std::byte> mine(n), all(n * static_cast<std::size_t>(c.size()));
        for (std::size_t i = 0; i < n; ++i) mine[i] = static_cast<std::byte>((i + 17 * static_cast<std::size_t>(c.rank())) & 255);
        REQUIRE(c.all_gather(mine, all));
        std::size_t wrong = 0;
        for (std::size_t r = 0; r < static_cast<std::size_t>(c.size()); ++r)
            for (std::size_t i = 0; i < n; ++i) wrong += all[r * n + i] != static_cast<std::byte>((i + 17 * r) & 255) ? 1 : 0;
        CHECK(wrong == 0);
    }
}

TEST_CASE("mpi isend and irecv: a ring of messages, several in flight", "[mpi]") {
    auto c = world();
    const int right = (c.rank() + 1) % c.size(), left = (c.rank() + c.size() - 1) % c.size();
    for (std::size_t n : {std::size_t{0}, std::size_t{10}, std::size_t{70000}}) {
        std::vector<std::byte> out1(n, std::byte(c.rank())), out2(n, std::byte(c.rank() + 100));
        std::vector<std::byte> in1(n), in2(n);
        auto r2 = c.irecv(in2, left, 2); // posted in the other order than sent: tags tell them apart
        auto r1 = c.irecv(in1, left, 1);
        auto s1 = c.isend(out1, right, 1);
        auto s2 = c.isend(out2, right, 2);
        REQUIRE((r1 && r2 && s1 && s2));
        CHECK(c.wait(*s1));
        CHECK(c.wait(*s2));
        CHECK(c.wait(*r1));
        CHECK(c.wait(*r2));
        CHECK(in1 == std::vector<std::byte>(n, std::byte(left)));
        CHECK(in2 == std::vector<std::byte>(n, std::byte(left + 100)));
    }
    // a request dropped unfinished is finished by its destructor
    std::vector<std::byte> out(100, std::byte{7}), in(100);
    {
        auto s = c.isend(out, right, 3);
        REQUIRE(s);
    }
    REQUIRE(c.recv(in, left, 3));
    CHECK(in == out);
}

TEST_CASE("mpi environment: a second one leaves MPI to the first", "[mpi]") {
    auto env = mpi::environment::init();
    REQUIRE(env);
    CHECK_FALSE(env->owns()); // tests/mpi/main.cpp's owns it
    CHECK_FALSE(mpi::communication_failed());
}

TEST_CASE("mpi misuse: bad ranks, tags and sizes are refused before any message", "[mpi]") {
    auto c = world();
    std::vector<std::byte> b(8);
    CHECK(c.send(b, c.size(), 0).code() == errc::invalid_argument);
    CHECK(c.recv(b, -1, 0).code() == errc::invalid_argument);
    CHECK(c.send(b, 0, mpi::first_reserved_tag).code() == errc::invalid_argument);
    CHECK(c.send(b, 0, -5).code() == errc::invalid_argument);
    CHECK(c.broadcast(b, c.size()).code() == errc::invalid_argument);
    std::vector<std::byte> all(3);
    CHECK(c.all_gather(b, all).code() == errc::invalid_argument);
    auto other = world();
    std::vector<std::byte> in(8);
    auto r = other.irecv(in, c.rank(), 5);
    REQUIRE(r);
    CHECK(c.wait(*r).code() == errc::invalid_argument);
    REQUIRE(other.send(b, c.rank(), 5)); // to itself, so the receive finishes
    CHECK(other.wait(*r));
    CHECK(c.failure().ok());
    CHECK(c.barrier());
    CHECK(mpi::communicator::world({.timeout = std::chrono::milliseconds(0)}).error().code() == errc::invalid_argument);
}

TEST_CASE("mpi errors: a message longer than its receive is a status, and the communicator stays failed", "[mpi]") {
    auto c = world();
    const int right = (c.rank() + 1) % c.size(), left = (c.rank() + c.size() - 1) % c.size();
    std::vector<std::byte> out(64, std::byte{1}), in(16);
    auto r = c.irecv(in, left, 9);
    REQUIRE(r);
    REQUIRE(c.send(out, right, 9));
    const status s = c.wait(*r);
    CHECK(s.code() == errc::failed);
    CHECK_THAT(s.message(), Catch::Contains("MPI_Irecv of 16 bytes"));
    CHECK_THAT(s.message(), Catch::Contains("rank " + std::to_string(c.rank())));
    CHECK(c.failure().code() == errc::failed);
    std::vector<float> v(4);
    CHECK(c.all_reduce_sum(std::span(v)).message() == s.message()); // refused, no message sent
    CHECK_FALSE(mpi::communication_failed()); // nothing is left pending: MPI is finalized at exit
    CHECK(world().barrier());
}

TEST_CASE("mpi threads: a second thread inside the same communicator is refused with errc::busy", "[mpi]") {
    auto c = world();
    std::vector<float> v(16, 1.0f);
    if (c.rank() == 0) {
        std::atomic<bool> done{false};
        status first;
        std::thread t([&] {
            first = c.all_reduce_sum(std::span(v)); // waits for the others, who start late
            done = true;
        });
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        std::vector<float> w(16, 1.0f);
        const status second = c.all_reduce_sum(std::span(w));
        t.join();
        CHECK(second.code() == errc::busy);
        CHECK_THAT(second.message(), Catch::Contains("mpi communicator: all_reduce_sum called while another thread"));
        CHECK(first);
        CHECK(v[0] == static_cast<float>(c.size()));
    } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(1000));
        REQUIRE(c.all_reduce_sum(std::span(v)));
    }
    CHECK(c.barrier());
}

} // namespace mpi_comm_test
