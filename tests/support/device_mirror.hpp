#pragma once
// Runs a graph built in host memory on a device backend, for tests that hold their
// inputs and expected results in a host context (the parity cases) and compare any
// backend with the CPU reference on the very same graph.
//
//   compute_on_device(be, g)   copies the memory of every tensor of g into one buffer of
//                              be's buffer type, points g's tensors at it, computes and
//                              synchronizes, copies everything back to the host and
//                              points the tensors at their host memory again
//
// Tensors keep their relative placement within their root (the tensor a view aliases),
// so views stay views at the same byte offsets: an odd offset in host memory is an odd
// offset on the device too. Each root starts at an offset aligned to the buffer type's
// alignment, as an allocator would place it. Every tensor's data and buffer are restored
// on every way out, failures and exceptions included.

#include <backplane/backplane.hpp>
#include <backplane/memory/detail/align.hpp>

#include <algorithm>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace backplane::test {

namespace mirror_detail {

/// The tensor whose memory t aliases (t itself when it is no view).
inline tensor* root_of(tensor* t) noexcept { return t->view_src != nullptr ? t->view_src : t; }

/// Every tensor g reads or writes: nodes, leafs, their sources and view sources, once each.
inline std::vector<tensor*> tensors_of(const graph& g) {
    std::vector<tensor*> all;
    const auto add = [&](tensor* t) {
        all.push_back(t);
        for (tensor* s : t->src)
            if (s != nullptr) all.push_back(s);
        if (t->view_src != nullptr) all.push_back(t->view_src);
    };
    for (tensor* t : g.nodes()) add(t);
    for (tensor* t : g.leafs()) add(t);
    std::sort(all.begin(), all.end());
    all.erase(std::unique(all.begin(), all.end()), all.end());
    return all;
}

/// Puts every recorded tensor back where it was when it goes out of scope, after waiting
/// for the backend when work may still be queued on the memory about to be freed.
template <class B>
class restorer {
public:
    explicit restorer(B& be) : be_(be) {}
    restorer(const restorer&) = delete;
    restorer& operator=(const restorer&) = delete;
    ~restorer() {
        if (queued) (void)be_.synchronize();
        for (auto it = saved_.rbegin(); it != saved_.rend(); ++it)
            it->t->set_placement(it->buffer, it->serial, it->data, it->placer);
    }

    void record(tensor* t) { saved_.push_back({t, t->data, t->buffer, t->buffer_serial, t->placer}); }
    bool queued = false;

private:
    struct saved {
        tensor* t;
        void* data;
        buffer_handle* buffer;
        std::uint64_t serial;
        placed_by placer;
    };
    B& be_;
    std::vector<saved> saved_;
};

} // namespace mirror_detail

/// Computes g on `be` although g's tensors live in host memory (context data or host
/// buffers): see the file comment. The results end up in the host memory of g's tensors.
/// A status names what failed: a tensor without host memory, the allocation, a transfer,
/// or the backend's compute or synchronize.
template <backend B>
[[nodiscard]] status compute_on_device(B& be, graph& g) {
    const std::vector<tensor*> all = mirror_detail::tensors_of(g);
    std::vector<tensor*> roots;
    for (tensor* t : all) {
        if (t->data == nullptr)
            return {errc::invalid_argument, "compute_on_device: tensor '" + t->name + "' has no data"};
        if (t->buffer != nullptr && !t->buffer->is_host())
            return {errc::invalid_argument, "compute_on_device: tensor '" + t->name + "' is not in host memory"};
        roots.push_back(mirror_detail::root_of(t));
    }
    std::sort(roots.begin(), roots.end());
    roots.erase(std::unique(roots.begin(), roots.end()), roots.end());

    // each root at an aligned offset, with the room the buffer type asks for it
    const buffer_type_ref bt(be.buffer_type());
    const std::size_t alignment = backplane::detail::sane_alignment(bt.alignment());
    std::vector<std::size_t> root_offs(roots.size());
    std::size_t size = 0;
    for (std::size_t i = 0; i < roots.size(); ++i) {
        root_offs[i] = *backplane::detail::align_up(size, alignment);
        size = root_offs[i] + std::max(bt.alloc_size(*roots[i]), roots[i]->nbytes());
    }
    auto buf = bt.allocate(size + alignment); // room to align the buffer's own base
    if (!buf) return buf.error();
    auto* base = static_cast<std::byte*>((*buf)->base()) + backplane::detail::padding_for((*buf)->base(), alignment);

    // the new address of every tensor, worked out before any of them moves
    std::vector<std::pair<tensor*, std::byte*>> moves;
    moves.reserve(all.size());
    for (tensor* t : all) {
        tensor* root = mirror_detail::root_of(t);
        const auto i = static_cast<std::size_t>(std::lower_bound(roots.begin(), roots.end(), root) - roots.begin());
        const auto* host_root = static_cast<const std::byte*>(root->data);
        const auto* host = static_cast<const std::byte*>(t->data);
        if (host < host_root || static_cast<std::size_t>(host - host_root) > root->nbytes())
            return {errc::invalid_argument, "compute_on_device: tensor '" + t->name + "' lies outside its view source"};
        moves.emplace_back(t, base + root_offs[i] + (host - host_root));
    }

    std::vector<void*> host_data(roots.size());
    for (std::size_t i = 0; i < roots.size(); ++i) host_data[i] = roots[i]->data;

    mirror_detail::restorer<B> restore(be); // declared after buf: restores before it is freed
    for (auto& [t, data] : moves) {
        restore.record(t);
        place_tensor(*t, **buf, data);
        if (status s = t->buffer->init_tensor(*t); !s) return s;
    }
    for (std::size_t i = 0; i < roots.size(); ++i)
        if (status s = tensor_set(*roots[i], host_data[i], 0, roots[i]->nbytes()); !s) return s;

    restore.queued = true;
    const status computed = be.compute(g);
    const status synced = be.synchronize();
    restore.queued = false;
    if (!computed) return computed;
    if (!synced) return synced;

    for (std::size_t i = 0; i < roots.size(); ++i)
        if (status s = tensor_get(*roots[i], host_data[i], 0, roots[i]->nbytes()); !s) return s;
    return {};
}

} // namespace backplane::test
