#pragma once
// Collectives: summing the partial tensors of the devices of a meta device.
//
// The meta backend hands a collective one f32 tensor per device (same shape, contiguous,
// each computed by that device's backend) and a `group` that runs work on the devices in
// parallel; after all_reduce every device holds the sum. `collective` is the interface a
// vendor library plugs in behind (NCCL on CUDA devices: meta_params::make_collective);
// generic_collective works over any backends with nothing but copies and adds:
//
//   recursive doubling  log2 n steps; in step s device d exchanges its tensor with
//                       device d xor 2^s and adds what it got. A device count that is
//                       not a power of two first folds the excess devices into the
//                       first ones and copies the result back to them at the end.
//   ring                reduce-scatter then all-gather over n chunks: 2 (n - 1) steps,
//                       each device moving 2 (n - 1) / n of the tensor in all
//
// chosen by size and count (meta_params::ring_min_bytes). Both add in the same order
// on every device, so all devices end with the same bits, and sums of integers in f32
// are exact. Copies use the destination backend's asynchronous copy, then the memory
// layer's blocking copy (the destination buffer's device-side copy, or through the host).

#include <backplane/backends/cpu/thread_pool.hpp>
#include <backplane/core/context.hpp>
#include <backplane/core/detail/describe.hpp>
#include <backplane/core/error.hpp>
#include <backplane/core/graph.hpp>
#include <backplane/core/tensor.hpp>
#include <backplane/memory/buffer.hpp>
#include <backplane/memory/tensor_copy.hpp>
#include <backplane/memory/tensor_io.hpp>
#include <backplane/erased/any.hpp>

#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace backplane::meta {

/// Counters of the data a collective moved between devices.
struct collective_stats {
    std::uint64_t calls = 0;       ///< all_reduce calls
    std::uint64_t bytes_moved = 0; ///< bytes copied from one device to another
    std::uint64_t steps = 0;       ///< exchange steps (each a round of copies and adds)
};

/// The devices a collective works on, as the meta backend gives them.
class group {
public:
    virtual ~group() = default;
    [[nodiscard]] virtual int size() const noexcept = 0;
    [[nodiscard]] virtual any_backend& backend(int d) noexcept = 0;
    /// Runs f(d) for every device d, in parallel; the first failure.
    virtual status run_each(const std::function<status(int)>& f) = 0;
    /// Device d's receive buffer: an f32 vector of at least as many elements as the
    /// largest tensor reduced.
    [[nodiscard]] virtual tensor& scratch(int d) noexcept = 0;
};

/// Sums one tensor per device in place (see the file comment).
class collective {
public:
    virtual ~collective() = default;
    [[nodiscard]] virtual std::string_view name() const noexcept = 0;
    /// parts[d] (f32, contiguous, the same shape on every device) lives on device d; its
    /// backend's work on it is finished. On return every parts[d] holds the sum, with the
    /// work possibly still queued on the backends.
    virtual status all_reduce(group& g, std::span<tensor* const> parts) = 0;
    /// Whether all_reduce sums over the devices of every process of a meta device that
    /// spans processes (NCCL across processes); false: over this process's parts only, and
    /// the meta backend adds the processes' sums (meta_params::processes).
    [[nodiscard]] virtual bool spans_processes() const noexcept { return false; }
    [[nodiscard]] const collective_stats& stats() const noexcept { return stats_; }

protected:
    collective_stats stats_;
};

namespace detail {

/// Copies src (on one device) into dst (on another) of the same layout: the destination
/// backend's asynchronous copy where it has one for these buffers, else tensor_copy
/// (device-side or through the host). Copies between host
/// buffers run in parallel; others take `serial`, as two devices' transfer paths may
/// touch the same device from two threads.
inline status copy_between(any_backend& dst_backend, const tensor& src, tensor& dst, std::mutex& serial) {
    const bool on_host = src.buffer != nullptr && dst.buffer != nullptr && src.buffer->is_host() && dst.buffer->is_host();
    std::unique_lock lock(serial, std::defer_lock);
    if (!on_host) lock.lock();
    if (dst_backend.copy_tensor_async(src, dst)) return {};
    return backplane::tensor_copy(src, dst);
}

/// A 1-d f32 view of elements [first, first + count) of contiguous tensor t.
inline tensor* slice(context& ctx, tensor* t, std::int64_t first, std::int64_t count) {
    return ctx.new_view(t, elem_type::f32, {count, 1, 1, 1}, {4, static_cast<std::size_t>(count) * 4, 0, 0},
                        static_cast<std::size_t>(first) * 4);
}

/// The first elements of scratch seen with the shape of contiguous f32 tensor `like`.
inline tensor* shaped(context& ctx, tensor* scratch, const tensor& like) {
    return ctx.new_view(scratch, elem_type::f32, like.ne, like.nb, 0);
}

/// The node dst += src: its result is dst's memory.
inline tensor* add_node(context& ctx, tensor* dst, tensor* src) {
    tensor* r = ctx.new_view(dst, elem_type::f32, dst->ne, dst->nb, 0);
    r->op = op_kind::add;
    r->src[0] = dst;
    r->src[1] = src;
    r->name = dst->name + "+=";
    return r;
}

} // namespace detail

/// Recursive doubling and ring over copies and adds, for any backends and any device
/// count (see the file comment).
class generic_collective final : public collective {
public:
    explicit generic_collective(std::size_t ring_min_bytes = std::size_t{256} << 10) noexcept
        : ring_min_bytes_(ring_min_bytes) {}

    [[nodiscard]] std::string_view name() const noexcept override { return "generic"; }

    /// Whether a tensor of `bytes` over n devices goes round the ring.
    [[nodiscard]] bool uses_ring(std::size_t bytes, int n, std::int64_t elements) const noexcept {
        return n > 2 && bytes >= ring_min_bytes_ && elements >= n;
    }

    status all_reduce(group& g, std::span<tensor* const> parts) override {
        const int n = g.size();
        if (static_cast<int>(parts.size()) != n)
            return {errc::invalid_argument, "all_reduce: " + std::to_string(parts.size()) + " tensors for " +
                                                std::to_string(n) + " devices"};
        for (const tensor* p : parts)
            if (p->type != elem_type::f32 || !p->is_contiguous() || p->ne != parts[0]->ne)
                return {errc::invalid_argument, "all_reduce: " + backplane::detail::describe(p) +
                                                    " is not a contiguous f32 tensor shaped as the others"};
        ++stats_.calls;
        if (n == 1) return {};
        context ctx({.no_alloc = true});
        const std::int64_t ne = parts[0]->nelements();
        if (uses_ring(parts[0]->nbytes(), n, ne)) return ring(g, ctx, parts, ne);
        return doubling(g, ctx, parts);
    }

private:
    // one step: every (from, to) pair copies, then every receiver adds (or keeps) what it got
    struct transfer {
        int from, to;
        tensor* src; // on `from`
        tensor* dst; // on `to`: the receive buffer (add) or the final place (copy only)
        tensor* acc; // on `to`: where to add the received values; null: copy only
    };
    status step(group& g, context& ctx, const std::vector<transfer>& ts) {
        ++stats_.steps;
        // the add nodes are made here: a context is not shared between threads
        std::vector<tensor*> sums(ts.size(), nullptr);
        for (std::size_t i = 0; i < ts.size(); ++i) {
            stats_.bytes_moved += ts[i].src->nbytes();
            if (ts[i].acc != nullptr) sums[i] = detail::add_node(ctx, ts[i].acc, ts[i].dst);
        }
        status s = g.run_each([&](int d) -> status {
            for (const transfer& t : ts)
                if (t.to == d)
                    if (status st = detail::copy_between(g.backend(d), *t.src, *t.dst, serial_); !st) return st;
            return {};
        });
        if (!s) return s;
        return g.run_each([&](int d) -> status {
            for (std::size_t i = 0; i < ts.size(); ++i)
                if (ts[i].to == d && sums[i] != nullptr)
                    if (status st = g.backend(d).compute(graph_view(std::span<tensor* const>(&sums[i], 1))); !st)
                        return st;
            return g.backend(d).synchronize();
        });
    }

    status doubling(group& g, context& ctx, std::span<tensor* const> parts) {
        const int n = g.size();
        int p2 = 1;
        while (p2 * 2 <= n) p2 *= 2;
        std::vector<tensor*> recv(static_cast<std::size_t>(n));
        for (int d = 0; d < n; ++d) recv[static_cast<std::size_t>(d)] = detail::shaped(ctx, &g.scratch(d), *parts[0]);
        const auto part = [&](int d) { return parts[static_cast<std::size_t>(d)]; };
        std::vector<transfer> ts;
        for (int r = p2; r < n; ++r) ts.push_back({r, r - p2, part(r), recv[static_cast<std::size_t>(r - p2)], part(r - p2)});
        if (!ts.empty())
            if (status s = step(g, ctx, ts); !s) return s;
        for (int bit = 1; bit < p2; bit *= 2) {
            ts.clear();
            for (int d = 0; d < p2; ++d) ts.push_back({d ^ bit, d, part(d ^ bit), recv[static_cast<std::size_t>(d)], part(d)});
            if (status s = step(g, ctx, ts); !s) return s;
        }
        ts.clear();
        for (int r = p2; r < n; ++r) ts.push_back({r - p2, r, part(r - p2), part(r), nullptr});
        if (!ts.empty()) return step(g, ctx, ts);
        return {};
    }

    status ring(group& g, context& ctx, std::span<tensor* const> parts, std::int64_t ne) {
        const int n = g.size();
        const auto first = [&](int c) { return ne * c / n; };
        // chunk c of each device's tensor and receive buffer
        std::vector<std::vector<tensor*>> chunk(static_cast<std::size_t>(n)), recv(static_cast<std::size_t>(n));
        for (int d = 0; d < n; ++d)
            for (int c = 0; c < n; ++c) {
                const std::int64_t f = first(c), len = first(c + 1) - f;
                chunk[static_cast<std::size_t>(d)].push_back(detail::slice(ctx, parts[static_cast<std::size_t>(d)], f, len));
                recv[static_cast<std::size_t>(d)].push_back(detail::slice(ctx, &g.scratch(d), f, len));
            }
        const auto mod = [n](int x) { return ((x % n) + n) % n; };
        std::vector<transfer> ts;
        // reduce-scatter: after step s, device d holds the sum of s + 2 devices for chunk d - s - 1
        for (int s = 0; s < n - 1; ++s) {
            ts.clear();
            for (int d = 0; d < n; ++d) {
                const int to = mod(d + 1), c = mod(d - s);
                ts.push_back({d, to, chunk[static_cast<std::size_t>(d)][static_cast<std::size_t>(c)],
                              recv[static_cast<std::size_t>(to)][static_cast<std::size_t>(c)],
                              chunk[static_cast<std::size_t>(to)][static_cast<std::size_t>(c)]});
            }
            if (status st = step(g, ctx, ts); !st) return st;
        }
        // all-gather: device d owns the full sum of chunk d + 1 and passes it on
        for (int s = 0; s < n - 1; ++s) {
            ts.clear();
            for (int d = 0; d < n; ++d) {
                const int to = mod(d + 1), c = mod(d + 1 - s);
                ts.push_back({d, to, chunk[static_cast<std::size_t>(d)][static_cast<std::size_t>(c)],
                              chunk[static_cast<std::size_t>(to)][static_cast<std::size_t>(c)], nullptr});
            }
            if (status st = step(g, ctx, ts); !st) return st;
        }
        return {};
    }

    std::size_t ring_min_bytes_;
    std::mutex serial_;
};

namespace detail {

/// Runs f(d) for every device d in parallel on `pool` (one thread per device, device 0 on
/// the caller's thread: the CPU backend's pool, whose threads poll briefly between jobs
/// before they sleep, as a compute hands work to the devices at every segment and
/// collective step); the failure of the lowest device that failed.
inline status run_each(cpu::thread_pool& pool, const std::function<status(int)>& f) {
    struct job {
        const std::function<status(int)>* f;
        std::vector<status> results;
        std::vector<char> threw;
    };
    job j{&f, std::vector<status>(static_cast<std::size_t>(pool.n_threads())),
          std::vector<char>(static_cast<std::size_t>(pool.n_threads()), 0)};
    const status started = pool.run(
        [](void* ctx, int d) noexcept {
            auto& jb = *static_cast<job*>(ctx);
            const auto du = static_cast<std::size_t>(d);
            try {
                jb.results[du] = (*jb.f)(d);
            } catch (...) {
                jb.threw[du] = 1;
            }
        },
        &j);
    if (!started) return started;
    for (std::size_t d = 0; d < j.results.size(); ++d) {
        if (j.threw[d]) return {errc::failed, "meta device " + std::to_string(d) + ": an exception was thrown"};
        if (!j.results[d]) return j.results[d];
    }
    return {};
}

} // namespace detail

} // namespace backplane::meta
