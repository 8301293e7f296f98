// Quantizing into mxfp4 (blocks of 32) and the K-quants q2_K, q3_K, q4_K, q5_K, q6_K
// (super-blocks of 256), as core's quantize_row_<type> do (core/quants.hpp,
// core/kquants.hpp): the same scale searches with the same iteration counts, comparisons
// and ties, the same f32 operations in the same order, each `precise`, divisions and
// square roots correctly rounded (div_rn, sqrt_rn: a device's may be off by a few ulp),
// rounding by core's float trick (nearest_int), mxfp4's floor(log2(max |x|)) from the
// exponent bits exactly as the CPU's f32 log2 rounds it (floor_log2). Bit for bit while
// the values are finite and no product the fits form (x^2, x^3, the error sums) is
// subnormal: a device may flush subnormals, so blocks of magnitudes below ~1e-12 may
// differ from the CPU's by a code.
//
// Included by quantize.glsl for DST_MXFP4, DST_Q2_K ... DST_Q6_K; the destination `d[]`
// (binding 2) is bytes for mxfp4 (8-bit storage), 16-bit words for the K-quants. One
// invocation quantizes one block: store_block(at_, v), at_ the block's first unit.

#if defined(DST_MXFP4)
#define KQ_VALUES 32
#define KQ_BYTES 17
#elif defined(DST_Q2_K)
#define KQ_VALUES 256
#define KQ_BYTES 84
#elif defined(DST_Q3_K)
#define KQ_VALUES 256
#define KQ_BYTES 110
#elif defined(DST_Q4_K)
#define KQ_VALUES 256
#define KQ_BYTES 144
#elif defined(DST_Q5_K)
#define KQ_VALUES 256
#define KQ_BYTES 176
#elif defined(DST_Q6_K)
#define KQ_VALUES 256
#define KQ_BYTES 210
#endif

float kx[KQ_VALUES]; // the block's values
int kq[KQ_VALUES];   // their codes
uint kb[KQ_BYTES];   // the block's bytes, stored at the end

int nearest_int(float x) { // to nearest, ties to even (|x| < 2^22), core's float trick
    precise float v = x + 12582912.0;
    return int(floatBitsToUint(v) & 0x7fffffu) - 0x400000;
}

// The f16 bits of x (nearest even) into bytes o, o + 1; the value they hold.
float put_half(uint o, float x) {
    const uint h = f32_bits_to_f16(floatBitsToUint(x));
    kb[o] = h & 0xffu;
    kb[o + 1u] = h >> 8;
    return uintBitsToFloat(f16_bits_to_f32(h));
}

// Writes the block's bytes at d[at_] (bytes, or 16-bit words little-endian).
void flush_block(uint at_) {
#if defined(DST_MXFP4)
    for (uint i = 0u; i < KQ_BYTES; ++i) d[at_ + i] = uint8_t(kb[i]);
#else
    for (uint i = 0u; i < KQ_BYTES / 2; ++i) d[at_ + i] = uint16_t(kb[2u * i] | (kb[2u * i + 1u] << 8));
#endif
}

#if defined(DST_MXFP4)
const float mxfp4_values[16] = float[16](0.0, 1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 0.0, -1.0, -2.0, -3.0, -4.0, -6.0,
                                         -8.0, -12.0);

// floor(log2(a)), a positive and normal, as the CPU's f32 log2 rounds: a's exponent k, or
// k + 1 where log2(a), just below k + 1, rounds up to it. That happens when a's
// significand is within j ulps of 2 with j <= floor(ln 2 * 2^P), 2^P the spacing of the
// floats just beyond k + 1 in units of 2^-23.
int floor_log2(float a) {
    const uint bits = floatBitsToUint(a);
    const int k = int((bits >> 23) & 0xffu) - 127;
    const uint j = 0x800000u - (bits & 0x7fffffu);
    const int up = k + 1, mag = abs(up);
    if (mag == 0) return k;
    int p = findMSB(mag);
    if (up > 0 && bitCount(mag) == 1) --p;
    const uint limits[8] = uint[8](0u, 1u, 2u, 5u, 11u, 22u, 44u, 88u);
    return p >= 0 && j <= limits[p] ? k + 1 : k;
}

// e = floor(log2(max |x|)) - 2 + 127 in [0, 255] (0 for zeros and subnormals), then each
// value the table entry nearest to it at 2^(e - 128) (a tie takes the lower index).
void store_block(uint at_, float v[32]) {
    float amax = 0.0;
    for (int j = 0; j < 32; ++j)
        if (amax < abs(v[j])) amax = abs(v[j]);
    const uint field = (floatBitsToUint(amax) >> 23) & 0xffu;
    const uint e = field == 0u ? 0u : field == 0xffu ? 255u : uint(clamp(floor_log2(amax) + 125, 0, 255));
    kb[0] = e;
    const float dd = uintBitsToFloat(e < 2u ? 0x00200000u << e : (e - 1u) << 23);
    for (uint j = 0u; j < 32u; ++j) {
        uint best = 0u;
        precise float best_err = abs(mxfp4_values[0] * dd - v[j]);
        for (uint i = 1u; i < 16u; ++i) {
            precise float err = abs(mxfp4_values[i] * dd - v[j]);
            if (err < best_err) {
                best = i;
                best_err = err;
            }
        }
        kq[j] = int(best);
    }
    for (uint j = 0u; j < 16u; ++j) kb[1u + j] = uint(kq[j]) | (uint(kq[j + 16u]) << 4);
    flush_block(at_);
}

#else // the K-quants

// sqrt(x) rounded to nearest (a device's may be off by a few ulp): x scaled by an even
// power of two into [1, 4), the device's root c there moved to the float whose half-ulp
// interval holds the exact root. Each test, xs - (c +- u/2)^2 with u = 2^-23, is an
// integer in units of 2^-48 that int holds: xs - c^2 = a + lo exactly (two_prod; a by
// Sterbenz), c u = c 2^-23, (u/2)^2 one unit. Zeros, subnormals, infinities and NaNs are
// left to the device.
float sqrt_rn(float x) {
    const uint bx = floatBitsToUint(x);
    const uint f = (bx >> 23) & 0xffu;
    if (x <= 0.0 || f == 0u || f == 0xffu) return sqrt(x);
    const int e = int(f) - 127, k = e >> 1;
    const float xs = uintBitsToFloat((bx & 0x7fffffu) | (uint(127 + e - 2 * k) << 23));
    const float top = uintBitsToFloat(0x3fffffffu); // 2 - 2^-23
    float c = clamp(sqrt(xs), 1.0, top);
    for (int it = 0; it < 8; ++it) {
        const vec2 cc = two_prod(c, c);
        precise float a = xs - cc.x;
        if (abs(a) >= 0.0000019073486328125) { // 2^-19: a few ulps off, step toward the root
            c = clamp(next_float(c, a > 0.0), 1.0, top);
            continue;
        }
        const int units = int(a * 281474976710656.0) - int(cc.y * 281474976710656.0); // 2^48
        const int cu = int(c * 33554432.0);                                            // c u 2^48
        if (units - cu - 1 > 0 && c < top) c = next_float(c, true);                     // above c + u/2
        else if (units + cu - 1 < 0 && c > 1.0) c = next_float(c, false);               // below c - u/2
        else break;
    }
    precise float r = c * pow2(k);
    return r;
}

int clamp_code(int l, int lo, int hi) { return l < lo ? lo : (l > hi ? hi : l); }

#if defined(DST_Q2_K) || defined(DST_Q4_K) || defined(DST_Q5_K)
float kw[32]; // a sub-block's weights

// The error a fit weighs: absolute (q2_K) or squared.
float fit_error(float diff) {
#if defined(DST_Q2_K)
    return abs(diff);
#else
    precise float sq = diff * diff;
    return sq;
#endif
}

// core's fit_scale_min (make_qkx2_quants) of values o .. o + n - 1 weighted by kw: codes
// 0..nmax into kq with a scale (returned) and a minimum (neg_min = -minimum), the least
// weighted error of the plain fit and of nstep + 1 refits.
float fit_scale_min(int o, int n, int nmax, float rmin, float rdelta, int nstep, out float neg_min) {
    float vmin = kx[o], vmax = kx[o];
    precise float sum_w = kw[0];
    precise float sum_x = sum_w * kx[o];
    for (int i = 1; i < n; ++i) {
        if (kx[o + i] < vmin) vmin = kx[o + i];
        if (kx[o + i] > vmax) vmax = kx[o + i];
        sum_w = sum_w + kw[i];
        sum_x = sum_x + kw[i] * kx[o + i];
    }
    if (vmin > 0.0) vmin = 0.0;
    if (vmax == vmin) {
        for (int i = 0; i < n; ++i) kq[o + i] = 0;
        neg_min = -vmin;
        return 0.0;
    }
    precise float range = vmax - vmin;
    float iscale = div_rn(float(nmax), range);
    float scale = div_rn(1.0, iscale);
    precise float best_error = 0.0;
    for (int i = 0; i < n; ++i) {
        precise float t = iscale * (kx[o + i] - vmin);
        kq[o + i] = clamp_code(nearest_int(t), 0, nmax);
        precise float diff = (scale * float(kq[o + i]) + vmin) - kx[o + i];
        best_error = best_error + kw[i] * fit_error(diff);
    }
    int aux[32];
    for (int is = 0; is <= nstep; ++is) {
        precise float num = (rmin + rdelta * float(is)) + float(nmax);
        precise float span = vmax - vmin; // vmin as the best refit so far left it, as core's
        iscale = div_rn(num, span);
        precise float sum_l = 0.0, sum_l2 = 0.0, sum_xl = 0.0;
        for (int i = 0; i < n; ++i) {
            precise float t = iscale * (kx[o + i] - vmin);
            aux[i] = clamp_code(nearest_int(t), 0, nmax);
            const float fl = float(aux[i]);
            sum_l = sum_l + kw[i] * fl;
            sum_l2 = sum_l2 + (kw[i] * fl) * fl;
            sum_xl = sum_xl + (kw[i] * fl) * kx[o + i];
        }
        precise float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0.0) {
            precise float ns = sum_w * sum_xl - sum_x * sum_l;
            precise float nm = sum_l2 * sum_x - sum_l * sum_xl;
            float this_scale = div_rn(ns, D);
            float this_min = div_rn(nm, D);
            if (this_min > 0.0) {
                this_min = 0.0;
                this_scale = div_rn(sum_xl, sum_l2);
            }
            precise float cur_error = 0.0;
            for (int i = 0; i < n; ++i) {
                precise float diff = (this_scale * float(aux[i]) + this_min) - kx[o + i];
                cur_error = cur_error + kw[i] * fit_error(diff);
            }
            if (cur_error < best_error) {
                for (int i = 0; i < n; ++i) kq[o + i] = aux[i];
                best_error = cur_error;
                scale = this_scale;
                vmin = this_min;
            }
        }
    }
    neg_min = -vmin;
    return scale;
}
#endif

#if defined(DST_Q2_K) || defined(DST_Q3_K)
// Packs the 256 2-bit codes kq & 3 into bytes qs ..: byte 32 h + l holds values
// 128 h + l + 32 s at bits 2 s.
void pack_2bit(uint qs) {
    for (uint h = 0u; h < 2u; ++h)
        for (uint l = 0u; l < 32u; ++l) {
            const uint e = 128u * h + l;
            kb[qs + 32u * h + l] = (uint(kq[e]) & 3u) | ((uint(kq[e + 32u]) & 3u) << 2) |
                                   ((uint(kq[e + 64u]) & 3u) << 4) | ((uint(kq[e + 96u]) & 3u) << 6);
        }
}
#endif

#if defined(DST_Q3_K) || defined(DST_Q6_K)
// The first of 16 values of largest magnitude, its sign kept (core's signed_max).
float signed_max16(float v[16]) {
    float amax = 0.0, vmax = 0.0;
    for (int j = 0; j < 16; ++j)
        if (abs(v[j]) > amax) {
            amax = abs(v[j]);
            vmax = v[j];
        }
    return vmax;
}

// core's centred_fit: the signed maximum, sum w x l and sum w l^2 of the first fit
// (w = x^2)
float centred_max, centred_sumlx, centred_suml2;

int centred_code(float iscale, float x, int nmax) {
    precise float t = iscale * x;
    return clamp_code(nearest_int(t), -nmax, nmax - 1);
}

// The first fit of the 16 values at o, codes l (not offset) into kq; false, with zeros,
// when every |x| is below 1e-15.
bool centred_first(int o, int nmax) {
    float v[16];
    for (int j = 0; j < 16; ++j) v[j] = kx[o + j];
    centred_max = signed_max16(v);
    if (abs(centred_max) < 1e-15) {
        for (int i = 0; i < 16; ++i) kq[o + i] = 0;
        return false;
    }
    const float iscale = div_rn(-float(nmax), centred_max);
    precise float sumlx = 0.0, suml2 = 0.0;
    for (int i = 0; i < 16; ++i) {
        const float x = kx[o + i];
        kq[o + i] = centred_code(iscale, x, nmax);
        const float fl = float(kq[o + i]);
        precise float w = x * x;
        sumlx = sumlx + (w * x) * fl;
        suml2 = suml2 + (w * fl) * fl;
    }
    centred_sumlx = sumlx;
    centred_suml2 = suml2;
    return true;
}
#endif

#if defined(DST_Q6_K)
// core's fit_scale (make_qx_quants, weights x^2) of the 16 values at o: codes l + nmax,
// the scale refit over 18 trial scales.
float fit_scale(int o, int nmax) {
    if (!centred_first(o, nmax)) return 0.0;
    for (int i = 0; i < 16; ++i) kq[o + i] += nmax;
    float scale = centred_suml2 != 0.0 ? div_rn(centred_sumlx, centred_suml2) : 0.0;
    precise float best = scale * centred_sumlx;
    for (int is = -9; is <= 9; ++is) {
        if (is == 0) continue;
        precise float num = -(float(nmax) + 0.1 * float(is));
        const float iscale = div_rn(num, centred_max);
        precise float sumlx = 0.0, suml2 = 0.0;
        for (int i = 0; i < 16; ++i) {
            const float x = kx[o + i];
            const float fl = float(centred_code(iscale, x, nmax));
            precise float w = x * x;
            sumlx = sumlx + (w * x) * fl;
            suml2 = suml2 + (w * fl) * fl;
        }
        precise float lhs = sumlx * sumlx;
        precise float rhs = best * suml2;
        if (suml2 > 0.0 && lhs > rhs) {
            for (int i = 0; i < 16; ++i) kq[o + i] = nmax + centred_code(iscale, kx[o + i], nmax);
            scale = div_rn(sumlx, suml2);
            best = scale * sumlx;
        }
    }
    return scale;
}
#endif

#if defined(DST_Q3_K)
// core's fit_scale_refined (make_q3_quants with its refinement) of the 16 values at o:
// each code moved, in up to 5 passes, to where it raises (sum w x l)^2 / (sum w l^2);
// codes l + nmax.
float fit_scale_refined(int o, int nmax) {
    if (!centred_first(o, nmax)) return 0.0;
    precise float sumlx = centred_sumlx, suml2 = centred_suml2;
    for (int pass = 0; pass < 5; ++pass) {
        int changed = 0;
        for (int i = 0; i < 16; ++i) {
            const float x = kx[o + i], li = float(kq[o + i]);
            precise float w = x * x;
            precise float slx = sumlx - (w * x) * li;
            if (!(slx > 0.0)) continue;
            precise float sl2 = suml2 - (w * li) * li;
            precise float xs = x * sl2;
            const int l = clamp_code(nearest_int(div_rn(xs, slx)), -nmax, nmax - 1);
            if (l == kq[o + i]) continue;
            const float fl = float(l);
            slx = slx + (w * x) * fl;
            sl2 = sl2 + (w * fl) * fl;
            precise float lhs = (slx * slx) * suml2;
            precise float rhs = (sumlx * sumlx) * sl2;
            if (sl2 > 0.0 && lhs > rhs) {
                kq[o + i] = l;
                sumlx = slx;
                suml2 = sl2;
                ++changed;
            }
        }
        if (changed == 0) break;
    }
    for (int i = 0; i < 16; ++i) kq[o + i] += nmax;
    return suml2 > 0.0 ? div_rn(sumlx, suml2) : 0.0;
}
#endif

#if defined(DST_Q4_K) || defined(DST_Q5_K)
// q4_K and q5_K (core's quantize_scales_mins): each sub-block of 32 fitted with weights
// sqrt(mean x^2) + |x|; scales and minimums quantized to 6 bits against the largest and
// packed into bytes 4 .. 15, d and dmin into 0 and 2; then every code again from the
// stored scales.
void quantize_scales_mins(int nmax, float rmin, int nstep) {
    float sc[8], mn[8];
    float max_scale = 0.0, max_min = 0.0;
    for (int j = 0; j < 8; ++j) {
        precise float sum_x2 = 0.0;
        for (int l = 0; l < 32; ++l) sum_x2 = sum_x2 + kx[32 * j + l] * kx[32 * j + l];
        const float av_x = sqrt_rn(div_rn(sum_x2, 32.0));
        for (int l = 0; l < 32; ++l) {
            precise float w = av_x + abs(kx[32 * j + l]);
            kw[l] = w;
        }
        sc[j] = fit_scale_min(32 * j, 32, nmax, rmin, 0.1, nstep, mn[j]);
        if (sc[j] > max_scale) max_scale = sc[j];
        if (mn[j] > max_min) max_min = mn[j];
    }
    const float inv_scale = max_scale > 0.0 ? div_rn(63.0, max_scale) : 0.0;
    const float inv_min = max_min > 0.0 ? div_rn(63.0, max_min) : 0.0;
    uint s6[8], m6[8];
    for (int j = 0; j < 8; ++j) {
        precise float ts = inv_scale * sc[j];
        precise float tm = inv_min * mn[j];
        s6[j] = min(uint(nearest_int(ts)) & 0xffu, 63u);
        m6[j] = min(uint(nearest_int(tm)) & 0xffu, 63u);
    }
    for (uint j = 0u; j < 4u; ++j) {
        kb[4u + j] = s6[j] | ((s6[j + 4u] >> 4) << 6);
        kb[8u + j] = m6[j] | ((m6[j + 4u] >> 4) << 6);
        kb[12u + j] = (s6[j + 4u] & 15u) | ((m6[j + 4u] & 15u) << 4);
    }
    const float dd = put_half(0u, div_rn(max_scale, 63.0));
    const float dmin = put_half(2u, div_rn(max_min, 63.0));
    for (int j = 0; j < 8; ++j) {
        precise float dl = dd * float(s6[j]);
        if (dl == 0.0) continue;
        precise float dm = dmin * float(m6[j]);
        for (int i = 0; i < 32; ++i) {
            precise float t = kx[32 * j + i] + dm;
            kq[32 * j + i] = clamp_code(nearest_int(div_rn(t, dl)), 0, nmax);
        }
    }
}
#endif

void store_block(uint at_, float v[256]) {
    kx = v;
#if defined(DST_Q2_K)
    // 16 sub-blocks of 16: scale and minimum fitted for the least weighted absolute error
    // (weights |x|), both quantized to 4 bits against the largest; scales 0, qs 16, d 80,
    // dmin 82
    float sc[16], mn[16];
    float max_scale = 0.0, max_min = 0.0;
    for (int j = 0; j < 16; ++j) {
        for (int l = 0; l < 16; ++l) kw[l] = abs(kx[16 * j + l]);
        sc[j] = fit_scale_min(16 * j, 16, 3, -0.5, 0.1, 15, mn[j]);
        if (sc[j] > max_scale) max_scale = sc[j];
        if (mn[j] > max_min) max_min = mn[j];
    }
    for (uint j = 0u; j < 16u; ++j) kb[j] = 0u;
    float dd = put_half(80u, 0.0), dmin = put_half(82u, 0.0);
    if (max_scale > 0.0) {
        const float iscale = div_rn(15.0, max_scale);
        for (int j = 0; j < 16; ++j) {
            precise float t = iscale * sc[j];
            kb[j] = uint(nearest_int(t)) & 0xffu;
        }
        dd = put_half(80u, div_rn(max_scale, 15.0));
    }
    if (max_min > 0.0) {
        const float iscale = div_rn(15.0, max_min);
        for (int j = 0; j < 16; ++j) {
            precise float t = iscale * mn[j];
            kb[j] = (kb[j] | (uint(nearest_int(t)) << 4)) & 0xffu;
        }
        dmin = put_half(82u, div_rn(max_min, 15.0));
    }
    for (int j = 0; j < 16; ++j) {
        precise float dl = dd * float(kb[j] & 15u);
        if (dl == 0.0) continue;
        precise float dm = dmin * float(kb[j] >> 4);
        for (int i = 0; i < 16; ++i) {
            precise float t = kx[16 * j + i] + dm;
            kq[16 * j + i] = clamp_code(nearest_int(div_rn(t, dl)), 0, 3);
        }
    }
    pack_2bit(16u);
#elif defined(DST_Q3_K)
    // 16 sub-blocks of 16 with a signed scale each (refined fit), quantized to 6 bits
    // against the largest magnitude; hmask 0, qs 32, scales 96, d 108
    float sc[16];
    for (int j = 0; j < 16; ++j) sc[j] = fit_scale_refined(16 * j, 4);
    const float max_scale = signed_max16(sc);
    for (uint j = 0u; j < 12u; ++j) kb[96u + j] = 0u;
    float dd = put_half(108u, 0.0);
    if (max_scale != 0.0) {
        const float iscale = div_rn(-32.0, max_scale);
        for (uint j = 0u; j < 16u; ++j) {
            precise float t = iscale * sc[j];
            const int l8 = (nearest_int(t) << 24) >> 24; // as an int8
            const uint l = uint(clamp_code(l8, -32, 31) + 32);
            kb[96u + (j & 7u)] |= (l & 15u) << (4u * (j >> 3));
            kb[104u + (j & 3u)] |= (l >> 4) << (2u * (j >> 2));
        }
        dd = put_half(108u, div_rn(1.0, iscale));
    }
    for (uint j = 0u; j < 16u; ++j) {
        const uint lo = (kb[96u + (j & 7u)] >> (4u * (j >> 3))) & 15u;
        const int s = int(lo | (((kb[104u + (j & 3u)] >> (2u * (j >> 2))) & 3u) << 4)) - 32;
        precise float dl = dd * float(s);
        if (dl == 0.0) continue;
        for (uint i = 0u; i < 16u; ++i) kq[16u * j + i] = clamp_code(nearest_int(div_rn(kx[16u * j + i], dl)), -4, 3) + 4;
    }
    for (uint e = 0u; e < 32u; ++e) kb[e] = 0u;
    for (uint e = 0u; e < 256u; ++e)
        if (kq[e] > 3) kb[e & 31u] |= 1u << (e >> 5);
    pack_2bit(32u); // the low two bits (kq - 4 where the third is set)
#elif defined(DST_Q4_K) || defined(DST_Q5_K)
#if defined(DST_Q4_K)
    quantize_scales_mins(15, -1.0, 20);
    for (uint c = 0u; c < 4u; ++c) // 64 values per 32 bytes at 16: low nibbles the first 32
        for (uint l = 0u; l < 32u; ++l) kb[16u + 32u * c + l] = uint(kq[64u * c + l]) | (uint(kq[64u * c + 32u + l]) << 4);
#else
    quantize_scales_mins(31, -0.5, 15);
    for (uint l = 0u; l < 32u; ++l) kb[16u + l] = 0u; // qh at 16, qs at 48
    for (uint c = 0u; c < 4u; ++c)
        for (uint l = 0u; l < 32u; ++l) {
            const uint lo = uint(kq[64u * c + l]), hi = uint(kq[64u * c + 32u + l]);
            kb[48u + 32u * c + l] = (lo & 15u) | ((hi & 15u) << 4);
            kb[16u + l] |= ((lo >> 4) << (2u * c)) | ((hi >> 4) << (2u * c + 1u));
        }
#endif
#elif defined(DST_Q6_K)
    // 16 sub-blocks of 16 with an 8-bit signed scale each (make_qx_quants); ql 0, qh 128,
    // scales 192, d 208; a block whose scales are all below 1e-15 is zeros
    float sc[16];
    for (int j = 0; j < 16; ++j) sc[j] = fit_scale(16 * j, 32);
    const float max_scale = signed_max16(sc);
    if (abs(max_scale) < 1e-15) {
        for (uint i = 0u; i < KQ_BYTES; ++i) kb[i] = 0u;
        flush_block(at_);
        return;
    }
    const float iscale = div_rn(-128.0, max_scale);
    const float dd = put_half(208u, div_rn(1.0, iscale));
    for (uint j = 0u; j < 16u; ++j) {
        precise float t = iscale * sc[j];
        kb[192u + j] = uint(min(nearest_int(t), 127)) & 0xffu;
    }
    for (uint j = 0u; j < 16u; ++j) {
        precise float dl = dd * float((int(kb[192u + j]) << 24) >> 24);
        if (dl == 0.0) continue;
        for (uint i = 0u; i < 16u; ++i) kq[16u * j + i] = clamp_code(nearest_int(div_rn(kx[16u * j + i], dl)), -32, 31) + 32;
    }
    for (uint h = 0u; h < 2u; ++h)
        for (uint l = 0u; l < 32u; ++l) {
            const uint e = 128u * h + l;
            const uint q0 = uint(kq[e]), q1 = uint(kq[e + 32u]), q2 = uint(kq[e + 64u]), q3 = uint(kq[e + 96u]);
            kb[64u * h + l] = (q0 & 15u) | ((q2 & 15u) << 4);
            kb[64u * h + 32u + l] = (q1 & 15u) | ((q3 & 15u) << 4);
            kb[128u + 32u * h + l] = (q0 >> 4) | ((q1 >> 4) << 2) | ((q2 >> 4) << 4) | ((q3 >> 4) << 6);
        }
#endif
    flush_block(at_);
}

#endif
