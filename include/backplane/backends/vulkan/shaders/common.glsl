// What every backplane compute shader shares: the push constants and the bindings.
//
// Push constants (128 bytes, filled by backends/vulkan/ops.hpp):
//   ne, nb      the destination's extents (elements) and strides (binding units: 4
//               bytes for f32 and i32, 2 bytes for f16, bf16 and the quantized types,
//               whose blocks are read as 16-bit words)
//   a_ne, a_nb  source 0's, b_ne, b_nb source 1's
//   offs        x, y, z: offsets (binding units) of source 0, source 1 and the
//               destination in their bindings (each binding starts at an aligned byte
//               offset at or before the tensor); w: source 2's where the op has one
//               (soft_max's sinks, rope's frequency factors), else op-specific
//   prm         op parameters (floats as their bits: uintBitsToFloat)
// Bindings (set 0): 0 source 0, 1 source 1, 2 the destination, 3 the stream's error
// word (one uint; a shader that finds an index out of range sets a bit of it with
// atomicOr, and the backend reports it at synchronize), 4 to 8 sources 2 to 6 (the
// destination's buffer for a source the node has none of; the offsets of sources 3 to 6
// are in a_nb.x, b_nb.x, a_nb.y and b_nb.y: ops/common.hpp offset_word).
#extension GL_EXT_scalar_block_layout : require

layout(push_constant, std430) uniform op_push {
    uvec4 ne;
    uvec4 nb;
    uvec4 a_ne;
    uvec4 a_nb;
    uvec4 b_ne;
    uvec4 b_nb;
    uvec4 offs;
    uvec4 prm;
} p;

// The coordinates of linear index i in extents n (dimension 0 fastest).
uvec4 coords(uint i, uvec4 n) {
    uvec4 c;
    c.x = i % n.x; i /= n.x;
    c.y = i % n.y; i /= n.y;
    c.z = i % n.z;
    c.w = i / n.z;
    return c;
}

uint at(uvec4 c, uvec4 stride) { return c.x * stride.x + c.y * stride.y + c.z * stride.z + c.w * stride.w; }

// The linear invocation index of a 2-D dispatch of 1-D workgroups of `size` invocations.
uint linear_id(uint size) { return gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * size; }

// The workgroup's linear index in a 2-D grid of workgroups (ops/common.hpp groups_per_item).
uint group_id() { return gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x; }

// The error word's bits.
#define ERROR_INDEX 1u // an index beyond what it indexes (get_rows, set_rows, mul_mat_id, add_id)
