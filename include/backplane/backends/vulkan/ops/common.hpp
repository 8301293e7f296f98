#pragma once
// What every op family's dispatch planning shares: the push constants of every shader
// (shaders/common.glsl), the device features a plan may depend on, the dispatch a plan
// produces, and how tensors are described to shaders.
//
// Units. A binding starts at an aligned byte offset at or before its tensor; a shader
// indexes it in units of binding_unit(type): 4 bytes for f32, i32 and i64 (an i64 is two
// units, low word first), 2 bytes for f16, bf16 and the quantized types (whose blocks,
// 34 bytes for q8_0, 18 for q4_0, 144 for q4_K, are read as 16-bit words), 1 byte for
// mxfp4 (its 17-byte blocks are not 2-byte aligned: read as bytes, with 8-bit storage).
// Strides (nb, a_nb, b_nb) and offsets (offs) are in those units; extents (ne, a_ne,
// b_ne) are in elements.

#include <backplane/core/detail/iq_grids.hpp>
#include <backplane/core/tensor.hpp>
#include <backplane/core/types.hpp>

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <limits>
#include <string_view>

namespace backplane::vulkan::detail {

/// The push constants of every shader (shaders/common.glsl).
struct push_constants {
    std::array<std::uint32_t, 4> ne{}, nb{};     ///< the destination
    std::array<std::uint32_t, 4> a_ne{}, a_nb{}; ///< source 0
    std::array<std::uint32_t, 4> b_ne{}, b_nb{}; ///< source 1
    /// x, y, z: offsets of source 0, source 1 and the destination in their bindings (set
    /// by the backend when it binds them); w: source 2's where the node has one (set by
    /// the backend too), else op-specific
    std::array<std::uint32_t, 4> offs{};
    std::array<std::uint32_t, 4> prm{}; ///< op parameters (floats as their bits)
};
static_assert(sizeof(push_constants) == 128, "the push constants are 128 bytes (the guaranteed minimum)");

/// Launch slots: where a dispatch's tensors are bound. Slots 0 and 1 hold sources 0 and 1
/// (bindings 0 and 1), slot 2 the destination (binding 2), slots 3 to 7 sources 2 to 6
/// (bindings 4 to 8; binding 3 is the stream's error word).
inline constexpr std::size_t launch_slots = 2 + 1 + (max_srcs - 2);
static_assert(launch_slots == 8, "one slot per source and one for the destination");
constexpr std::size_t slot_of_source(std::size_t j) noexcept { return j < 2 ? j : j + 1; }
constexpr std::uint32_t binding_of_slot(std::size_t slot) noexcept {
    return static_cast<std::uint32_t>(slot < 3 ? slot : slot + 1);
}

/// The push-constant word that holds the offset of the tensor in launch slot `slot`,
/// which the backend writes when it binds the tensor: offs.x, .y, .z, .w for slots 0 to
/// 3 (sources 0, 1, the destination, source 2), then a_nb.x and b_nb.x for sources 3
/// and 4, a_nb.y and b_nb.y for sources 5 and 6. The push constants are full, so an op
/// with a fourth source gives up the element strides of sources 0 and 1 (flash_attn_ext:
/// its q and k rows are contiguous), and an op with a sixth gives up their row strides
/// too: its shader reads sources 0 and 1 as contiguous (ssm_scan, rwkv_wkv6, rwkv_wkv7),
/// and its planner refuses a node whose sources are not.
inline std::uint32_t& offset_word(push_constants& pc, std::size_t slot) noexcept {
    switch (slot) {
    case 0:
    case 1:
    case 2:
    case 3: return pc.offs[slot];
    case 4: return pc.a_nb[0];
    case 5: return pc.b_nb[0];
    case 6: return pc.a_nb[1];
    default: return pc.b_nb[1];
    }
}

/// What a device offers that plans depend on (filled from the device's properties).
struct features {
    bool fp16 = false;      ///< shaderFloat16
    bool int8 = false;      ///< shaderInt8
    bool storage16 = false; ///< storageBuffer16BitAccess
    bool storage8 = false;  ///< storageBuffer8BitAccess
    std::uint32_t subgroup_size = 1;
    std::size_t shared_memory = 16384;             ///< bytes per workgroup
    std::uint32_t max_invocations = 128;           ///< per workgroup
    std::size_t max_binding = std::size_t{1} << 27; ///< maxStorageBufferRange
};

/// One node's dispatch: the shader variant, its push constants and workgroup counts.
struct dispatch {
    std::string_view shader;
    push_constants pc;
    std::array<std::uint32_t, 3> groups{1, 1, 1};
};

/// The unit in which shaders index a binding of type t (see the file comment).
constexpr std::size_t binding_unit(elem_type t) noexcept {
    switch (t) {
    case elem_type::f32:
    case elem_type::i32:
    case elem_type::i64: return 4;
    case elem_type::mxfp4: return 1;
    default: return 2;
    }
}

/// Whether a device's shaders can read and write t's units: 16-bit ones need 16-bit
/// storage, bytes (mxfp4) 8-bit storage (and 16-bit storage, which their shaders use for
/// the other operands).
constexpr bool storable(elem_type t, const features& f) noexcept {
    switch (binding_unit(t)) {
    case 1: return f.storage8 && f.storage16;
    case 2: return f.storage16;
    default: return true;
    }
}

/// The quantized types beyond q8_0 and q4_0, in the order of the shader tables of the op
/// families that take them (mul_mat, get_rows, copy): their names in the variants.
inline constexpr elem_type more_quants[] = {elem_type::q4_1, elem_type::q5_0, elem_type::q5_1, elem_type::iq4_nl,
                                            elem_type::mxfp4, elem_type::q2_K, elem_type::q3_K, elem_type::q4_K,
                                            elem_type::q5_K, elem_type::q6_K, elem_type::q8_K};
inline constexpr std::size_t n_more_quants = std::size(more_quants);

/// The quantized types the shaders only read (get_rows, copies to f32, mul_mat; not
/// mul_mat_id, no other copies): iq4_xs, tq1_0, tq2_0 and the lattice i-quants, in the
/// order of those tables.
inline constexpr elem_type read_quants[] = {elem_type::iq4_xs,  elem_type::tq1_0,   elem_type::tq2_0,
                                            elem_type::iq2_xxs, elem_type::iq2_xs,  elem_type::iq2_s,
                                            elem_type::iq3_xxs, elem_type::iq3_s,   elem_type::iq1_s,
                                            elem_type::iq1_m};
inline constexpr std::size_t n_read_quants = std::size(read_quants);

/// The grid a lattice i-quant's shaders read (quants.glsl's q_grid: binding 9 of every
/// dispatch): core's table (core/detail/iq_grids.hpp), bytes as the host holds them
/// (little-endian words; a 64-bit entry low word first).
struct lattice_grid {
    elem_type type;
    const void* data;
    std::size_t bytes;
};
inline constexpr lattice_grid lattice_grids[] = {
    {elem_type::iq2_xxs, backplane::detail::iq2xxs_grid, sizeof backplane::detail::iq2xxs_grid},
    {elem_type::iq2_xs, backplane::detail::iq2xs_grid, sizeof backplane::detail::iq2xs_grid},
    {elem_type::iq2_s, backplane::detail::iq2s_grid, sizeof backplane::detail::iq2s_grid},
    {elem_type::iq3_xxs, backplane::detail::iq3xxs_grid, sizeof backplane::detail::iq3xxs_grid},
    {elem_type::iq3_s, backplane::detail::iq3s_grid, sizeof backplane::detail::iq3s_grid},
    {elem_type::iq1_s, backplane::detail::iq1s_grid, sizeof backplane::detail::iq1s_grid},
    {elem_type::iq1_m, backplane::detail::iq1s_grid, sizeof backplane::detail::iq1s_grid}};
inline constexpr std::size_t n_lattice_grids = std::size(lattice_grids);

/// The grids lie in one buffer per stream, each at a multiple of 256 bytes (the largest
/// offset alignment of a storage-buffer binding a device may ask).
constexpr std::size_t grid_offset(std::size_t i) noexcept {
    std::size_t at = 0;
    for (std::size_t k = 0; k < i; ++k) at += (lattice_grids[k].bytes + 255) / 256 * 256;
    return at;
}
inline constexpr std::size_t grid_buffer_bytes = grid_offset(n_lattice_grids);

/// t's grid (the first one for a type of none: such a shader reads no grid, but the
/// binding needs a buffer).
constexpr std::size_t grid_index(elem_type t) noexcept {
    for (std::size_t i = 0; i < n_lattice_grids; ++i)
        if (lattice_grids[i].type == t) return i;
    return 0;
}

/// t's index in read_quants, or -1.
constexpr int read_quant_index(elem_type t) noexcept {
    for (std::size_t i = 0; i < n_read_quants; ++i)
        if (read_quants[i] == t) return static_cast<int>(i);
    return -1;
}

/// t's index in more_quants, or -1.
constexpr int more_quant_index(elem_type t) noexcept {
    for (std::size_t i = 0; i < n_more_quants; ++i)
        if (more_quants[i] == t) return static_cast<int>(i);
    return -1;
}

/// t's extents (elements) and strides (binding units) as 32-bit values; false when they
/// do not fit or a stride is not a whole number of units.
inline bool shape32(const tensor& t, std::array<std::uint32_t, 4>& ne, std::array<std::uint32_t, 4>& nb) noexcept {
    const std::size_t u = binding_unit(t.type);
    constexpr auto max = std::numeric_limits<std::uint32_t>::max();
    if (t.nelements() < 0 || static_cast<std::uint64_t>(t.nelements()) >= max) return false;
    for (std::size_t i = 0; i < 4; ++i) {
        if (t.ne[i] <= 0 || static_cast<std::uint64_t>(t.ne[i]) > max) return false;
        if (t.nb[i] % u != 0 || t.nb[i] / u > max) return false;
        ne[i] = static_cast<std::uint32_t>(t.ne[i]);
        nb[i] = static_cast<std::uint32_t>(t.nb[i] / u);
    }
    return true;
}

/// The push constants of t with its sources' shapes (offsets are the backend's).
inline push_constants shapes_of(const tensor& t) noexcept {
    push_constants pc;
    (void)shape32(t, pc.ne, pc.nb);
    if (t.src[0] != nullptr) (void)shape32(*t.src[0], pc.a_ne, pc.a_nb);
    if (t.src[1] != nullptr) (void)shape32(*t.src[1], pc.b_ne, pc.b_nb);
    return pc;
}

/// Workgroups for n invocations in groups of `size`: a 2-D grid when one dimension is
/// not enough (65535 groups per dimension is the guaranteed minimum). Shaders recover
/// the linear index with linear_id() (common.glsl).
inline std::array<std::uint32_t, 3> groups_for(std::uint64_t n, std::uint32_t size) noexcept {
    const std::uint64_t g = (n + size - 1) / size;
    if (g <= 65535) return {static_cast<std::uint32_t>(g == 0 ? 1 : g), 1, 1};
    const std::uint64_t y = (g + 65534) / 65535;
    return {65535, static_cast<std::uint32_t>(y), 1};
}

/// Workgroups for n independent items (rows, say), one workgroup each: a 2-D grid
/// beyond 65535. Shaders recover the item with group_id() (common.glsl).
inline std::array<std::uint32_t, 3> groups_per_item(std::uint64_t n) noexcept { return groups_for(n, 1); }

/// The index of a real type in f32, f16, bf16, q8_0, q4_0 order (the copy shaders'
/// tables, flash_attn.comp's type codes), or -1.
constexpr int real_index(elem_type t) noexcept {
    switch (t) {
    case elem_type::f32: return 0;
    case elem_type::f16: return 1;
    case elem_type::bf16: return 2;
    case elem_type::q8_0: return 3;
    case elem_type::q4_0: return 4;
    default: return -1;
    }
}

/// The index of any real type the copy shaders take: real_index's five (f32, f16, bf16,
/// q8_0, q4_0), then more_quants from 5; or -1.
constexpr int any_index(elem_type t) noexcept {
    const int r = real_index(t);
    if (r >= 0) return r;
    const int q = more_quant_index(t);
    return q < 0 ? -1 : 5 + q;
}

inline std::uint32_t float_bits(float x) noexcept { return std::bit_cast<std::uint32_t>(x); }

/// Sets d's shader to the variant of a shader that copies t's values as bits: `v32` for
/// f32, `v16` for f16 and bf16 (16-bit storage); false for another type.
inline bool pick_bits_variant(elem_type t, const features& f, std::string_view v32, std::string_view v16,
                              dispatch& d) noexcept {
    if (t == elem_type::f32) {
        d.shader = v32;
        return true;
    }
    if ((t != elem_type::f16 && t != elem_type::bf16) || !f.storage16) return false;
    d.shader = v16;
    return true;
}

} // namespace backplane::vulkan::detail
