#pragma once
// Reference oracle for backend op tests: what every op must produce, computed in double
// precision from the op's definition, independently of any backend's kernels.
//
//   get(t, i0, i1, i2, i3)       one element of any type (blocks dequantized), read through
//                                t's own strides: views, permutations, any offsets
//   set(t, ..., v)               store one element (f32, f16, bf16, i32, i64)
//   read(t)                      every element as a ref_tensor (doubles, dim 0 fastest)
//   ref_forward(node)            the expected result of a node from its sources' data
//   fill_random(t, rng, lo, hi)  reproducible uniform values (platform-independent)
//   nmse / nmse_of / compare     ggml's error metric (on tensors, or on float vectors) and friends
//   default_max_nmse(node)       ggml's test-backend-ops thresholds for a node
//
// ref_forward returns the values a perfect implementation stores in the node's type:
// the exact result rounded once to f32 / f16 / bf16, or, for a quantized destination,
// quantized block by block with the q8_0 / q4_0 rules (written out here, not core's
// functions). Storage formats (f16, bf16, the block layouts) are decoded through
// core/types.hpp; none of the arithmetic is.
//
// Call ref_forward before computing an in-place node: it reads the sources' memory.

#include <backplane/conformance/inputs.hpp>
#include <backplane/conformance/thresholds.hpp>
#include <backplane/core.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace backplane::test {

using i64 = std::int64_t;
using extents = std::array<i64, max_dims>;

// ---------------------------------------------------------------------------------------
// Element access

namespace ref_detail {

inline const std::byte* element_row(const tensor& t, i64 i1, i64 i2, i64 i3) {
    return static_cast<const std::byte*>(t.data) + static_cast<std::size_t>(i1) * t.nb[1] +
           static_cast<std::size_t>(i2) * t.nb[2] + static_cast<std::size_t>(i3) * t.nb[3];
}

template <class T> T load(const std::byte* p) {
    T v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

/// The block_size(t) values of the block of quantized type t at p. q8_0 and q4_0 by their
/// formulas, written out here; the other block formats by core's dequantizers, checked
/// against ggml's (scripts/check_quants_ggml) and their formulas.
inline void decode_block(elem_type t, const std::byte* p, double* out) {
    switch (t) {
    case elem_type::q8_0: {
        // value = d * qs[j]
        const auto b = load<block_q8_0>(p);
        for (int j = 0; j < qk8_0; ++j) out[j] = static_cast<double>(f16_to_f32(b.d)) * b.qs[j];
        return;
    }
    case elem_type::q4_0: {
        // value j sits in the low nibble of byte j (j < 16) or the high nibble of byte j - 16
        const auto b = load<block_q4_0>(p);
        for (int j = 0; j < qk4_0 / 2; ++j) {
            const int byte = b.qs[j];
            out[j] = static_cast<double>(f16_to_f32(b.d)) * ((byte & 0x0f) - 8);
            out[j + qk4_0 / 2] = static_cast<double>(f16_to_f32(b.d)) * ((byte >> 4) - 8);
        }
        return;
    }
    default: {
        float block[max_block_size];
        dequantize_block(t, p, block);
        std::copy(block, block + block_size(t), out);
        return;
    }
    }
}

} // namespace ref_detail

/// Element (i0, i1, i2, i3) of t as a double, whatever its type and layout.
inline double get(const tensor& t, i64 i0, i64 i1 = 0, i64 i2 = 0, i64 i3 = 0) {
    using namespace ref_detail;
    const std::byte* row = element_row(t, i1, i2, i3);
    switch (t.type) {
    case elem_type::f32:
        return load<float>(row + static_cast<std::size_t>(i0) * t.nb[0]);
    case elem_type::f16:
        return f16_to_f32(load<f16_t>(row + static_cast<std::size_t>(i0) * t.nb[0]));
    case elem_type::bf16:
        return bf16_to_f32(load<bf16_t>(row + static_cast<std::size_t>(i0) * t.nb[0]));
    case elem_type::i32:
        return load<std::int32_t>(row + static_cast<std::size_t>(i0) * t.nb[0]);
    case elem_type::i64:
        return static_cast<double>(load<std::int64_t>(row + static_cast<std::size_t>(i0) * t.nb[0]));
    default: break;
    }
    if (is_quantized(t.type)) {
        const i64 bs = block_size(t.type);
        double block[max_block_size];
        decode_block(t.type, row + static_cast<std::size_t>(i0 / bs) * t.nb[0], block);
        return block[i0 % bs];
    }
    throw std::logic_error("ref_oracle::get: unknown element type");
}

/// Stores v (rounded to the type) as element (i0, i1, i2, i3); f32, f16, bf16, i32 or i64.
inline void set(tensor& t, i64 i0, i64 i1, i64 i2, i64 i3, double v) {
    conformance::set_element(t, i0, i1, i2, i3, v);
}

// ---------------------------------------------------------------------------------------
// Dense double tensors

/// Values of a tensor as doubles, dim 0 fastest, with the element type they represent.
struct ref_tensor {
    elem_type type = elem_type::f32;
    extents ne{1, 1, 1, 1};
    std::vector<double> v;

    ref_tensor() = default;
    ref_tensor(elem_type t, const extents& n)
        : type(t), ne(n),
          v(static_cast<std::size_t>(std::max<i64>(n[0] * n[1] * n[2] * n[3], 0)), 0.0) {}

    [[nodiscard]] i64 size() const { return static_cast<i64>(v.size()); }
    [[nodiscard]] std::size_t index(i64 i0, i64 i1, i64 i2, i64 i3) const {
        return static_cast<std::size_t>(((i3 * ne[2] + i2) * ne[1] + i1) * ne[0] + i0);
    }
    double& at(i64 i0, i64 i1 = 0, i64 i2 = 0, i64 i3 = 0) { return v[index(i0, i1, i2, i3)]; }
    [[nodiscard]] double at(i64 i0, i64 i1 = 0, i64 i2 = 0, i64 i3 = 0) const {
        return v[index(i0, i1, i2, i3)];
    }
};

using conformance::for_each_index;

/// Every element of t.
inline ref_tensor read(const tensor& t) {
    ref_tensor r(t.type, t.ne);
    if (is_quantized(t.type)) {
        // a block at a time (get() would decode a whole block per value)
        const i64 bs = block_size(t.type);
        double block[max_block_size];
        for_each_index({t.ne[0] / bs, t.ne[1], t.ne[2], t.ne[3]}, [&](i64 b, i64 i1, i64 i2, i64 i3) {
            const std::byte* row = ref_detail::element_row(t, i1, i2, i3);
            ref_detail::decode_block(t.type, row + static_cast<std::size_t>(b) * t.nb[0], block);
            std::copy(block, block + bs, &r.at(b * bs, i1, i2, i3));
        });
        return r;
    }
    for_each_index(t.ne, [&](i64 i0, i64 i1, i64 i2, i64 i3) {
        r.at(i0, i1, i2, i3) = get(t, i0, i1, i2, i3);
    });
    return r;
}

// ---------------------------------------------------------------------------------------
// Rounding to storage types

/// x rounded to the nearest value of type t (f32, f16, bf16; i32 and i64 truncate).
inline double round_to(elem_type t, double x) {
    switch (t) {
    case elem_type::f32:
        return static_cast<float>(x);
    case elem_type::f16:
        return f16_to_f32(f32_to_f16(static_cast<float>(x)));
    case elem_type::bf16:
        return bf16_to_f32(f32_to_bf16(static_cast<float>(x)));
    case elem_type::i32:
        return static_cast<double>(static_cast<std::int32_t>(x));
    case elem_type::i64:
        return static_cast<double>(static_cast<std::int64_t>(x));
    default:
        throw std::logic_error("ref_oracle::round_to: quantized values are rounded block-wise");
    }
}

/// One block of quantized type t replaced by what t stores for its values (dequantized),
/// by core's quantizer and dequantizer: they work in f32 as ggml's do (so a value on a
/// rounding boundary in double rounds as f32 arithmetic has it), and are checked against
/// ggml's by scripts/check_quants_ggml and against the formulas by test_types and
/// test_quants.
inline void quantize_block_ref(elem_type t, double* x) {
    if (!is_quantized(t)) throw std::logic_error("ref_oracle::quantize_block_ref: not a quantized type");
    const auto bs = static_cast<std::size_t>(block_size(t));
    float in[max_block_size] = {}, out[max_block_size];
    std::byte block[max_type_size];
    for (std::size_t j = 0; j < bs; ++j) in[j] = static_cast<float>(x[j]);
    quantize_block(t, in, block);
    dequantize_block(t, block, out);
    for (std::size_t j = 0; j < bs; ++j) x[j] = out[j];
}

/// r's values replaced by what its type stores for them.
inline void round_to_type(ref_tensor& r) {
    if (is_quantized(r.type)) {
        const auto bs = static_cast<std::size_t>(block_size(r.type));
        for (std::size_t b = 0; b + bs <= r.v.size(); b += bs)
            quantize_block_ref(r.type, r.v.data() + b);
        return;
    }
    for (double& x : r.v)
        x = round_to(r.type, x);
}

// ---------------------------------------------------------------------------------------
// Reference ops

namespace ref_detail {

inline ref_tensor binary(const tensor& node) {
    const tensor& a = *node.src[0];
    const tensor& b = *node.src[1];
    ref_tensor r(node.type, node.ne);
    for_each_index(node.ne, [&](i64 i0, i64 i1, i64 i2, i64 i3) {
        const double x = get(a, i0, i1, i2, i3);
        const double y = get(b, i0 % b.ne[0], i1 % b.ne[1], i2 % b.ne[2], i3 % b.ne[3]);
        double z = 0.0;
        switch (node.op) {
        case op_kind::add:
            z = x + y;
            break;
        case op_kind::sub:
            z = x - y;
            break;
        case op_kind::mul:
            z = x * y;
            break;
        default:
            z = x / y;
            break;
        }
        r.at(i0, i1, i2, i3) = z;
    });
    return r;
}

// The functions of core/unary_functions.hpp, in double (p0, p1: the node's parameters).
inline double unary_function(op_kind op, double x, double p0, double p1) {
    switch (op) {
    case op_kind::abs: return std::fabs(x);
    case op_kind::sgn: return x > 0.0 ? 1.0 : (x < 0.0 ? -1.0 : 0.0);
    case op_kind::step: return x > 0.0 ? 1.0 : 0.0;
    case op_kind::tanh: return std::tanh(x);
    case op_kind::sigmoid: return 1.0 / (1.0 + std::exp(-x));
    case op_kind::exp: return std::exp(x);
    case op_kind::log: return std::log(x);
    case op_kind::sin: return std::sin(x);
    case op_kind::cos: return std::cos(x);
    case op_kind::elu: return x > 0.0 ? x : std::expm1(x);
    case op_kind::hardsigmoid: return std::min(1.0, std::max(0.0, (x + 3.0) / 6.0));
    case op_kind::hardswish: return x * std::min(1.0, std::max(0.0, (x + 3.0) / 6.0));
    case op_kind::softplus: return x > 20.0 ? x : std::log1p(std::exp(x));
    case op_kind::gelu_erf: return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
    case op_kind::gelu_quick: return x / (1.0 + std::exp(-1.702 * x));
    case op_kind::leaky_relu: return std::max(x, 0.0) + p0 * std::min(x, 0.0);
    case op_kind::clamp: return std::max(std::min(x, p1), p0);
    default: return std::nan("");
    }
}

inline ref_tensor unary(const tensor& node) {
    const tensor& a = *node.src[0];
    ref_tensor r(node.type, node.ne);
    const double s = node.param<float>(0);
    const double bias = node.param<float>(1);
    const double pi = std::acos(-1.0);
    for_each_index(node.ne, [&](i64 i0, i64 i1, i64 i2, i64 i3) {
        const double x = get(a, i0, i1, i2, i3);
        double y = 0.0;
        switch (node.op) {
        case op_kind::scale:
            y = x * s + bias;
            break;
        case op_kind::sqr:
            y = x * x;
            break;
        case op_kind::sqrt:
            y = std::sqrt(x);
            break;
        case op_kind::silu:
            y = x / (1.0 + std::exp(-x));
            break;
        case op_kind::gelu:
            y = 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / pi) * (x + 0.044715 * x * x * x)));
            break;
        case op_kind::neg:
            y = -x;
            break;
        case op_kind::relu:
            y = x > 0.0 ? x : 0.0;
            break;
        default:
            y = unary_function(node.op, x, s, bias);
            break;
        }
        r.at(i0, i1, i2, i3) = y;
    });
    return r;
}

inline ref_tensor sum_rows(const tensor& node) {
    const tensor& a = *node.src[0];
    ref_tensor r(node.type, node.ne);
    for_each_index(a.ne, [&](i64 i0, i64 i1, i64 i2, i64 i3) {
        r.at(0, i1, i2, i3) += get(a, i0, i1, i2, i3);
    });
    return r;
}

/// mean: each row's sum over its length.
inline ref_tensor mean(const tensor& node) {
    ref_tensor r = sum_rows(node);
    for (double& v : r.v) v /= static_cast<double>(node.src[0]->ne[0]);
    return r;
}

/// sum: every element of a added up.
inline ref_tensor sum(const tensor& node) {
    const tensor& a = *node.src[0];
    ref_tensor r(node.type, node.ne);
    for_each_index(a.ne, [&](i64 i0, i64 i1, i64 i2, i64 i3) { r.v[0] += get(a, i0, i1, i2, i3); });
    return r;
}

/// argsort (order in param 0) and top_k (the first dst.ne0 of the descending order): a
/// stable sort of each row's indices by value, NaNs above every number.
inline ref_tensor sort_rows(const tensor& node) {
    const tensor& a = *node.src[0];
    const bool desc = node.op == op_kind::top_k || node.param<std::int32_t>(0) == static_cast<std::int32_t>(sort_order::desc);
    // a NaN's rank is +inf above +inf: compare (is_nan, value) pairs
    const auto rank = [](double v) { return std::pair<bool, double>{std::isnan(v), std::isnan(v) ? 0.0 : v}; };
    ref_tensor r(node.type, node.ne);
    for (i64 i3 = 0; i3 < a.ne[3]; ++i3)
        for (i64 i2 = 0; i2 < a.ne[2]; ++i2)
            for (i64 i1 = 0; i1 < a.ne[1]; ++i1) {
                std::vector<i64> idx(static_cast<std::size_t>(a.ne[0]));
                for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<i64>(i);
                std::stable_sort(idx.begin(), idx.end(), [&](i64 x, i64 y) {
                    const auto vx = rank(get(a, x, i1, i2, i3)), vy = rank(get(a, y, i1, i2, i3));
                    return desc ? vy < vx : vx < vy;
                });
                for (i64 i0 = 0; i0 < node.ne[0]; ++i0) r.at(i0, i1, i2, i3) = static_cast<double>(idx[static_cast<std::size_t>(i0)]);
            }
    return r;
}

inline ref_tensor argmax(const tensor& node) {
    const tensor& a = *node.src[0];
    ref_tensor r(node.type, node.ne);
    for (i64 i3 = 0; i3 < a.ne[3]; ++i3)
        for (i64 i2 = 0; i2 < a.ne[2]; ++i2)
            for (i64 i1 = 0; i1 < a.ne[1]; ++i1) {
                i64 best = 0;
                double best_v = -std::numeric_limits<double>::infinity();
                for (i64 i0 = 0; i0 < a.ne[0]; ++i0) {
                    const double v = get(a, i0, i1, i2, i3);
                    if (v >= best_v) { // the last maximum wins (as ggml), NaN never
                        best_v = v;
                        best = i0;
                    }
                }
                r.at(i1, i2, i3) = static_cast<double>(best);
            }
    return r;
}

/// norm, rms_norm, l2_norm of each row.
inline ref_tensor norm(const tensor& node) {
    const tensor& a = *node.src[0];
    const double eps = node.param<float>(0);
    ref_tensor r(node.type, node.ne);
    const i64 n = a.ne[0];
    for (i64 i3 = 0; i3 < a.ne[3]; ++i3)
        for (i64 i2 = 0; i2 < a.ne[2]; ++i2)
            for (i64 i1 = 0; i1 < a.ne[1]; ++i1) {
                double mean = 0.0;
                if (node.op == op_kind::norm) {
                    for (i64 i0 = 0; i0 < n; ++i0)
                        mean += get(a, i0, i1, i2, i3);
                    mean /= static_cast<double>(n);
                }
                double sum2 = 0.0;
                for (i64 i0 = 0; i0 < n; ++i0) {
                    const double d = get(a, i0, i1, i2, i3) - mean;
                    sum2 += d * d;
                }
                const double scale = node.op == op_kind::l2_norm ? 1.0 / std::max(std::sqrt(sum2), eps)
                                                                 : 1.0 / std::sqrt(sum2 / static_cast<double>(n) + eps);
                for (i64 i0 = 0; i0 < n; ++i0)
                    r.at(i0, i1, i2, i3) = (get(a, i0, i1, i2, i3) - mean) * scale;
            }
    return r;
}

/// group_norm: channels cut into groups of ceil(C / n_groups) (ggml's cut, restated), each
/// group of each sample normalised as one set of values.
inline ref_tensor group_norm(const tensor& node) {
    const tensor& a = *node.src[0];
    const i64 n_groups = node.param<std::int32_t>(0);
    const double eps = node.param<float>(1);
    const i64 per_group = (a.ne[2] + n_groups - 1) / n_groups;
    ref_tensor r(node.type, node.ne);
    for (i64 i3 = 0; i3 < a.ne[3]; ++i3)
        for (i64 c0 = 0; c0 < a.ne[2]; c0 += per_group) {
            const i64 c1 = std::min(c0 + per_group, a.ne[2]);
            const extents part = {a.ne[0], a.ne[1], c1 - c0, 1};
            const double n = static_cast<double>(a.ne[0] * a.ne[1] * (c1 - c0));
            double mean = 0.0, sum2 = 0.0;
            for_each_index(part, [&](i64 i0, i64 i1, i64 c, i64) { mean += get(a, i0, i1, c0 + c, i3); });
            mean /= n;
            for_each_index(part, [&](i64 i0, i64 i1, i64 c, i64) {
                const double d = get(a, i0, i1, c0 + c, i3) - mean;
                sum2 += d * d;
            });
            for_each_index(part, [&](i64 i0, i64 i1, i64 c, i64) {
                r.at(i0, i1, c0 + c, i3) = (get(a, i0, i1, c0 + c, i3) - mean) / std::sqrt(sum2 / n + eps);
            });
        }
    return r;
}

/// repeat: element i is a's element i mod a.ne.
inline ref_tensor repeat(const tensor& node) {
    const tensor& a = *node.src[0];
    ref_tensor r(node.type, node.ne);
    for_each_index(node.ne, [&](i64 i0, i64 i1, i64 i2, i64 i3) {
        r.at(i0, i1, i2, i3) = get(a, i0 % a.ne[0], i1 % a.ne[1], i2 % a.ne[2], i3 % a.ne[3]);
    });
    return r;
}

/// repeat_back: each element of a added into the result's element it repeats.
inline ref_tensor repeat_back(const tensor& node) {
    const tensor& a = *node.src[0];
    ref_tensor r(node.type, node.ne);
    for_each_index(a.ne, [&](i64 j0, i64 j1, i64 j2, i64 j3) {
        r.at(j0 % node.ne[0], j1 % node.ne[1], j2 % node.ne[2], j3 % node.ne[3]) += get(a, j0, j1, j2, j3);
    });
    return r;
}

/// cumsum: the exact running sums of each row.
inline ref_tensor cumsum(const tensor& node) {
    const tensor& a = *node.src[0];
    ref_tensor r(node.type, node.ne);
    for_each_index({1, a.ne[1], a.ne[2], a.ne[3]}, [&](i64, i64 i1, i64 i2, i64 i3) {
        double sum = 0.0;
        for (i64 i0 = 0; i0 < a.ne[0]; ++i0) r.at(i0, i1, i2, i3) = sum += get(a, i0, i1, i2, i3);
    });
    return r;
}

/// tri: ggml's four triangles (column i0, row i1), restated.
inline ref_tensor tri(const tensor& node) {
    const tensor& a = *node.src[0];
    const std::int32_t type = node.param<std::int32_t>(0);
    ref_tensor r(node.type, node.ne);
    for_each_index(node.ne, [&](i64 i0, i64 i1, i64 i2, i64 i3) {
        const bool keep = type == 0 ? i0 >= i1 : type == 1 ? i0 > i1 : type == 2 ? i0 <= i1 : i0 < i1;
        r.at(i0, i1, i2, i3) = keep ? get(a, i0, i1, i2, i3) : 0.0;
    });
    return r;
}

/// diag: a's row on the diagonal of each matrix.
inline ref_tensor diag(const tensor& node) {
    const tensor& a = *node.src[0];
    ref_tensor r(node.type, node.ne);
    for_each_index(node.ne, [&](i64 i0, i64 i1, i64 i2, i64 i3) {
        r.at(i0, i1, i2, i3) = i0 == i1 ? get(a, i0, 0, i2, i3) : 0.0;
    });
    return r;
}

/// timestep_embedding in double: cos(t f_j), sin(t f_j), f_j = max_period^(-j / half).
inline ref_tensor timestep_embedding(const tensor& node) {
    const tensor& a = *node.src[0];
    const i64 half = node.param<std::int32_t>(0) / 2;
    const double max_period = node.param<std::int32_t>(1);
    ref_tensor r(node.type, node.ne);
    for (i64 i = 0; i < node.ne[1]; ++i)
        for (i64 j = 0; j < half; ++j) {
            const double arg = get(a, i) * std::pow(max_period, -static_cast<double>(j) / static_cast<double>(half));
            r.at(j, i) = std::cos(arg);
            r.at(j + half, i) = std::sin(arg);
        }
    return r; // an odd dim's last value stays 0
}

/// ssm_conv in double: r[i, t, k] = sum over j of sx[t + j, i, k] * c[j, i].
inline ref_tensor ssm_conv(const tensor& node) {
    const tensor& sx = *node.src[0];
    const tensor& c = *node.src[1];
    ref_tensor r(node.type, node.ne);
    for_each_index(node.ne, [&](i64 i, i64 t, i64 k, i64) {
        double sum = 0.0;
        for (i64 j = 0; j < c.ne[0]; ++j) sum += get(sx, t + j, i, k) * get(c, j, i);
        r.at(i, t, k) = sum;
    });
    return r;
}

/// ssm_scan in double: y, then the final states (core/ops/recurrent.hpp); every id valid.
inline ref_tensor ssm_scan(const tensor& node) {
    const tensor& s = *node.src[0];
    const tensor& x = *node.src[1];
    const tensor& dt = *node.src[2];
    const tensor& A = *node.src[3];
    const tensor& B = *node.src[4];
    const tensor& C = *node.src[5];
    const tensor& ids = *node.src[6];
    const i64 d_state = s.ne[0], head_dim = x.ne[0], n_head = x.ne[1], n_t = x.ne[2], n_s = x.ne[3];
    const i64 per_group = n_head / B.ne[1];
    ref_tensor r(node.type, node.ne);
    std::vector<double> st(static_cast<std::size_t>(d_state));
    for (i64 k = 0; k < n_s; ++k) {
        const auto id = static_cast<i64>(get(ids, k));
        for (i64 h = 0; h < n_head; ++h)
            for (i64 i = 0; i < head_dim; ++i) {
                for (i64 n = 0; n < d_state; ++n) st[static_cast<std::size_t>(n)] = get(s, n, i, h, id);
                for (i64 t = 0; t < n_t; ++t) {
                    const double v = get(dt, h, t, k);
                    const double d = v > 20.0 ? v : std::log1p(std::exp(v));
                    double y = 0.0;
                    for (i64 n = 0; n < d_state; ++n) {
                        double& state = st[static_cast<std::size_t>(n)];
                        state = state * std::exp(d * get(A, A.ne[0] == 1 ? 0 : n, h)) + get(B, n, h / per_group, t, k) * get(x, i, h, t, k) * d;
                        y += state * get(C, n, h / per_group, t, k);
                    }
                    r.at(((k * n_t + t) * n_head + h) * head_dim + i) = y;
                }
                for (i64 n = 0; n < d_state; ++n)
                    r.at(x.nelements() + ((k * n_head + h) * head_dim + i) * d_state + n) = st[static_cast<std::size_t>(n)];
            }
    }
    return r;
}

/// gated_linear_attn, rwkv_wkv6 and rwkv_wkv7 in double (core/ops/recurrent.hpp's formulas).
inline ref_tensor linear_attention(const tensor& node) {
    const bool wkv7 = node.op == op_kind::rwkv_wkv7, wkv6 = node.op == op_kind::rwkv_wkv6;
    const tensor& kt = *node.src[wkv7 ? 2 : 0];
    const tensor& state = *node.src[wkv7 ? 6 : wkv6 ? 5 : 4];
    const i64 S = kt.ne[0], H = kt.ne[1], T = kt.ne[2], n_seqs = state.ne[1], per_seq = T / n_seqs;
    const double scale = node.op == op_kind::gated_linear_attn ? node.param<float>(0) : 1.0;
    const auto in = [&](std::size_t j, i64 c, i64 h, i64 t) { return get(*node.src[j], c, h, t); };
    const auto flat = [](const tensor& t, i64 i) { // element i of a contiguous tensor
        return get(t, i % t.ne[0], (i / t.ne[0]) % t.ne[1], (i / (t.ne[0] * t.ne[1])) % t.ne[2], i / (t.ne[0] * t.ne[1] * t.ne[2]));
    };
    ref_tensor r(node.type, node.ne);
    std::vector<double> st(static_cast<std::size_t>(S * S)), next(st.size());
    for (i64 seq = 0; seq < n_seqs; ++seq)
        for (i64 h = 0; h < H; ++h) {
            const i64 base = (seq * H + h) * S * S;
            for (i64 e = 0; e < S * S; ++e) st[static_cast<std::size_t>(e)] = flat(state, base + e);
            for (i64 t = seq * per_seq; t < (seq + 1) * per_seq; ++t) {
                const auto at = [&](i64 i, i64 j) -> double& { return st[static_cast<std::size_t>(i * S + j)]; };
                for (i64 o = 0; o < S; ++o) {
                    double y = 0.0;
                    for (i64 c = 0; c < S; ++c) {
                        if (wkv7) { // o = i (value channel), c = j
                            double sa = 0.0;
                            for (i64 j = 0; j < S; ++j) sa += in(4, j, h, t) * at(o, j);
                            const double n = at(o, c) * in(1, c, h, t) + in(3, o, h, t) * in(2, c, h, t) + sa * in(5, c, h, t);
                            next[static_cast<std::size_t>(o * S + c)] = n;
                            y += n * in(0, c, h, t);
                        } else { // o = j (value channel), c = i
                            const double kv = in(0, c, h, t) * in(1, o, h, t);
                            if (wkv6) {
                                y += in(2, c, h, t) * (flat(*node.src[3], h * S + c) * kv + at(c, o));
                                next[static_cast<std::size_t>(c * S + o)] = at(c, o) * in(4, c, h, t) + kv;
                            } else {
                                const double n = at(c, o) * in(3, c, h, t) + kv;
                                next[static_cast<std::size_t>(c * S + o)] = n;
                                y += n * in(2, c, h, t) * scale;
                            }
                        }
                    }
                    r.at((t * H + h) * S + o) = y;
                }
                st = next;
            }
            for (i64 e = 0; e < S * S; ++e) r.at(S * H * T + base + e) = st[static_cast<std::size_t>(e)];
        }
    return r;
}

/// out_prod: sum over k of a[i0, k] * b[i1, k], a's planes broadcast in blocks.
inline ref_tensor out_prod(const tensor& node) {
    const tensor& a = *node.src[0];
    const tensor& b = *node.src[1];
    ref_tensor r(node.type, node.ne);
    for_each_index(node.ne, [&](i64 i0, i64 i1, i64 i2, i64 i3) {
        const i64 a2 = i2 * a.ne[2] / node.ne[2], a3 = i3 * a.ne[3] / node.ne[3];
        double sum = 0.0;
        for (i64 k = 0; k < a.ne[1]; ++k) sum += get(a, i0, k, a2, a3) * get(b, i1, k, i2, i3);
        r.at(i0, i1, i2, i3) = sum;
    });
    return r;
}

/// count_equal: the positions where a and b agree.
inline ref_tensor count_equal(const tensor& node) {
    const tensor& a = *node.src[0];
    const tensor& b = *node.src[1];
    ref_tensor r(node.type, node.ne);
    for_each_index(a.ne, [&](i64 i0, i64 i1, i64 i2, i64 i3) {
        r.at(0) += get(a, i0, i1, i2, i3) == get(b, i0, i1, i2, i3) ? 1.0 : 0.0;
    });
    return r;
}

/// acc: a, with each element of b added at its place in the view (a contiguous: the
/// element at byte x is a's element x / 4 in order).
inline ref_tensor acc(const tensor& node) {
    const tensor& b = *node.src[1];
    ref_tensor r = read(*node.src[0]);
    r.type = node.type;
    const i64 nb[4] = {4, node.param<std::int32_t>(0), node.param<std::int32_t>(1), node.param<std::int32_t>(2)};
    const i64 offset = node.param<std::int32_t>(3);
    for_each_index(b.ne, [&](i64 j0, i64 j1, i64 j2, i64 j3) {
        const i64 at = offset + j0 * nb[0] + j1 * nb[1] + j2 * nb[2] + j3 * nb[3];
        r.v[static_cast<std::size_t>(at / 4)] += get(b, j0, j1, j2, j3);
    });
    return r;
}

/// ALiBi's slope of head h of n_head (ggml's formula, in double).
inline double alibi_slope(double max_bias, i64 n_head, i64 h) {
    if (!(max_bias > 0.0)) return 1.0;
    const double n_head_log2 = std::exp2(std::floor(std::log2(static_cast<double>(n_head))));
    const double m0 = std::exp2(-max_bias / n_head_log2);
    const double m1 = std::exp2(-max_bias / 2.0 / n_head_log2);
    const auto dh = static_cast<double>(h);
    return dh < n_head_log2 ? std::pow(m0, dh + 1.0) : std::pow(m1, 2.0 * (dh - n_head_log2) + 1.0);
}

inline ref_tensor soft_max(const tensor& node) {
    const tensor& a = *node.src[0];
    const tensor* mask = node.src[1];
    const tensor* sinks = node.src[2];
    const double scale = node.param<float>(0);
    const double max_bias = node.param<float>(1);
    ref_tensor r(node.type, node.ne);
    const i64 n = a.ne[0];
    constexpr double ninf = -std::numeric_limits<double>::infinity();
    std::vector<double> v(static_cast<std::size_t>(n));
    for (i64 i3 = 0; i3 < a.ne[3]; ++i3)
        for (i64 i2 = 0; i2 < a.ne[2]; ++i2)
            for (i64 i1 = 0; i1 < a.ne[1]; ++i1) {
                const double slope = alibi_slope(max_bias, a.ne[2], i2);
                const double sink = sinks ? get(*sinks, i2) : ninf;
                double max = sink;
                for (i64 i0 = 0; i0 < n; ++i0) {
                    double x = get(a, i0, i1, i2, i3) * scale;
                    if (mask)
                        x += slope * get(*mask, i0, i1, i2 % mask->ne[2], i3 % mask->ne[3]);
                    v[static_cast<std::size_t>(i0)] = x;
                    max = std::max(max, x);
                }
                double sum = sinks ? std::exp(sink - max) : 0.0;
                for (double x : v)
                    sum += std::exp(x - max);
                for (i64 i0 = 0; i0 < n; ++i0)
                    r.at(i0, i1, i2, i3) = max == ninf ? 0.0 // every position masked, no sink
                                                       : std::exp(v[static_cast<std::size_t>(i0)] - max) / sum;
            }
    return r;
}

/// flash_attn_ext in double: the scores of every position, their softmax (with the
/// head's sink), the weighted sum of v (core/ops/attention.hpp).
inline ref_tensor flash_attn_ext(const tensor& node) {
    const tensor& q = *node.src[0];
    const tensor& k = *node.src[1];
    const tensor& v = *node.src[2];
    const tensor* mask = node.src[3];
    const tensor* sinks = node.src[4];
    const double softcap = node.param<float>(2);
    const double scale = node.param<float>(0);
    const double max_bias = node.param<float>(1);
    const i64 group = q.ne[2] / k.ne[2];
    constexpr double ninf = -std::numeric_limits<double>::infinity();
    ref_tensor r(node.type, node.ne);
    std::vector<double> s(static_cast<std::size_t>(k.ne[1]));
    for (i64 i3 = 0; i3 < q.ne[3]; ++i3)
        for (i64 h = 0; h < q.ne[2]; ++h)
            for (i64 iq = 0; iq < q.ne[1]; ++iq) {
                const double slope = alibi_slope(max_bias, q.ne[2], h);
                double max = sinks ? get(*sinks, h) : ninf;
                for (i64 j = 0; j < k.ne[1]; ++j) {
                    const double m = mask ? slope * get(*mask, j, iq, h % mask->ne[2], i3 % mask->ne[3]) : 0.0;
                    double x = 0.0;
                    for (i64 d = 0; d < q.ne[0]; ++d)
                        x += get(q, d, iq, h, i3) * get(k, d, j, h / group, i3);
                    x *= scale;
                    if (softcap != 0.0) x = softcap * std::tanh(x / softcap);
                    s[static_cast<std::size_t>(j)] = m == ninf ? ninf : x + m;
                    max = std::max(max, s[static_cast<std::size_t>(j)]);
                }
                if (max == ninf) continue; // every position masked, no sink: zeros
                double sum = sinks ? std::exp(get(*sinks, h) - max) : 0.0;
                for (double x : s) sum += std::exp(x - max);
                for (i64 d = 0; d < v.ne[0]; ++d) {
                    double acc = 0.0;
                    for (i64 j = 0; j < k.ne[1]; ++j)
                        acc += std::exp(s[static_cast<std::size_t>(j)] - max) * get(v, d, j, h / group, i3);
                    r.at(d, h, iq, i3) = acc / sum;
                }
            }
    return r;
}

inline ref_tensor mul_mat(const tensor& node) {
    const tensor& a = *node.src[0];
    const tensor& b = *node.src[1];
    ref_tensor r(node.type, node.ne);
    const i64 r2 = b.ne[2] / a.ne[2];
    const i64 r3 = b.ne[3] / a.ne[3];
    for_each_index(node.ne, [&](i64 m, i64 n, i64 i2, i64 i3) {
        double sum = 0.0;
        for (i64 k = 0; k < a.ne[0]; ++k)
            sum += get(a, k, m, i2 / r2, i3 / r3) * get(b, k, n, i2, i3);
        r.at(m, n, i2, i3) = sum;
    });
    return r;
}

inline ref_tensor mul_mat_id(const tensor& node) {
    const tensor& as = *node.src[0];
    const tensor& b = *node.src[1];
    const tensor& ids = *node.src[2];
    ref_tensor r(node.type, node.ne);
    for_each_index(node.ne, [&](i64 m, i64 s, i64 t, i64) {
        const auto e = static_cast<i64>(get(ids, s, t));
        if (e < 0 || e >= as.ne[2]) return; // a zero column
        double sum = 0.0;
        for (i64 k = 0; k < as.ne[0]; ++k)
            sum += get(as, k, m, e) * get(b, k, s % b.ne[1], t);
        r.at(m, s, t) = sum;
    });
    return r;
}

/// im2col: row (x, y, image) of the result holds b's window at output position (x, y),
/// channel by channel and kernel row by kernel row, with 0 in the padding (the 1-D form
/// has height 1: b [iw, ic, n], the result [ic * k, ow, n]).
inline ref_tensor im2col(const tensor& node) {
    const tensor& a = *node.src[0];
    const tensor& b = *node.src[1];
    const auto prm = [&](std::size_t i) { return static_cast<i64>(node.param<std::int32_t>(i)); };
    const bool two_d = prm(6) == 1;
    const i64 kw = a.ne[0], kh = two_d ? a.ne[1] : 1;
    const i64 iw = b.ne[0], ih = two_d ? b.ne[1] : 1;
    ref_tensor r(node.type, node.ne);
    for_each_index(node.ne, [&](i64 k, i64 x, i64 j2, i64 j3) {
        const i64 y = two_d ? j2 : 0, image = two_d ? j3 : j2;
        const i64 c = k / (kw * kh), ky = k / kw % kh, kx = k % kw;
        const i64 ix = x * prm(0) + kx * prm(4) - prm(2);
        const i64 iy = y * prm(1) + ky * prm(5) - prm(3);
        if (ix < 0 || ix >= iw || iy < 0 || iy >= ih) return; // padding: 0
        r.at(k, x, j2, j3) = two_d ? get(b, ix, iy, c, image) : get(b, ix, c, image);
    });
    return r;
}

/// conv_2d: result (x, y, o, i) sums kernel[kx, ky, c, o] * b[x s0 + kx d0 - p0, y s1 +
/// ky d1 - p1, c, i] over the taps inside b, b's values rounded to f16 first under an f16
/// kernel (what the op defines, as ggml's CPU).
inline ref_tensor conv_2d(const tensor& node) {
    const tensor& k = *node.src[0];
    const tensor& b = *node.src[1];
    const auto prm = [&](std::size_t i) { return static_cast<i64>(node.param<std::int32_t>(i)); };
    const auto input = [&](i64 ix, i64 iy, i64 c, i64 n) {
        const double v = get(b, ix, iy, c, n);
        return k.type == elem_type::f16 ? static_cast<double>(f16_to_f32(f32_to_f16(static_cast<float>(v)))) : v;
    };
    ref_tensor r(node.type, node.ne);
    for_each_index(node.ne, [&](i64 x, i64 y, i64 o, i64 n) {
        double sum = 0.0;
        for (i64 c = 0; c < k.ne[2]; ++c)
            for (i64 ky = 0; ky < k.ne[1]; ++ky)
                for (i64 kx = 0; kx < k.ne[0]; ++kx) {
                    const i64 ix = x * prm(0) + kx * prm(4) - prm(2), iy = y * prm(1) + ky * prm(5) - prm(3);
                    if (ix >= 0 && ix < b.ne[0] && iy >= 0 && iy < b.ne[1]) sum += get(k, kx, ky, c, o) * input(ix, iy, c, n);
                }
        r.at(x, y, o, n) = sum;
    });
    return r;
}

/// win_part, win_unpart and get_rel_pos, from their definitions (ggml's loops).
inline ref_tensor window(const tensor& node) {
    const tensor& a = *node.src[0];
    ref_tensor r(node.type, node.ne);
    if (node.op == op_kind::win_part) {
        const i64 npx = node.param<std::int32_t>(0), w = node.param<std::int32_t>(2);
        for_each_index(node.ne, [&](i64 e, i64 x, i64 y, i64 win) {
            const i64 sx = (win % npx) * w + x, sy = (win / npx) * w + y;
            r.at(e, x, y, win) = sx < a.ne[1] && sy < a.ne[2] ? get(a, e, sx, sy, 0) : 0.0;
        });
    } else if (node.op == op_kind::get_rel_pos) {
        for_each_index(node.ne, [&](i64 e, i64 k, i64 q, i64) { r.at(e, k, q, 0) = get(a, e, node.ne[1] - 1 - k + q, 0, 0); });
    } else {
        const i64 w = node.param<std::int32_t>(0), npx = (node.ne[1] + w - 1) / w;
        for_each_index(node.ne, [&](i64 e, i64 x, i64 y, i64) { r.at(e, x, y, 0) = get(a, e, x % w, y % w, (y / w) * npx + x / w); });
    }
    return r;
}

/// conv_2d_dw: result (x, y, ch, i) sums kernel[kx, ky, 0, ch] * b[x s0 + kx d0 - p0, y s1
/// + ky d1 - p1, ch, i] over the taps inside b.
inline ref_tensor conv_2d_dw(const tensor& node) {
    const tensor& k = *node.src[0];
    const tensor& b = *node.src[1];
    const auto prm = [&](std::size_t i) { return static_cast<i64>(node.param<std::int32_t>(i)); };
    ref_tensor r(node.type, node.ne);
    for_each_index(node.ne, [&](i64 x, i64 y, i64 ch, i64 n) {
        double sum = 0.0;
        for (i64 ky = 0; ky < k.ne[1]; ++ky)
            for (i64 kx = 0; kx < k.ne[0]; ++kx) {
                const i64 ix = x * prm(0) + kx * prm(4) - prm(2), iy = y * prm(1) + ky * prm(5) - prm(3);
                if (ix >= 0 && ix < b.ne[0] && iy >= 0 && iy < b.ne[1]) sum += get(k, kx, ky, 0, ch) * get(b, ix, iy, ch, n);
            }
        r.at(x, y, ch, n) = sum;
    });
    return r;
}

/// conv_transpose_1d and conv_transpose_2d, from their definition: input value b(ix, iy,
/// c, i) times tap a(kx, ky, o, c) adds to result (ix s + kx, iy s + ky, o, i) (1-D: b
/// [iw, ic], a [k, oc, ic], result [ow, oc]); b rounded to f16 first under an f16 kernel.
inline ref_tensor conv_transpose(const tensor& node) {
    const tensor& a = *node.src[0];
    const tensor& b = *node.src[1];
    const bool two_d = node.op != op_kind::conv_transpose_1d;
    const i64 s0 = node.param<std::int32_t>(0), s1 = two_d ? s0 : 1;
    const auto input = [&](double v) {
        return a.type == elem_type::f16 ? static_cast<double>(f16_to_f32(f32_to_f16(static_cast<float>(v)))) : v;
    };
    ref_tensor r(node.type, node.ne);
    if (two_d) {
        for_each_index(b.ne, [&](i64 ix, i64 iy, i64 c, i64 i) {
            const double v = input(get(b, ix, iy, c, i));
            for (i64 o = 0; o < a.ne[2]; ++o)
                for (i64 ky = 0; ky < a.ne[1]; ++ky)
                    for (i64 kx = 0; kx < a.ne[0]; ++kx) r.at(ix * s0 + kx, iy * s1 + ky, o, i) += get(a, kx, ky, o, c) * v;
        });
    } else {
        for_each_index(b.ne, [&](i64 ix, i64 c, i64, i64) {
            const double v = input(get(b, ix, c, 0, 0));
            for (i64 o = 0; o < a.ne[1]; ++o)
                for (i64 kx = 0; kx < a.ne[0]; ++kx) r.at(ix * s0 + kx, o, 0, 0) += get(a, kx, o, c, 0) * v;
        });
    }
    return r;
}

inline ref_tensor add_id(const tensor& node) {
    const tensor& a = *node.src[0];
    const tensor& b = *node.src[1];
    const tensor& ids = *node.src[2];
    ref_tensor r(node.type, node.ne);
    for_each_index(node.ne, [&](i64 i0, i64 i1, i64 i2, i64) {
        const auto e = static_cast<i64>(get(ids, i1, i2));
        if (e < 0 || e >= b.ne[1]) return; // a zero row
        r.at(i0, i1, i2) = get(a, i0, i1, i2) + get(b, i0, e);
    });
    return r;
}

inline ref_tensor get_rows(const tensor& node) {
    const tensor& a = *node.src[0];
    const tensor& idx = *node.src[1];
    ref_tensor r(node.type, node.ne);
    for_each_index(node.ne, [&](i64 i0, i64 n, i64 j, i64 k) {
        const auto row = static_cast<i64>(get(idx, n, j, k));
        r.at(i0, n, j, k) = row >= 0 && row < a.ne[1] ? get(a, i0, row, j, k) : 0.0;
    });
    return r;
}

/// set_rows: the destination's values, with row (n, j, k) of b over row
/// idx[n, j % I2, k % I3] of matrix (j, k) (an index out of range writes nothing), each
/// written row rounded to the destination's type once (quantized block by block).
inline ref_tensor set_rows(const tensor& node) {
    const tensor& b = *node.src[0];
    const tensor& idx = *node.src[1];
    ref_tensor r = read(*node.src[2]);
    ref_tensor rows(node.type, node.ne); // the rows written, to round them alone
    std::vector<bool> written(static_cast<std::size_t>(node.nrows()), false);
    for_each_index(b.ne, [&](i64 i0, i64 n, i64 j, i64 k) {
        const auto row = static_cast<i64>(get(idx, n, j % idx.ne[1], k % idx.ne[2]));
        if (row < 0 || row >= node.ne[1]) return;
        rows.at(i0, row, j, k) = get(b, i0, n, j, k);
        written[static_cast<std::size_t>((k * node.ne[2] + j) * node.ne[1] + row)] = true;
    });
    round_to_type(rows);
    for_each_index(node.ne, [&](i64 i0, i64 i1, i64 i2, i64 i3) {
        if (written[static_cast<std::size_t>((i3 * node.ne[2] + i2) * node.ne[1] + i1)])
            r.at(i0, i1, i2, i3) = rows.at(i0, i1, i2, i3);
    });
    return r;
}

/// pad: element i is a's element i - lp (circular: (i - lp) mod ne) where inside, else 0.
inline ref_tensor pad(const tensor& node) {
    const tensor& a = *node.src[0];
    const bool circular = node.param<std::int32_t>(8) != 0;
    ref_tensor r(node.type, node.ne);
    for_each_index(node.ne, [&](i64 i0, i64 i1, i64 i2, i64 i3) {
        const extents i{i0, i1, i2, i3};
        extents j{};
        bool inside = true;
        for (std::size_t d = 0; d < max_dims; ++d) {
            j[d] = i[d] - node.param<std::int32_t>(2 * d);
            if (circular) j[d] = ((j[d] % a.ne[d]) + a.ne[d]) % a.ne[d];
            inside = inside && j[d] >= 0 && j[d] < a.ne[d];
        }
        r.at(i0, i1, i2, i3) = inside ? get(a, j[0], j[1], j[2], j[3]) : 0.0;
    });
    return r;
}

/// pool_1d, pool_2d: per window, the max of its cells inside a (-FLT_MAX for none), or
/// their sum divided by their count (pool_1d; 0 for none) or by k0 k1 (pool_2d).
inline ref_tensor pool(const tensor& node) {
    const tensor& a = *node.src[0];
    const pool_window w = pool_window_of(node);
    ref_tensor r(node.type, node.ne);
    for_each_index(node.ne, [&](i64 i0, i64 i1, i64 i2, i64 i3) {
        double sum = 0.0, best = -static_cast<double>(std::numeric_limits<float>::max());
        i64 inside = 0;
        for (i64 ky = 0; ky < w.k1; ++ky)
            for (i64 kx = 0; kx < w.k0; ++kx) {
                const i64 x = i0 * w.s0 - w.p0 + kx, y = i1 * w.s1 - w.p1 + ky;
                if (x < 0 || x >= a.ne[0] || y < 0 || y >= a.ne[1]) continue;
                const double v = get(a, x, y, i2, i3);
                sum += v;
                best = std::max(best, v);
                ++inside;
            }
        const double divisor = w.avg_over_inside ? static_cast<double>(inside) : static_cast<double>(w.k0) * w.k1;
        r.at(i0, i1, i2, i3) = w.op == pool_op::max ? best : divisor > 0 ? sum / divisor : 0.0;
    });
    return r;
}

/// The bicubic convolution weight at distance x (coefficient -0.75), in double.
inline double cubic_weight(double x) {
    constexpr double a = -0.75;
    x = std::abs(x);
    if (x <= 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
    return x < 2.0 ? ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a : 0.0;
}

/// upscale: source coordinates in f32 as ggml computes them (they pick the cells),
/// weights and sums in double.
inline ref_tensor upscale(const tensor& node) {
    const tensor& a = *node.src[0];
    const interpolation m = interpolation_of(node);
    const i64 n0 = a.ne[0], n1 = a.ne[1];
    const auto clamped = [](i64 i, i64 n) { return std::clamp<i64>(i, 0, n - 1); };
    const auto nearest = [&](i64 i, std::size_t d) { return clamped(static_cast<i64>(static_cast<float>(i) / m.sf[d]), a.ne[d]); };
    ref_tensor r(node.type, node.ne);
    for_each_index(node.ne, [&](i64 i0, i64 i1, i64 i2, i64 i3) {
        const i64 j2 = nearest(i2, 2), j3 = nearest(i3, 3);
        const auto cell = [&](i64 x, i64 y) { return get(a, clamped(x, n0), clamped(y, n1), j2, j3); };
        double v = 0.0;
        if (m.mode == scale_mode::nearest) {
            v = cell(nearest(i0, 0), nearest(i1, 1));
        } else if (m.antialias) {
            const float x = (static_cast<float>(i0) + m.offset) / m.sf[0], y = (static_cast<float>(i1) + m.offset) / m.sf[1];
            const double s0 = std::max(1.0, 1.0 / m.sf[0]), s1 = std::max(1.0, 1.0 / m.sf[1]);
            // ggml's range of cells: [trunc(x - s + o), trunc(x + s + o)), which leaves out the
            // last cell within the support when o is 0 (aligned corners)
            const auto first = [&](float c, double sup) { return std::max<i64>(static_cast<i64>(c - static_cast<float>(sup) + m.offset), 0); };
            const auto end = [&](float c, double sup, i64 n) { return std::min<i64>(static_cast<i64>(c + static_cast<float>(sup) + m.offset), n); };
            double total = 0.0;
            for (i64 sy = first(y, s1); sy < end(y, s1, n1); ++sy)
                for (i64 sx = first(x, s0); sx < end(x, s0, n0); ++sx) {
                    const double w = std::max(0.0, 1.0 - std::abs((sx - x + m.offset) / s0)) *
                                     std::max(0.0, 1.0 - std::abs((sy - y + m.offset) / s1));
                    v += w * cell(sx, sy);
                    total += w;
                }
            if (total > 0.0) v /= total;
        } else {
            const float x = (static_cast<float>(i0) + m.offset) / m.sf[0] - m.offset;
            const float y = (static_cast<float>(i1) + m.offset) / m.sf[1] - m.offset;
            const auto fx = static_cast<i64>(std::floor(x)), fy = static_cast<i64>(std::floor(y));
            if (m.mode == scale_mode::bilinear) { // distances to the clamped lower neighbour, clamped to [0, 1]
                const double dx = std::clamp(static_cast<double>(x) - clamped(fx, n0), 0.0, 1.0);
                const double dy = std::clamp(static_cast<double>(y) - clamped(fy, n1), 0.0, 1.0);
                v = cell(fx, fy) * (1 - dx) * (1 - dy) + cell(fx + 1, fy) * dx * (1 - dy) + cell(fx, fy + 1) * (1 - dx) * dy +
                    cell(fx + 1, fy + 1) * dx * dy;
            } else {
                const double dx = static_cast<double>(x) - static_cast<double>(fx), dy = static_cast<double>(y) - static_cast<double>(fy);
                for (i64 ky = -1; ky <= 2; ++ky)
                    for (i64 kx = -1; kx <= 2; ++kx)
                        v += cubic_weight(dx - kx) * cubic_weight(dy - ky) * cell(fx + kx, fy + ky);
            }
        }
        r.at(i0, i1, i2, i3) = v;
    });
    return r;
}

/// pad_reflect_1d: dst[i] = a[i - p0], the index reflected at a's ends (|j|, then
/// 2 (n - 1) - j past the end). roll: dst[i] = a[(i - shift) mod ne] in each dimension.
inline ref_tensor remap(const tensor& node) {
    const tensor& a = *node.src[0];
    const bool reflect = node.op == op_kind::pad_reflect_1d;
    ref_tensor r(node.type, node.ne);
    for_each_index(node.ne, [&](i64 i0, i64 i1, i64 i2, i64 i3) {
        extents j{i0, i1, i2, i3};
        if (reflect) {
            j[0] = std::abs(i0 - node.param<std::int32_t>(0));
            if (j[0] >= a.ne[0]) j[0] = 2 * (a.ne[0] - 1) - j[0];
        } else {
            for (std::size_t d = 0; d < max_dims; ++d) {
                const i64 n = a.ne[d];
                j[d] = (((j[d] - node.param<std::int32_t>(d)) % n) + n) % n;
            }
        }
        r.at(i0, i1, i2, i3) = get(a, j[0], j[1], j[2], j[3]);
    });
    return r;
}

/// arange: start + step * i, the product and the sum each rounded to f32 (ggml's f32
/// arithmetic, which the result's rounding alone would not reproduce).
inline ref_tensor arange(const tensor& node) {
    ref_tensor r(node.type, node.ne);
    const float start = node.param<float>(0), step = node.param<float>(2);
    for (i64 i = 0; i < node.ne[0]; ++i) {
        const auto scaled = static_cast<float>(static_cast<double>(step) * static_cast<double>(i));
        r.at(i) = static_cast<double>(start) + static_cast<double>(scaled);
    }
    return r;
}

/// rope's angles for the rows of token i2 as ggml's cache fills them: one (cos, sin) per
/// pair slot k < ne0 / 2, each of the four position streams stepping its exponent at
/// every slot (vision mode resets a stream where its section starts).
inline std::vector<std::array<double, 2>> rope_cache(const tensor& node, i64 i2) {
    const tensor& a = *node.src[0];
    const tensor& pos = *node.src[1];
    const tensor* ff = node.src[2];
    const auto n_dims = static_cast<double>(node.param<std::int32_t>(0));
    const std::int32_t mode = node.param<std::int32_t>(1);
    const double base = node.param<float>(2), fscale = node.param<float>(3);
    const double ext = node.param<float>(5), attn = node.param<float>(6);
    const bool multi = (mode & 8) != 0, vision = mode == 24, imrope = mode == 40;
    i64 sec[4];
    for (std::size_t i = 0; i < 4; ++i) sec[i] = node.param<std::int32_t>(9 + i);
    const i64 total = sec[0] + sec[1] + sec[2] + sec[3];
    // YaRN's correction dims, in f32 as ggml (floor and ceil of f32 values)
    const auto corr = [&](float beta) {
        return static_cast<float>(n_dims) *
               std::log(static_cast<float>(node.param<std::int32_t>(4)) / (beta * 2.0f * 3.14159265358979323846f)) /
               (2.0f * std::log(node.param<float>(2)));
    };
    const double low = std::max(0.0f, std::floor(corr(node.param<float>(7))));
    const double high = std::min(static_cast<float>(n_dims - 1), std::ceil(corr(node.param<float>(8))));

    double p[4] = {get(pos, i2), 0, 0, 0};
    if (multi)
        for (i64 s = 1; s < 4; ++s) p[s] = get(pos, i2 + s * a.ne[2]);
    double e[4] = {0, 0, 0, 0}; // each stream's exponent
    std::vector<std::array<double, 2>> cache(static_cast<std::size_t>(a.ne[0] / 2));
    for (i64 k = 0; k < a.ne[0] / 2; ++k) {
        int s = 0;
        if (multi) {
            const i64 sector = k % total;
            const i64 start[4] = {0, sec[0], sec[0] + sec[1], sec[0] + sec[1] + sec[2]};
            if (vision) // ggml's chain: the first stream starting at this sector restarts
                for (int x = 0; x < 4; ++x)
                    if (sector == start[x]) {
                        e[x] = 0;
                        break;
                    }
            if (imrope)
                s = sector % 3 == 1 && sector < 3 * sec[1] ? 1 : sector % 3 == 2 && sector < 3 * sec[2] ? 2
                                                           : sector % 3 == 0 && sector < 3 * sec[0] ? 0 : 3;
            else
                s = sector < start[1] ? 0 : sector < start[2] ? 1 : sector < start[3] ? 2 : 3;
        }
        const double extrap = p[s] * std::pow(base, -2.0 * e[s] / n_dims) / (ff && k < ff->ne[0] ? get(*ff, k) : 1.0); // (slots past n_dims are unused)
        const double interp = fscale * extrap;
        double theta = interp, mscale = attn;
        if (ext != 0.0) {
            const double y = (static_cast<double>(k) - low) / std::max(0.001, high - low);
            const double mix = (1.0 - std::min(1.0, std::max(0.0, y))) * ext;
            theta = interp * (1.0 - mix) + extrap * mix;
            mscale *= 1.0 + 0.1 * std::log(1.0 / fscale);
        }
        cache[static_cast<std::size_t>(k)] = {std::cos(theta) * mscale, std::sin(theta) * mscale};
        for (double& x : e) x += 1.0;
    }
    return cache;
}

inline ref_tensor rope(const tensor& node) {
    const tensor& a = *node.src[0];
    const i64 n_dims = node.param<std::int32_t>(0);
    const std::int32_t mode = node.param<std::int32_t>(1);
    ref_tensor r = read(a);
    r.type = node.type;
    const i64 pairs = mode == 24 ? n_dims : n_dims / 2;
    for (i64 i2 = 0; i2 < a.ne[2]; ++i2) {
        const auto cache = rope_cache(node, i2);
        for (i64 i3 = 0; i3 < a.ne[3]; ++i3)
            for (i64 i1 = 0; i1 < a.ne[1]; ++i1)
                for (i64 k = 0; k < pairs; ++k) {
                    const i64 j0 = mode == 0 ? 2 * k : k;
                    const i64 j1 = mode == 0 ? 2 * k + 1 : mode == 24 ? k + n_dims : k + n_dims / 2;
                    const auto [c, sn] = cache[static_cast<std::size_t>(k)];
                    const double x0 = get(a, j0, i1, i2, i3);
                    const double x1 = get(a, j1, i1, i2, i3);
                    r.at(j0, i1, i2, i3) = x0 * c - x1 * sn;
                    r.at(j1, i1, i2, i3) = x0 * sn + x1 * c;
                }
    }
    return r;
}

inline ref_tensor concat(const tensor& node) {
    const tensor& a = *node.src[0];
    const tensor& b = *node.src[1];
    const auto dim = static_cast<std::size_t>(node.param<std::int32_t>(0));
    ref_tensor r(node.type, node.ne);
    for_each_index(node.ne, [&](i64 i0, i64 i1, i64 i2, i64 i3) {
        extents i{i0, i1, i2, i3};
        if (i[dim] < a.ne[dim]) {
            r.at(i0, i1, i2, i3) = get(a, i0, i1, i2, i3);
        } else {
            i[dim] -= a.ne[dim];
            r.at(i0, i1, i2, i3) = get(b, i[0], i[1], i[2], i[3]);
        }
    });
    return r;
}

/// glu: act(x) * g per row; x and g the halves of a's rows (fused, g first when
/// swapped) or a and b (split).
inline double glu_function(glu_op fn, double x, double g, double alpha, double limit) {
    const double pi = std::acos(-1.0);
    switch (fn) {
    case glu_op::reglu: return (x > 0.0 ? x : 0.0) * g;
    case glu_op::geglu: return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / pi) * (x + 0.044715 * x * x * x))) * g;
    case glu_op::swiglu: return x / (1.0 + std::exp(-x)) * g;
    case glu_op::swiglu_oai: {
        const double xc = std::min(x, limit);
        const double gc = std::clamp(g, -limit, limit);
        return xc / (1.0 + std::exp(-alpha * xc)) * (gc + 1.0);
    }
    case glu_op::geglu_erf: return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))) * g;
    case glu_op::geglu_quick: return x / (1.0 + std::exp(-1.702 * x)) * g;
    }
    return std::nan("");
}

inline ref_tensor glu(const tensor& node) {
    const tensor& a = *node.src[0];
    const tensor* b = node.src[1];
    const auto fn = static_cast<glu_op>(node.param<std::int32_t>(0));
    const bool swapped = node.param<std::int32_t>(1) != 0;
    const double alpha = node.param<float>(2);
    const double limit = node.param<float>(3);
    const i64 nc = node.ne[0];
    ref_tensor r(node.type, node.ne);
    for_each_index(node.ne, [&](i64 i0, i64 i1, i64 i2, i64 i3) {
        const double x = b != nullptr ? get(a, i0, i1, i2, i3) : get(a, swapped ? i0 + nc : i0, i1, i2, i3);
        const double g = b != nullptr ? get(*b, i0, i1, i2, i3) : get(a, swapped ? i0 : i0 + nc, i1, i2, i3);
        r.at(i0, i1, i2, i3) = glu_function(fn, x, g, alpha, limit);
    });
    return r;
}

/// dup / cont / cpy: element k of the source (row-major, dim 0 fastest) becomes element k
/// of the destination, then takes the destination's type.
inline ref_tensor copy(const tensor& node) {
    const tensor& a = *node.src[0];
    ref_tensor r(node.type, node.ne);
    i64 k = 0;
    for_each_index(a.ne, [&](i64 i0, i64 i1, i64 i2, i64 i3) {
        r.v[static_cast<std::size_t>(k++)] = get(a, i0, i1, i2, i3);
    });
    return r;
}

} // namespace ref_detail

/// The expected value of `node` computed from its sources' current data, rounded to the
/// node's type (see the header comment). View ops give the viewed values.
inline ref_tensor ref_forward(const tensor& node) {
    ref_tensor r;
    switch (node.op) {
    case op_kind::none:
    case op_kind::view:
    case op_kind::reshape:
    case op_kind::permute:
    case op_kind::transpose:
        return read(node);
    case op_kind::dup:
    case op_kind::cont:
    case op_kind::cpy:
        r = ref_detail::copy(node);
        break;
    case op_kind::add:
    case op_kind::sub:
    case op_kind::mul:
    case op_kind::div:
        r = ref_detail::binary(node);
        break;
    case op_kind::sum_rows:
        r = ref_detail::sum_rows(node);
        break;
    case op_kind::argmax:
        r = ref_detail::argmax(node);
        break;
    case op_kind::mean:
        r = ref_detail::mean(node);
        break;
    case op_kind::sum:
        r = ref_detail::sum(node);
        break;
    case op_kind::argsort:
    case op_kind::top_k:
        r = ref_detail::sort_rows(node);
        break;
    case op_kind::norm:
    case op_kind::rms_norm:
    case op_kind::l2_norm:
        r = ref_detail::norm(node);
        break;
    case op_kind::group_norm:
        r = ref_detail::group_norm(node);
        break;
    case op_kind::repeat:
        r = ref_detail::repeat(node);
        break;
    case op_kind::repeat_back:
        r = ref_detail::repeat_back(node);
        break;
    case op_kind::cumsum:
        r = ref_detail::cumsum(node);
        break;
    case op_kind::tri:
        r = ref_detail::tri(node);
        break;
    case op_kind::diag:
        r = ref_detail::diag(node);
        break;
    case op_kind::timestep_embedding:
        r = ref_detail::timestep_embedding(node);
        break;
    case op_kind::out_prod:
        r = ref_detail::out_prod(node);
        break;
    case op_kind::ssm_conv:
        r = ref_detail::ssm_conv(node);
        break;
    case op_kind::ssm_scan:
        r = ref_detail::ssm_scan(node);
        break;
    case op_kind::gated_linear_attn:
    case op_kind::rwkv_wkv6:
    case op_kind::rwkv_wkv7:
        r = ref_detail::linear_attention(node);
        break;
    case op_kind::count_equal:
        r = ref_detail::count_equal(node);
        break;
    case op_kind::acc:
        r = ref_detail::acc(node);
        break;
    case op_kind::soft_max:
        r = ref_detail::soft_max(node);
        break;
    case op_kind::mul_mat:
        r = ref_detail::mul_mat(node);
        break;
    case op_kind::get_rows:
        r = ref_detail::get_rows(node);
        break;
    case op_kind::rope:
        r = ref_detail::rope(node);
        break;
    case op_kind::concat:
        r = ref_detail::concat(node);
        break;
    case op_kind::glu:
        r = ref_detail::glu(node);
        break;
    case op_kind::set_rows:
        return ref_detail::set_rows(node); // rounded row by row: the rows not written keep their bits
    case op_kind::pad:
        r = ref_detail::pad(node);
        break;
    case op_kind::mul_mat_id:
        r = ref_detail::mul_mat_id(node);
        break;
    case op_kind::add_id:
        r = ref_detail::add_id(node);
        break;
    case op_kind::flash_attn_ext:
        r = ref_detail::flash_attn_ext(node);
        break;
    case op_kind::arange:
        r = ref_detail::arange(node);
        break;
    case op_kind::im2col:
        r = ref_detail::im2col(node);
        break;
    case op_kind::conv_2d:
        r = ref_detail::conv_2d(node);
        break;
    case op_kind::conv_transpose_1d:
    case op_kind::conv_transpose_2d:
        r = ref_detail::conv_transpose(node);
        break;
    case op_kind::conv_2d_dw:
        r = ref_detail::conv_2d_dw(node);
        break;
    case op_kind::win_part:
    case op_kind::win_unpart:
    case op_kind::get_rel_pos:
        r = ref_detail::window(node);
        break;
    case op_kind::pool_1d:
    case op_kind::pool_2d:
        r = ref_detail::pool(node);
        break;
    case op_kind::upscale:
        r = ref_detail::upscale(node);
        break;
    case op_kind::pad_reflect_1d:
    case op_kind::roll:
        r = ref_detail::remap(node);
        break;
    default:
        if (!is_unary_elementwise(node.op)) throw std::logic_error("ref_oracle::ref_forward: unknown op");
        r = ref_detail::unary(node);
        break;
    }
    round_to_type(r);
    return r;
}

// ---------------------------------------------------------------------------------------
// Random data

/// Uniform in [0, 1) from one 32-bit draw: std::mt19937's output is fully specified, the
/// standard distributions are not, so this is the same on every platform.
inline double uniform01(std::mt19937& rng) {
    return static_cast<double>(rng()) * (1.0 / 4294967296.0);
}

/// Every element of t uniform in [lo, hi) (integers lo..hi inclusive for i32 and i64).
/// Quantized tensors get random values quantized block by block.
inline void fill_random(tensor& t, std::mt19937& rng, double lo = -1.0, double hi = 1.0) {
    if (t.type == elem_type::i32 || t.type == elem_type::i64) {
        const auto span =
            static_cast<std::uint32_t>(static_cast<i64>(hi) - static_cast<i64>(lo) + 1);
        for_each_index(t.ne, [&](i64 i0, i64 i1, i64 i2, i64 i3) {
            set(t, i0, i1, i2, i3,
                static_cast<double>(static_cast<i64>(lo) + static_cast<i64>(rng() % span)));
        });
        return;
    }
    if (is_quantized(t.type)) {
        const std::size_t ts = type_size(t.type);
        const i64 bs = block_size(t.type);
        for (i64 i3 = 0; i3 < t.ne[3]; ++i3)
            for (i64 i2 = 0; i2 < t.ne[2]; ++i2)
                for (i64 i1 = 0; i1 < t.ne[1]; ++i1)
                    for (i64 b = 0; b < t.ne[0] / bs; ++b) {
                        float vals[max_block_size];
                        for (i64 i = 0; i < bs; ++i)
                            vals[i] = static_cast<float>(lo + (hi - lo) * uniform01(rng));
                        std::byte block[max_type_size] = {}; // one block of any type (super-blocks too)
                        from_float_row(t.type, vals, block, bs);
                        std::memcpy(static_cast<std::byte*>(t.data) +
                                        t.offset_of(b * bs, i1, i2, i3),
                                    block, ts);
                    }
        return;
    }
    for_each_index(t.ne, [&](i64 i0, i64 i1, i64 i2, i64 i3) {
        set(t, i0, i1, i2, i3, lo + (hi - lo) * uniform01(rng));
    });
}

// ---------------------------------------------------------------------------------------
// Error metrics

/// Normalised mean squared error sum((a - e)^2) / sum(e^2) (ggml's metric); the plain
/// sum of squares when e is all zeros; NaN when any value is NaN; infinite when the
/// shapes differ.
inline double nmse(const ref_tensor& expected, const ref_tensor& actual) {
    if (expected.ne != actual.ne)
        return std::numeric_limits<double>::infinity();
    double err = 0.0, ref = 0.0;
    for (std::size_t i = 0; i < expected.v.size(); ++i) {
        const double d = actual.v[i] - expected.v[i];
        err += d * d;
        ref += expected.v[i] * expected.v[i];
    }
    return ref > 0.0 ? err / ref : err;
}
inline double nmse(const ref_tensor& expected, const tensor& actual) {
    return nmse(expected, read(actual));
}

/// Normalised mean squared error of `actual` against `expected`; infinity on a size
/// mismatch or a non-finite value.
inline double nmse_of(const std::vector<float>& expected, const std::vector<float>& actual) {
    if (expected.size() != actual.size()) return std::numeric_limits<double>::infinity();
    double err = 0.0, ref = 0.0;
    for (std::size_t i = 0; i < expected.size(); ++i) {
        if (!std::isfinite(actual[i])) return std::numeric_limits<double>::infinity();
        const double d = static_cast<double>(actual[i]) - expected[i];
        err += d * d;
        ref += static_cast<double>(expected[i]) * expected[i];
    }
    return ref > 0.0 ? err / ref : err;
}

/// Everything a test wants to know about actual vs expected.
struct comparison {
    double nmse = 0.0;
    double max_abs_err = 0.0;
    /// max |a - e| / (|e| + floor), floor = rel_floor * max|e| (so tiny values near a
    /// cancellation do not dominate)
    double max_rel_err = 0.0;
    i64 mismatches = 0; ///< values not bit-equal
    i64 nans = 0;       ///< NaN in actual where expected has none
    i64 worst = -1;     ///< flat index of the largest relative error
};

inline comparison compare(const ref_tensor& expected, const ref_tensor& actual,
                          double rel_floor = 1e-6) {
    comparison c;
    c.nmse = nmse(expected, actual);
    if (expected.ne != actual.ne) {
        c.mismatches = std::max<i64>(expected.size(), 1);
        return c;
    }
    double emax = 0.0;
    for (double e : expected.v)
        emax = std::max(emax, std::fabs(e));
    const double floor = rel_floor * emax;
    for (std::size_t i = 0; i < expected.v.size(); ++i) {
        const double e = expected.v[i], a = actual.v[i];
        if (std::isnan(a) && !std::isnan(e))
            ++c.nans;
        if (a != e && !(std::isnan(a) && std::isnan(e)))
            ++c.mismatches;
        const double abs_err = std::fabs(a - e);
        const double rel = std::isnan(abs_err)
                               ? std::numeric_limits<double>::infinity()
                               : (abs_err == 0.0 ? 0.0 : abs_err / (std::fabs(e) + floor));
        c.max_abs_err = std::max(c.max_abs_err, abs_err);
        if (rel > c.max_rel_err) {
            c.max_rel_err = rel;
            c.worst = static_cast<i64>(i);
        }
    }
    return c;
}
inline comparison compare(const ref_tensor& expected, const tensor& actual,
                          double rel_floor = 1e-6) {
    return compare(expected, read(actual), rel_floor);
}

/// ggml test-backend-ops' NMSE threshold for a node (the conformance catalogue's).
inline double default_max_nmse(const tensor& node) { return conformance::default_max_nmse(node); }

} // namespace backplane::test
