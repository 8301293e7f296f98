#pragma once
// backplane::mpi::remote_buffer_type: the memory of a pipeline stage that another rank
// holds (pipeline.hpp), as this rank sees it: tensors get addresses, so that every rank
// places and plans the same graph, but no bytes.
//
// A buffer reserves address space only (inaccessible pages, no memory), so its tensors'
// addresses are distinct from every other buffer's and never readable by mistake.
// Writes are dropped (every rank loads the same weights; the rank of the stage keeps
// them); reads are errc::not_supported (the values live on the stage's rank: read
// outputs with mpi::pipeline::read).

#include <backplane/core/error.hpp>
#include <backplane/core/tensor.hpp>
#include <backplane/memory/buffer.hpp>

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

namespace backplane::mpi {

/// A buffer of a remote_buffer_type: reserved addresses, no bytes (see the header comment).
class remote_buffer {
public:
    remote_buffer(remote_buffer&& o) noexcept
        : base_(std::exchange(o.base_, nullptr)), size_(std::exchange(o.size_, 0)), reserved_(std::exchange(o.reserved_, 0)),
          rank_(o.rank_) {}
    remote_buffer& operator=(remote_buffer&&) = delete;
    ~remote_buffer() {
        if (base_ != nullptr) ::munmap(base_, reserved_);
    }

    [[nodiscard]] void* base() const noexcept { return base_; }
    [[nodiscard]] std::size_t size() const noexcept { return size_; }
    status set_tensor(tensor&, const void*, std::size_t, std::size_t) { return {}; }
    status get_tensor(const tensor& t, void*, std::size_t, std::size_t) {
        return {errc::not_supported, "tensor '" + t.name + "' lives on rank " + std::to_string(rank_) +
                                         " (its pipeline stage): read it with mpi::pipeline::read on every rank"};
    }
    status memset_tensor(tensor&, std::uint8_t, std::size_t, std::size_t) { return {}; }
    status clear(std::uint8_t) { return {}; }

private:
    friend class remote_buffer_type;
    remote_buffer(void* base, std::size_t size, std::size_t reserved, int rank) noexcept
        : base_(base), size_(size), reserved_(reserved), rank_(rank) {}
    void* base_;
    std::size_t size_, reserved_;
    int rank_;
};

/// The memory of the pipeline stage on rank `rank`, seen from another rank.
class remote_buffer_type {
public:
    using buffer_t = remote_buffer;

    explicit remote_buffer_type(int rank, std::size_t alignment = 64)
        : rank_(rank), alignment_(alignment), name_("rank " + std::to_string(rank)) {}
    remote_buffer_type(const remote_buffer_type&) = delete; // identified by address
    remote_buffer_type& operator=(const remote_buffer_type&) = delete;

    [[nodiscard]] std::string_view name() const noexcept { return name_; }
    [[nodiscard]] std::size_t alignment() const noexcept { return alignment_; }
    [[nodiscard]] std::size_t max_size() const noexcept { return std::size_t{1} << 46; }
    [[nodiscard]] std::size_t alloc_size(const tensor& t) const noexcept { return t.nbytes(); }
    [[nodiscard]] bool is_host() const noexcept { return false; }

    [[nodiscard]] result<remote_buffer> allocate(std::size_t size) const {
        if (size > max_size())
            return status(errc::alloc_failed, name_ + ": " + std::to_string(size) + " bytes exceed its address space");
        const std::size_t reserved = size == 0 ? 1 : size;
        void* p = ::mmap(nullptr, reserved, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED)
            return status(errc::alloc_failed, name_ + ": no address space for " + std::to_string(size) + " bytes");
        return remote_buffer(p, size, reserved, rank_);
    }

private:
    int rank_;
    std::size_t alignment_;
    std::string name_;
};

} // namespace backplane::mpi
