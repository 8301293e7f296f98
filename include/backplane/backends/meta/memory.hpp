#pragma once
// Memory of a meta device: the meta buffer type and its buffers.
//
// A meta buffer is an address range with no memory of its own. Allocators place tensors
// in it as in any buffer (alloc_tensors for weights, graph_allocator for a graph), and
// what each device really holds is decided per tensor:
//
//   leaves (weights, graph inputs)  when placed, the split callback gives their state;
//                                   each device then holds only its slice (mirrored: all
//                                   of it), in storage of its own buffer type that the
//                                   meta buffer allocates once for all tensors placed
//                                   together, on their first read or write: a device
//                                   holds 1/n of the split weights, plus the mirrored ones
//   computed tensors                live in the per-device compute buffers of the meta
//                                   backend, sized from each device's own graph; graph
//                                   outputs are published to their meta buffer after a
//                                   compute, so they can be read
//
// Reads and writes scatter and gather by state: an axis split writes each device's
// slices (one transfer per device for a whole tensor), a mirrored tensor is written to
// every device and read from the first, a partial f32 tensor is read as the sum of the
// devices' copies. Writing a partial tensor needs meta_set_partial, which says how.

#include <backplane/backends/meta/processes.hpp>
#include <backplane/backends/meta/split.hpp>
#include <backplane/core/detail/describe.hpp>
#include <backplane/core/error.hpp>
#include <backplane/core/tensor.hpp>
#include <backplane/memory/buffer.hpp>
#include <backplane/memory/detail/align.hpp>
#include <backplane/erased/any.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace backplane {

namespace meta {

class collective;

/// The state of a statically allocated tensor (a weight, a graph input), asked when it is
/// placed in a meta buffer. n is the number of devices.
using split_callback = std::function<split_state(const tensor& t, int n)>;

/// Makes the collective that reduces partial sums over the given devices (see
/// collective.hpp); null or returning null: the generic one.
using collective_factory = std::function<std::unique_ptr<collective>(std::span<const any_device>)>;

struct meta_params {
    /// States of leaves; none: every leaf mirrored.
    split_callback split = {};
    /// Threads of each device's backend where it has a thread count (the CPU's); 0: the
    /// hardware threads shared out over the devices that have one.
    int threads_per_device = 0;
    /// Partial tensors of at least this many bytes are reduced with a ring (reduce-scatter
    /// then all-gather: 2 (n-1)/n of the tensor moved per device) on 3 or more devices;
    /// smaller ones with recursive doubling (log2 n steps, each moving the whole tensor).
    std::size_t ring_min_bytes = std::size_t{256} << 10;
    /// The collective; none: the generic one over copies and adds.
    collective_factory make_collective = {};
    /// The device's name ("Meta" when empty).
    std::string name = {};
    /// The processes the device spans (processes.hpp); none: this process's parts only.
    std::shared_ptr<process_group> processes = {};
};

namespace detail {
struct shared;
} // namespace detail

/// What a meta buffer holds for one tensor: its state and each device's piece.
struct record {
    split_state state;
    std::vector<tensor> local; ///< one per device of this process, with its data and buffer
    bool placed = false;       ///< storage assigned (a leaf waits for it until first used)
    /// By global device: the pieces of other processes' devices, gathered after a compute
    /// (split outputs of a meta device over several processes); empty: none
    std::vector<std::vector<std::byte>> remote;
};

} // namespace meta

/// A buffer of a meta device (see the file comment).
class meta_buffer {
public:
    meta_buffer(std::shared_ptr<meta::detail::shared> sh, std::size_t size);
    meta_buffer(meta_buffer&&) noexcept = default;
    meta_buffer& operator=(meta_buffer&&) noexcept = default;

    /// A fixed address: the range holds no memory, tensors are found by identity.
    [[nodiscard]] void* base() const noexcept { return reinterpret_cast<void*>(std::uintptr_t{1} << 20); }
    [[nodiscard]] std::size_t size() const noexcept { return size_; }

    status set_tensor(tensor& t, const void* src, std::size_t offset, std::size_t size);
    status get_tensor(const tensor& t, void* dst, std::size_t offset, std::size_t size);
    status memset_tensor(tensor& t, std::uint8_t value, std::size_t offset, std::size_t size);
    status clear(std::uint8_t value);
    status init_tensor(tensor& t);
    void reset();

    /// Devices of the meta device in this process.
    [[nodiscard]] int n_devices() const noexcept;
    /// Bytes this buffer holds on device d (its storage for leaves).
    [[nodiscard]] std::size_t device_bytes(int d) const noexcept {
        std::size_t n = 0;
        for (const auto& c : stores_[static_cast<std::size_t>(d)].chunks) n += c->size();
        return n;
    }
    /// What the buffer holds for `root` (placing pending leaves first), or null.
    [[nodiscard]] result<const meta::record*> find(const tensor& root);
    /// Assigns storage to every leaf placed since the last call.
    status flush();
    /// Makes a computed tensor readable: its state and each device's piece (called by the
    /// meta backend for graph outputs after a compute).
    /// `remote`: the other processes' pieces by global device (meta::record::remote).
    void publish(const tensor& t, meta::split_state state, std::span<tensor* const> local,
                 std::vector<std::vector<std::byte>> remote = {});
    /// Writes a partial tensor from one full value (see meta::partial_write).
    status set_partial(tensor& t, const void* src, meta::partial_write how);

private:
    struct store {
        std::vector<buffer_ptr> chunks;
        std::size_t chunk = 0; // the chunk being filled
        std::size_t used = 0;  // bytes used in it
    };
    result<std::pair<meta::record*, const tensor*>> locate(const tensor& t, const char* what);
    /// Bytes [offset, offset + size) of a split root between host memory and the devices'
    /// pieces (write: to the devices).
    status transfer_split(meta::record& rec, const tensor& root, std::byte* host, std::size_t offset,
                          std::size_t size, bool write);

    std::shared_ptr<meta::detail::shared> sh_;
    std::size_t size_ = 0;
    std::unordered_map<const tensor*, meta::record> records_;
    std::vector<const tensor*> pending_;
    std::vector<store> stores_;
};
static_assert(buffer<meta_buffer>);

/// The buffer type of a meta device: meta buffers (see the file comment).
class meta_buffer_type {
public:
    using buffer_t = meta_buffer;
    explicit meta_buffer_type(meta::detail::shared* sh) noexcept : sh_(sh) {}
    meta_buffer_type(const meta_buffer_type&) = delete;
    meta_buffer_type& operator=(const meta_buffer_type&) = delete;

    [[nodiscard]] std::string_view name() const noexcept;
    /// The meta device's (its name is the device's).
    [[nodiscard]] std::string_view device_name() const noexcept { return name(); }
    [[nodiscard]] std::size_t alignment() const noexcept;
    [[nodiscard]] std::size_t max_size() const noexcept { return std::numeric_limits<std::size_t>::max() >> 8; }
    [[nodiscard]] std::size_t alloc_size(const tensor& t) const noexcept { return t.nbytes(); }
    [[nodiscard]] bool is_host() const noexcept { return false; }
    [[nodiscard]] result<meta_buffer> allocate(std::size_t size) const;

private:
    meta::detail::shared* sh_;
};
static_assert(buffer_type<meta_buffer_type>);
static_assert(device_buffer_type<meta_buffer_type>);

namespace meta::detail {

/// What a meta device, its buffer type, buffers and backends share.
struct shared : std::enable_shared_from_this<shared> {
    std::vector<any_device> parts;
    std::vector<any_buffer_type> part_types; ///< each part's default buffer type
    meta_params params;
    int first = 0; ///< the global number of parts[0] (0 without other processes)
    int total = 0; ///< devices of all processes
    /// Global device g's index in parts, or -1 when another process holds it.
    [[nodiscard]] int local_index(int g) const noexcept {
        const int l = g - first;
        return l >= 0 && l < static_cast<int>(parts.size()) ? l : -1;
    }
    std::string name;
    std::string description;
    meta_buffer_type buft{this};
};

inline const tensor& root_of(const tensor& t) noexcept { return t.view_src != nullptr ? *t.view_src : t; }

/// Calls f(device, meta byte offset, local byte offset, bytes) for each contiguous run of
/// bytes [offset, offset + size) of a contiguous root split as `st`, in each device's
/// local order.
template <class F>
void for_each_run(const tensor& root, const split_state& st, std::size_t offset, std::size_t size, F&& f) {
    if (size == 0) return;
    const auto k = static_cast<std::size_t>(st.axis());
    const std::int64_t q = k == 0 ? block_size(root.type) : 1;
    const std::size_t U = root.nb[k];
    const std::size_t B = U * static_cast<std::size_t>(root.ne[k] / q);
    const int n = st.n_devices();
    for (std::size_t o = offset / B; o <= (offset + size - 1) / B; ++o)
        for (int s = 0; s < st.n_segments(); ++s)
            for (int d = 0; d < n; ++d) {
                const std::size_t B_d = U * static_cast<std::size_t>(st.local_extent(d) / q);
                const std::size_t ms = o * B + static_cast<std::size_t>(st.start(s, d) / q) * U;
                const std::size_t len = static_cast<std::size_t>(st.size(s, d) / q) * U;
                const std::size_t ls = o * B_d + static_cast<std::size_t>(st.local_start(s, d) / q) * U;
                const std::size_t lo = std::max(ms, offset), hi = std::min(ms + len, offset + size);
                if (lo < hi) f(d, lo, ls + (lo - ms), hi - lo);
            }
}

/// Device d's piece of a tensor shaped as `t` in state `st`: contiguous, no data yet.
inline tensor local_piece(const tensor& t, const split_state& st, int d) {
    tensor l;
    l.type = t.type;
    l.ne = st.local_shape(t.ne, d);
    l.nb = contiguous_strides(t.type, l.ne);
    l.flags = t.flags;
    l.name = t.name + "@" + std::to_string(d);
    return l;
}

} // namespace meta::detail

// ---------------------------------------------------------------------------------------
// meta_buffer_type

inline std::string_view meta_buffer_type::name() const noexcept { return sh_->name; }
inline std::size_t meta_buffer_type::alignment() const noexcept {
    std::size_t a = 64;
    for (const auto& bt : sh_->part_types) a = std::max(a, backplane::detail::sane_alignment(bt.alignment()));
    return a;
}
inline result<meta_buffer> meta_buffer_type::allocate(std::size_t size) const {
    try {
        return meta_buffer(sh_->shared_from_this(), size);
    } catch (const std::bad_alloc&) {
        return status(errc::alloc_failed, "meta buffer: out of host memory");
    }
}

// ---------------------------------------------------------------------------------------
// meta_buffer

inline meta_buffer::meta_buffer(std::shared_ptr<meta::detail::shared> sh, std::size_t size)
    : sh_(std::move(sh)), size_(size), stores_(sh_->parts.size()) {}

inline int meta_buffer::n_devices() const noexcept { return static_cast<int>(sh_->parts.size()); }

inline status meta_buffer::init_tensor(tensor& t) {
    if (t.view_src != nullptr || t.op != op_kind::none) return {}; // views and computed tensors: see the file comment
    const int n = sh_->total;
    meta::split_state st;
    if (sh_->params.split) {
        try {
            st = sh_->params.split(t, n);
        } catch (const std::exception& e) {
            return {errc::invalid_argument,
                    "meta buffer: the split callback failed for " + backplane::detail::describe(&t) + ": " + e.what()};
        }
    }
    if (status s = st.check(t.type, t.ne, n); !s)
        return {s.code(), "meta buffer: the split callback's state for " + backplane::detail::describe(&t) + ": " +
                              s.message()};
    if (!t.is_contiguous())
        return {errc::invalid_argument, "meta buffer: " + backplane::detail::describe(&t) + " is not contiguous"};
    meta::record r;
    r.state = std::move(st);
    for (int d = 0; d < n_devices(); ++d) r.local.push_back(meta::detail::local_piece(t, r.state, sh_->first + d));
    records_.insert_or_assign(&t, std::move(r));
    pending_.push_back(&t);
    return {};
}

inline void meta_buffer::reset() {
    records_.clear();
    pending_.clear();
    for (auto& s : stores_) s.chunk = s.used = 0;
}

inline status meta_buffer::flush() {
    if (pending_.empty()) return {};
    const int n = n_devices();
    for (int d = 0; d < n; ++d) {
        const buffer_type_ref bt = sh_->part_types[static_cast<std::size_t>(d)];
        const std::size_t align = backplane::detail::sane_alignment(bt.alignment());
        std::size_t need = 0;
        for (const tensor* t : pending_) {
            auto it = records_.find(t);
            if (it == records_.end() || it->second.placed) continue;
            need += *backplane::detail::align_up(bt.alloc_size(it->second.local[static_cast<std::size_t>(d)]), align);
        }
        store& s = stores_[static_cast<std::size_t>(d)];
        // the next chunk that holds all of it, or a new one of exactly that size
        const auto room = [&](std::size_t c, std::size_t used) {
            auto* base = static_cast<std::byte*>(s.chunks[c]->base());
            const std::size_t pad = backplane::detail::padding_for(base, align);
            return s.chunks[c]->size() >= pad + used + need;
        };
        while (s.chunk < s.chunks.size() && !room(s.chunk, s.used)) {
            ++s.chunk;
            s.used = 0;
        }
        if (s.chunk == s.chunks.size()) {
            auto buf = bt.allocate(need + align);
            if (!buf)
                return {buf.error().code(),
                        "meta buffer: allocating " + std::to_string(need) + " bytes on " +
                            std::string(sh_->parts[static_cast<std::size_t>(d)].name()) + " failed: " +
                            buf.error().message()};
            (*buf)->set_usage(buffer_usage::weights);
            s.chunks.push_back(std::move(*buf));
            s.used = 0;
        }
        buffer_handle& chunk = *s.chunks[s.chunk];
        auto* base = static_cast<std::byte*>(chunk.base());
        base += backplane::detail::padding_for(base, align);
        for (const tensor* t : pending_) {
            auto it = records_.find(t);
            if (it == records_.end() || it->second.placed) continue;
            tensor& l = it->second.local[static_cast<std::size_t>(d)];
            place_tensor(l, chunk, base + s.used);
            s.used += *backplane::detail::align_up(bt.alloc_size(l), align);
            if (status st = chunk.init_tensor(l); !st) return st;
        }
    }
    for (const tensor* t : pending_)
        if (auto it = records_.find(t); it != records_.end()) it->second.placed = true;
    pending_.clear();
    return {};
}

inline result<const meta::record*> meta_buffer::find(const tensor& root) {
    if (status s = flush(); !s) return s;
    auto it = records_.find(&root);
    if (it == records_.end()) return static_cast<const meta::record*>(nullptr);
    return static_cast<const meta::record*>(&it->second);
}

inline void meta_buffer::publish(const tensor& t, meta::split_state state, std::span<tensor* const> local,
                                 std::vector<std::vector<std::byte>> remote) {
    meta::record r;
    r.state = std::move(state);
    for (const tensor* l : local) r.local.push_back(*l);
    r.placed = true;
    r.remote = std::move(remote);
    records_.insert_or_assign(&t, std::move(r));
}

inline result<std::pair<meta::record*, const tensor*>> meta_buffer::locate(const tensor& t, const char* what) {
    if (status s = flush(); !s) return s;
    const tensor& root = meta::detail::root_of(t);
    auto it = records_.find(&root);
    if (it == records_.end())
        return status(errc::invalid_argument,
                      std::string(what) + ": " + backplane::detail::describe(&t) +
                          " has no storage on the meta device's parts: leaves (weights, inputs) can be written and "
                          "read, computed tensors only when flagged output, after a compute");
    if (&root != &t && !(it->second.state.is_mirrored() && t.is_contiguous()))
        return status(errc::not_supported, std::string(what) + ": " + backplane::detail::describe(&t) +
                                               " is a view of a " + it->second.state.to_string() +
                                               " tensor; read or write its root " + backplane::detail::describe(&root));
    return std::pair<meta::record*, const tensor*>{&it->second, &root};
}

inline status meta_buffer::transfer_split(meta::record& rec, const tensor& root, std::byte* host, std::size_t offset,
                                          std::size_t size, bool write) {
    // a piece of another process's device: that process writes it; reads take what was
    // gathered after a compute
    status result;
    const auto remote_run = [&](int g, std::size_t m, std::size_t l, std::size_t len) {
        if (write || !result) return;
        const auto gu = static_cast<std::size_t>(g);
        if (gu >= rec.remote.size() || rec.remote[gu].size() < l + len) {
            result = {errc::not_supported, "meta get_tensor: " + backplane::detail::describe(&root) + ": its piece on device " +
                                               std::to_string(g) + " lives in another process (only split graph outputs "
                                               "are gathered from the processes)"};
            return;
        }
        std::memcpy(host + (m - offset), rec.remote[gu].data() + l, len);
    };
    if (offset == 0 && size == root.nbytes()) { // the whole tensor: one transfer per device
        std::vector<std::vector<std::byte>> staging(rec.local.size());
        for (std::size_t d = 0; d < staging.size(); ++d) {
            staging[d].resize(rec.local[d].nbytes());
            if (!write)
                if (status s = rec.local[d].buffer->get_tensor(rec.local[d], staging[d].data(), 0, staging[d].size()); !s)
                    return s;
        }
        meta::detail::for_each_run(root, rec.state, 0, size, [&](int g, std::size_t m, std::size_t l, std::size_t len) {
            const int d = sh_->local_index(g);
            if (d < 0) return remote_run(g, m, l, len);
            std::byte* piece = staging[static_cast<std::size_t>(d)].data() + l;
            if (write)
                std::memcpy(piece, host + m, len);
            else
                std::memcpy(host + m, piece, len);
        });
        if (!result) return result;
        if (write)
            for (std::size_t d = 0; d < staging.size(); ++d)
                if (status s = rec.local[d].buffer->set_tensor(rec.local[d], staging[d].data(), 0, staging[d].size()); !s)
                    return s;
        return {};
    }
    meta::detail::for_each_run(root, rec.state, offset, size, [&](int g, std::size_t m, std::size_t l, std::size_t len) {
        if (!result) return;
        const int d = sh_->local_index(g);
        if (d < 0) return remote_run(g, m, l, len);
        tensor& loc = rec.local[static_cast<std::size_t>(d)];
        result = write ? loc.buffer->set_tensor(loc, host + (m - offset), l, len)
                       : loc.buffer->get_tensor(loc, host + (m - offset), l, len);
    });
    return result;
}

inline status meta_buffer::set_tensor(tensor& t, const void* src, std::size_t offset, std::size_t size) {
    auto at = locate(t, "meta set_tensor");
    if (!at) return at.error();
    auto [rec, root] = *at;
    if (root != &t) offset = t.view_offs + offset;
    const auto* bytes = static_cast<const std::byte*>(src);
    switch (rec->state.kind()) {
    case meta::split_kind::partial:
        return {errc::invalid_argument, "meta set_tensor: " + backplane::detail::describe(&t) +
                                            " holds partial sums: write it with meta_set_partial, which says how the "
                                            "value is shared out (device 0, or divided)"};
    case meta::split_kind::mirrored:
        for (tensor& l : rec->local)
            if (status s = l.buffer->set_tensor(l, bytes, offset, size); !s) return s;
        return {};
    case meta::split_kind::axis: break;
    }
    return transfer_split(*rec, *root, const_cast<std::byte*>(bytes), offset, size, true);
}

inline status meta_buffer::get_tensor(const tensor& t, void* dst, std::size_t offset, std::size_t size) {
    auto at = locate(t, "meta get_tensor");
    if (!at) return at.error();
    auto [rec, root] = *at;
    if (root != &t) offset = t.view_offs + offset;
    auto* bytes = static_cast<std::byte*>(dst);
    switch (rec->state.kind()) {
    case meta::split_kind::mirrored: {
        tensor& l = rec->local.front();
        return l.buffer->get_tensor(l, bytes, offset, size);
    }
    case meta::split_kind::partial: {
        if (sh_->total != n_devices())
            return {errc::not_supported, "meta get_tensor: " + backplane::detail::describe(&t) +
                                             " holds partial sums in several processes; reduce it in the graph (flag "
                                             "it output)"};
        if (root->type != elem_type::f32 || offset % 4 != 0 || size % 4 != 0)
            return {errc::not_supported, "meta get_tensor: " + backplane::detail::describe(&t) +
                                             " holds partial sums; only whole f32 values can be summed on read"};
        std::vector<float> sum(size / 4, 0.0f), part(size / 4);
        for (tensor& l : rec->local) {
            if (status s = l.buffer->get_tensor(l, part.data(), offset, size); !s) return s;
            for (std::size_t i = 0; i < sum.size(); ++i) sum[i] += part[i];
        }
        std::memcpy(bytes, sum.data(), size);
        return {};
    }
    case meta::split_kind::axis: break;
    }
    return transfer_split(*rec, *root, bytes, offset, size, false);
}

inline status meta_buffer::memset_tensor(tensor& t, std::uint8_t value, std::size_t offset, std::size_t size) {
    auto at = locate(t, "meta memset_tensor");
    if (!at) return at.error();
    auto [rec, root] = *at;
    if (root != &t) offset = t.view_offs + offset;
    if (rec->state.is_split()) {
        status result;
        auto* const pieces = rec; // a named copy: clang before 16 cannot capture a structured binding
        meta::detail::for_each_run(*root, rec->state, offset, size, [&](int g, std::size_t, std::size_t l, std::size_t len) {
            const int d = sh_->local_index(g);
            if (!result || d < 0) return; // another process's piece: that process sets it
            tensor& loc = pieces->local[static_cast<std::size_t>(d)];
            result = loc.buffer->memset_tensor(loc, value, l, len);
        });
        return result;
    }
    if (rec->state.is_partial() && value != 0)
        return {errc::invalid_argument, "meta memset_tensor: " + backplane::detail::describe(&t) +
                                            " holds partial sums; only zero is the same whole and shared out"};
    for (tensor& l : rec->local)
        if (status s = l.buffer->memset_tensor(l, value, offset, size); !s) return s;
    return {};
}

inline status meta_buffer::clear(std::uint8_t value) {
    if (status s = flush(); !s) return s;
    for (auto& st : stores_)
        for (auto& c : st.chunks)
            if (status s = c->clear(value); !s) return s;
    return {};
}

inline status meta_buffer::set_partial(tensor& t, const void* src, meta::partial_write how) {
    auto at = locate(t, "meta_set_partial");
    if (!at) return at.error();
    auto [rec, root] = *at;
    if (root != &t || !rec->state.is_partial())
        return {errc::invalid_argument, "meta_set_partial: " + backplane::detail::describe(&t) + " is " +
                                            rec->state.to_string() + ", not a partial root; write it with tensor_set"};
    const std::size_t size = t.nbytes();
    if (how == meta::partial_write::first_device) {
        for (std::size_t d = 0; d < rec->local.size(); ++d) {
            tensor& l = rec->local[d];
            const bool first = sh_->first + static_cast<int>(d) == 0; // global device 0 holds the value
            if (status s = first ? l.buffer->set_tensor(l, src, 0, size) : l.buffer->memset_tensor(l, 0, 0, size); !s)
                return s;
        }
        return {};
    }
    if (t.type != elem_type::f32)
        return {errc::invalid_argument,
                "meta_set_partial: dividing among the devices needs f32, " + backplane::detail::describe(&t) + " is not"};
    std::vector<float> v(size / 4);
    std::memcpy(v.data(), src, size);
    const float inv = 1.0f / static_cast<float>(sh_->total);
    for (float& x : v) x *= inv;
    for (tensor& l : rec->local)
        if (status s = l.buffer->set_tensor(l, v.data(), 0, size); !s) return s;
    return {};
}

/// Writes a partial tensor (in a meta buffer) from one full value, shared out as `how`
/// says; the devices' copies then sum to it.
inline status meta_set_partial(tensor& t, const void* src, meta::partial_write how) {
    if (t.buffer == nullptr || t.buffer->get_if<meta_buffer>() == nullptr)
        return {errc::invalid_argument, "meta_set_partial: " + backplane::detail::describe(&t) +
                                            " does not live in a meta buffer"};
    return t.buffer->get_if<meta_buffer>()->set_partial(t, src, how);
}

} // namespace backplane
