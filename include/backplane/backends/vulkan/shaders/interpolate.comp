#version 460
// upscale: element c of dst (f32) from plane (c.z, c.w) of a (source 0, f32), the plane
// picked by nearest in dimensions 2 and 3, dimensions 0 and 1 resampled by p.prm.x's
// mode, as core/interpolate.hpp computes it (the CPU's and CUDA's formulas, coordinates
// in f32):
//   0 nearest     source index floor(i / sf)
//   1 bilinear    the four neighbours of (i + o) / sf - o, clamped to a's edges; with
//                 p.prm.y = 1 antialiased: the cells within max(1, 1 / sf) of
//                 (i + o) / sf, weighed by triangle filters
//   2 bicubic     the 4 x 4 neighbours, clamped, coefficient -0.75
// b_nb: the scale factors sf of dimensions 0 .. 3 (float bits); p.prm.z: the pixel offset
// o (float bits). One invocation per destination element; any strides and offsets.
//
// variant: interpolate_f32
#include "common.glsl"

layout(local_size_x = 128) in;
layout(binding = 0, std430) readonly buffer A { float a[]; };
layout(binding = 2, std430) writeonly buffer D { float d[]; };

uint plane_base;

float cell(int x, int y) { return a[plane_base + uint(x) * p.a_nb.x + uint(y) * p.a_nb.y]; }

int clamp_index(int i, int n) { return clamp(i, 0, n - 1); }

int nearest(uint i, float sf, uint n) { return clamp_index(int(float(i) / sf), int(n)); }

float cubic_near(float x) {
    const float A = -0.75;
    return ((A + 2.0) * x - (A + 3.0)) * x * x + 1.0;
}
float cubic_far(float x) {
    const float A = -0.75;
    return ((A * x - 5.0 * A) * x + 8.0 * A) * x - 4.0 * A;
}
float cubic(float p0, float p1, float p2, float p3, float t) {
    return p0 * cubic_far(t + 1.0) + p1 * cubic_near(t) + p2 * cubic_near(1.0 - t) + p3 * cubic_far(2.0 - t);
}

float bilinear(float x, float y, int n0, int n1) {
    const int fx = int(floor(x)), fy = int(floor(y));
    const int x0 = clamp_index(fx, n0), x1 = clamp_index(fx + 1, n0);
    const int y0 = clamp_index(fy, n1), y1 = clamp_index(fy + 1, n1);
    const float dx = clamp(x - float(x0), 0.0, 1.0), dy = clamp(y - float(y0), 0.0, 1.0);
    return cell(x0, y0) * (1.0 - dx) * (1.0 - dy) + cell(x1, y0) * dx * (1.0 - dy) + cell(x0, y1) * (1.0 - dx) * dy +
           cell(x1, y1) * dx * dy;
}

float bicubic(float x, float y, int n0, int n1) {
    const int fx = int(floor(x)), fy = int(floor(y));
    const float dx = x - float(fx), dy = y - float(fy);
    float rows[4];
    for (int r = 0; r < 4; ++r) {
        const int sy = clamp_index(fy - 1 + r, n1);
        rows[r] = cubic(cell(clamp_index(fx - 1, n0), sy), cell(clamp_index(fx, n0), sy), cell(clamp_index(fx + 1, n0), sy),
                        cell(clamp_index(fx + 2, n0), sy), dx);
    }
    return cubic(rows[0], rows[1], rows[2], rows[3], dy);
}

float triangle(float x) { return max(1.0 - abs(x), 0.0); }

float antialiased(float x, float y, float sf0, float sf1, float o, int n0, int n1) {
    const float s0 = max(1.0, 1.0 / sf0), s1 = max(1.0, 1.0 / sf1);
    const float inv0 = 1.0 / s0, inv1 = 1.0 / s1;
    const int xa = max(int(x - s0 + o), 0), xb = min(int(x + s0 + o), n0);
    const int ya = max(int(y - s1 + o), 0), yb = min(int(y + s1 + o), n1);
    float sum = 0.0, total = 0.0;
    for (int sy = ya; sy < yb; ++sy) {
        const float wy = triangle((float(sy) - y + o) * inv1);
        for (int sx = xa; sx < xb; ++sx) {
            const float w = triangle((float(sx) - x + o) * inv0) * wy;
            if (w <= 0.0) continue;
            sum += cell(sx, sy) * w;
            total += w;
        }
    }
    return total > 0.0 ? sum / total : sum;
}

void main() {
    const uint i = linear_id(128);
    if (i >= p.ne.x * p.ne.y * p.ne.z * p.ne.w) return;
    const uvec4 c = coords(i, p.ne);
    const vec4 sf = uintBitsToFloat(p.b_nb);
    const float o = uintBitsToFloat(p.prm.z);
    const int n0 = int(p.a_ne.x), n1 = int(p.a_ne.y);
    plane_base = p.offs.x + uint(nearest(c.z, sf.z, p.a_ne.z)) * p.a_nb.z + uint(nearest(c.w, sf.w, p.a_ne.w)) * p.a_nb.w;
    float v;
    if (p.prm.x == 0u) {
        v = cell(nearest(c.x, sf.x, p.a_ne.x), nearest(c.y, sf.y, p.a_ne.y));
    } else if (p.prm.y != 0u) {
        v = antialiased((float(c.x) + o) / sf.x, (float(c.y) + o) / sf.y, sf.x, sf.y, o, n0, n1);
    } else {
        const float x = (float(c.x) + o) / sf.x - o, y = (float(c.y) + o) / sf.y - o;
        v = p.prm.x == 1u ? bilinear(x, y, n0, n1) : bicubic(x, y, n0, n1);
    }
    d[p.offs.z + at(c, p.nb)] = v;
}
