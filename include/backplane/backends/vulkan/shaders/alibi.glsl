// ALiBi's slope of head h (core/alibi.hpp), raised from the terms the host computes with
// alibi::terms_of: m0^(h + 1) for the first n_head_log2 heads, m1^(2 (h - n_head_log2) + 1)
// for the others; 1 when n_head_log2 is 0 (no ALiBi). soft_max.comp and flash_attn.comp.
#ifndef BACKPLANE_ALIBI_GLSL
#define BACKPLANE_ALIBI_GLSL

float alibi_slope(uint h, float m0, float m1, uint n_head_log2) {
    if (n_head_log2 == 0u) return 1.0;
    return h < n_head_log2 ? pow(m0, float(h + 1u)) : pow(m1, float(2u * (h - n_head_log2) + 1u));
}

#endif // BACKPLANE_ALIBI_GLSL
