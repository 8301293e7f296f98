// Helpers the compute shaders share for exact numerics: f16 / bf16 <-> f32 conversions
// on bits, the layout of q8_0 / q4_0 blocks, and error-free float transformations.
// Functions only: no bindings, no push constants, no extensions needed (every value
// travels as a 32-bit uint or float), so any shader may include it after common.glsl.
//
// Conversions work on bits in integer arithmetic, as core's (core/types.hpp) do, bit
// for bit: 16-bit storage allows no 16-bit variables, and integer operations cannot
// flush subnormals or canonicalize NaNs as a device's float conversions may.
#ifndef BACKPLANE_CONVERT_GLSL
#define BACKPLANE_CONVERT_GLSL

// ---------------------------------------------------------------------------------------
// f16 and bf16 <-> f32, on bits.

// The f32 bits of f16 bits h, as core's f16_to_f32 (exact; a NaN comes out quiet).
uint f16_bits_to_f32(uint h) {
    const uint sign = (h & 0x8000u) << 16;
    const uint e = (h >> 10) & 0x1fu;
    const uint m = h & 0x3ffu;
    if (e == 0x1fu) return sign | 0x7f800000u | (m << 13) | (m != 0u ? 0x400000u : 0u);
    if (e == 0u) {
        if (m == 0u) return sign;
        const int msb = findMSB(m); // a subnormal m * 2^-24, normalised
        return sign | (uint(msb + 103) << 23) | ((m << (23 - msb)) & 0x7fffffu);
    }
    return sign | ((e + 112u) << 23) | (m << 13);
}

// The f16 bits of f32 bits x, rounded to nearest even, as core's f32_to_f16.
uint f32_bits_to_f16(uint x) {
    const uint sign = (x >> 16) & 0x8000u;
    const uint ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) return sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u | ((ax >> 13) & 0x3ffu) : 0u);
    if (ax >= 0x477ff000u) return sign | 0x7c00u; // rounds to infinity
    if (ax < 0x38800000u) {                       // a subnormal result or zero
        if (ax < 0x33000000u) return sign;
        const uint shift = 126u - (ax >> 23);
        const uint m = (ax & 0x7fffffu) | 0x800000u;
        uint q = m >> shift;
        const uint rem = m & ((1u << shift) - 1u);
        const uint half_ = 1u << (shift - 1u);
        if (rem > half_ || (rem == half_ && (q & 1u) != 0u)) ++q;
        return sign | q;
    }
    uint r = ax - 0x38000000u; // rebias the exponent; a carry out of the mantissa is right
    const uint rem = r & 0x1fffu;
    r >>= 13;
    if (rem > 0x1000u || (rem == 0x1000u && (r & 1u) != 0u)) ++r;
    return sign | r;
}

// The f32 bits of bf16 bits h (exact: a bf16 is the upper half of an f32).
uint bf16_bits_to_f32(uint h) { return h << 16; }

// The bf16 bits of f32 bits x, rounded to nearest even, as core's f32_to_bf16 (a NaN
// comes out quiet).
uint f32_bits_to_bf16(uint x) {
    if ((x & 0x7fffffffu) > 0x7f800000u) return ((x >> 16) | 0x40u) & 0xffffu;
    return (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
}

// ---------------------------------------------------------------------------------------
// q8_0 and q4_0 blocks, read as 16-bit words: word 0 is the f16 scale d, the 32 (q8_0)
// or 16 (q4_0) quant bytes follow, two to a word, little-endian. A shader reads the
// words from its own binding; these functions take them.

// The index of the word that holds quant byte k of the block whose first word (its
// scale) is at index base.
uint block_word_of_byte(uint base, uint k) { return base + 1u + (k >> 1); }

// Quant byte k, out of the word w that holds it (block_word_of_byte(base, k)).
uint block_byte_in_word(uint w, uint k) { return (w >> ((k & 1u) * 8u)) & 0xffu; }

// The quant byte that holds value j of a q4_0 block: byte j holds values j (low nibble)
// and j + 16 (high nibble).
uint q4_0_byte_of_value(uint j) { return j & 15u; }

// Value j of a q8_0 block as core's dequantize_row_q8_0 computes it, d * q in f32: d the
// block's scale (its f16 widened: uintBitsToFloat(f16_bits_to_f32(word 0))), q_byte its
// quant byte j (a signed byte).
float q8_0_value(float d, uint q_byte) {
    const int q = (int(q_byte) << 24) >> 24; // the signed byte
    return d * float(q);
}

// Value j of a q4_0 block as core's dequantize_row_q4_0 computes it, d * (nibble - 8) in
// f32: d the block's scale (as for q8_0_value), q_byte its quant byte
// q4_0_byte_of_value(j).
float q4_0_value(float d, uint q_byte, uint j) {
    const int q = int((q_byte >> (j < 16u ? 0u : 4u)) & 15u) - 8;
    return d * float(q);
}

// ---------------------------------------------------------------------------------------
// Error-free transformations: the exact result of one f32 operation as an unevaluated
// sum vec2(hi, lo), hi the rounded result, lo the rounding error. Every operation is
// `precise`, so that no compiler reassociates or fuses it into a multiply-add (none is
// needed: products are split as Dekker does).

// a + b exactly, when |a| >= |b| or a == 0.
vec2 fast_two_sum(float a_, float b_) {
    precise float s = a_ + b_;
    precise float e = b_ - (s - a_);
    return vec2(s, e);
}

// a + b exactly (Knuth).
vec2 two_sum(float a_, float b_) {
    precise float s = a_ + b_;
    precise float bb = s - a_;
    precise float e = (a_ - (s - bb)) + (b_ - bb);
    return vec2(s, e);
}

// a * b exactly, barring overflow and underflow (Dekker: each factor split into two
// 12-bit halves; no fused multiply-add needed).
vec2 two_prod(float a_, float b_) {
    precise float prod = a_ * b_;
    precise float ca = 4097.0 * a_;
    precise float ah = ca - (ca - a_);
    precise float al = a_ - ah;
    precise float cb = 4097.0 * b_;
    precise float bh = cb - (cb - b_);
    precise float bl = b_ - bh;
    precise float e = ((ah * bh - prod) + ah * bl + al * bh) + al * bl;
    return vec2(prod, e);
}

#endif // BACKPLANE_CONVERT_GLSL
