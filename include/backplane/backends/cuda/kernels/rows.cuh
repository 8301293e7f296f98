#pragma once
// Row-wise kernels (a row is dimension 0): sum_rows, mean, sum, argmax, norm, rms_norm,
// l2_norm, soft_max; and group_norm (a block per group of channels of one sample).
//
// One group of threads per row, a warp for short rows (several rows per block) or the
// whole block for long ones, over a grid-stride loop on the rows. Results follow the CPU
// reference (backends/cpu/kernels/rows.hpp): sums accumulate in double as it does, only
// their order differs; element-wise arithmetic is the CPU's, without contraction.
// Rows of up to 8192 values are held in registers by norm and soft_max (read once).
//
// In place (norm, rms_norm, l2_norm, group_norm, soft_max with dst sharing a's memory and layout): every value
// of a row is written by the thread that read it, after its last read, so no other thread
// reads a value that was overwritten.

#include <backplane/backends/cuda/kernels/common.cuh>
#include <backplane/core/alibi.hpp>
#include <backplane/core/channel_groups.hpp>

#include <climits>
#include <cstdint>

namespace backplane::cuda::kernels {

namespace rows_detail {

/// G threads per row (a warp, or a block of a multiple of 32 up to 1024); K values per
/// thread held in registers (rows up to G * K long), 0: the row is streamed per pass.
template <int G, int K> struct config {
    static_assert(G == 32 || (G % 32 == 0 && G <= 1024), "a row group is a warp or a block");
    static constexpr int group = G;
    static constexpr int per_thread = K;
    static constexpr int rows_per_block = G == 32 ? 8 : 1;
    static constexpr int block = G * rows_per_block;
};

template <elem_type T> inline constexpr i64 elem_bytes = T == elem_type::f32 ? 4 : 2;

/// A value of type T (f32, f16, bf16) at p, as float.
template <elem_type T> __device__ __forceinline__ float ld(const char* p) {
    if constexpr (T == elem_type::f32)
        return *reinterpret_cast<const float*>(p);
    else if constexpr (T == elem_type::f16)
        return f16_bits_to_float(*reinterpret_cast<const std::uint16_t*>(p));
    else
        return bf16_bits_to_float(*reinterpret_cast<const std::uint16_t*>(p));
}

__device__ __forceinline__ void st_f32(char* p, float x) { *reinterpret_cast<float*>(p) = x; }

/// Row r (i1 fastest) of v's rows as (i1, i2, i3).
__device__ __forceinline__ void row_index(const tview& v, i64 r, i64& i1, i64& i2, i64& i3) {
    i1 = r % v.ne[1];
    const i64 t = r / v.ne[1];
    i2 = t % v.ne[2];
    i3 = t / v.ne[2];
}

/// The sum over the row group; every thread of it gets the same value (the butterfly's
/// additions are commutative, so each lane adds the same pairs). sh: 32 doubles.
template <int G> __device__ __forceinline__ double group_sum(double x, double* sh) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
    if constexpr (G > 32) {
        const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32);
        __syncthreads(); // sh may still be read by the previous reduction
        if (lane == 0) sh[warp] = x;
        __syncthreads();
        x = lane < G / 32 ? sh[lane] : 0.0;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
    } else {
        (void)sh;
    }
    return x;
}

/// The maximum over the row group (fmaxf: NaNs lose, as std::fmax on the CPU).
template <int G> __device__ __forceinline__ float group_max(float x, float* sh) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
    if constexpr (G > 32) {
        const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32);
        __syncthreads();
        if (lane == 0) sh[warp] = x;
        __syncthreads();
        x = lane < G / 32 ? sh[lane] : -INFINITY;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
    } else {
        (void)sh;
    }
    return x;
}

/// (v, i) := the larger value, the larger index among equal values (ggml's argmax takes
/// the last maximum); symmetric, so every lane of a butterfly ends with the same pair.
__device__ __forceinline__ void arg_combine(float& v, long long& i, float ov, long long oi) {
    if (ov > v || (ov == v && oi > i)) {
        v = ov;
        i = oi;
    }
}

inline constexpr long long no_index = -1; ///< a thread that saw no value (only NaNs, or none)

template <int G> __device__ __forceinline__ void group_argmax(float& v, long long& i, float* shv, long long* shi) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const float ov = __shfl_xor_sync(0xffffffffu, v, o);
        const long long oi = __shfl_xor_sync(0xffffffffu, i, o);
        arg_combine(v, i, ov, oi);
    }
    if constexpr (G > 32) {
        const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32);
        __syncthreads();
        if (lane == 0) {
            shv[warp] = v;
            shi[warp] = i;
        }
        __syncthreads();
        v = lane < G / 32 ? shv[lane] : -INFINITY;
        i = lane < G / 32 ? shi[lane] : no_index;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            const float ov = __shfl_xor_sync(0xffffffffu, v, o);
            const long long oi = __shfl_xor_sync(0xffffffffu, i, o);
            arg_combine(v, i, ov, oi);
        }
    } else {
        (void)shv;
        (void)shi;
    }
}

/// Calls f(k, i) for the values i of a row that this thread (lane of G) owns: i = lane +
/// k * G for k < K when the row is held in registers, every G-th from lane otherwise.
template <int G, int K, class F> __device__ __forceinline__ void for_row(i64 ne0, int lane, F&& f) {
    if constexpr (K > 0) {
#pragma unroll
        for (int k = 0; k < K; ++k) {
            const i64 i = lane + static_cast<i64>(k) * G;
            if (i < ne0) f(k, i);
        }
    } else {
        for (i64 i = lane; i < ne0; i += G) f(0, i);
    }
}

// -- kernels ----------------------------------------------------------------------------
// Every kernel walks rows r = blockIdx.x * rows_per_block + slot, step gridDim.x *
// rows_per_block: the trip count is uniform over a row group, so its shuffles (and, for a
// block group, its barriers) are reached by all of its threads.

/// sum_rows: d (f32, [1, ne1, ne2, ne3]) = the sum of each row of a (T); mean: that sum
/// in f32 divided by ne0 in f32 (as the CPU). Packed: nb0 is the element size.
template <int G, elem_type T, bool Packed>
__global__ void __launch_bounds__(config<G, 0>::block) sum_rows_kernel(tview a, tview d, bool mean) {
    using C = config<G, 0>;
    __shared__ double sh[32];
    const int lane = static_cast<int>(threadIdx.x % G);
    const int slot = static_cast<int>(threadIdx.x / G);
    const i64 ne0 = a.ne[0];
    const i64 sa = Packed ? elem_bytes<T> : a.nb[0];
    const i64 nrows = a.nrows();
    for (i64 r = static_cast<i64>(blockIdx.x) * C::rows_per_block + slot; r < nrows;
         r += static_cast<i64>(gridDim.x) * C::rows_per_block) {
        i64 i1, i2, i3;
        row_index(a, r, i1, i2, i3);
        const char* pa = a.row(i1, i2, i3);
        double s = 0.0;
        for (i64 i = lane; i < ne0; i += G) s += ld<T>(pa + i * sa);
        s = group_sum<G>(s, sh);
        const auto sum = static_cast<float>(s);
        if (lane == 0) st_f32(d.row(i1, i2, i3), mean ? __fdiv_rn(sum, static_cast<float>(ne0)) : sum);
    }
}

/// sum: d (one element of a's type) = the sum of every element of a, in double, rounded
/// to f32 and then to d's type (as the CPU). One block strides over every element.
template <int G>
__global__ void __launch_bounds__(G) sum_kernel(tview a, tview d) {
    __shared__ double sh[32];
    const i64 n = a.nelements();
    double s = 0.0;
    for (i64 i = threadIdx.x; i < n; i += G) {
        i64 i0, i1, i2, i3;
        unravel(i, a.ne, i0, i1, i2, i3);
        s += load(a, i0, i1, i2, i3);
    }
    s = group_sum<G>(s, sh);
    if (threadIdx.x == 0) store(d, 0, 0, 0, 0, static_cast<float>(s));
}

/// argmax: d (i32, [ne1, ne2, ne3]) = the index of the largest value of each row of a,
/// the last one on ties (as ggml); NaNs never win, a row of NaNs gives 0.
template <int G, elem_type T, bool Packed>
__global__ void __launch_bounds__(config<G, 0>::block) argmax_kernel(tview a, tview d) {
    using C = config<G, 0>;
    __shared__ float shv[32];
    __shared__ long long shi[32];
    const int lane = static_cast<int>(threadIdx.x % G);
    const int slot = static_cast<int>(threadIdx.x / G);
    const i64 ne0 = a.ne[0];
    const i64 sa = Packed ? elem_bytes<T> : a.nb[0];
    const i64 nrows = a.nrows();
    for (i64 r = static_cast<i64>(blockIdx.x) * C::rows_per_block + slot; r < nrows;
         r += static_cast<i64>(gridDim.x) * C::rows_per_block) {
        i64 i1, i2, i3;
        row_index(a, r, i1, i2, i3);
        const char* pa = a.row(i1, i2, i3);
        // increasing indices per thread with >=: its last maximum
        float best = -INFINITY;
        long long best_i = no_index;
        for (i64 i = lane; i < ne0; i += G) {
            const float v = ld<T>(pa + i * sa);
            if (v >= best) {
                best = v;
                best_i = i;
            }
        }
        group_argmax<G>(best, best_i, shv, shi);
        if (lane == 0) {
            // the result's element (i1, i2, i3) sits in its dims 0, 1, 2
            char* pd = d.data + i1 * d.nb[0] + i2 * d.nb[1] + i3 * d.nb[2];
            *reinterpret_cast<std::int32_t*>(pd) = static_cast<std::int32_t>(best_i == no_index ? 0 : best_i);
        }
    }
}

/// Which norm a row gets: norm_kernel's formula.
enum class norm_kind : int { centred, rms, l2 };

/// The factor scaling n values whose squared deviations sum to s2 (the CPU's norm_scale).
__device__ __forceinline__ double norm_scale(norm_kind kind, double s2, i64 n, float eps) {
    if (kind == norm_kind::l2) return 1.0 / fmax(sqrt(s2), static_cast<double>(eps));
    return 1.0 / sqrt(s2 / static_cast<double>(n) + static_cast<double>(eps));
}

/// norm (centred): (x - mean) / sqrt(var + eps); rms_norm: x / sqrt(mean(x^2) + eps);
/// l2_norm: x / max(sqrt(sum(x^2)), eps). f32, in double as the CPU: mean, then the sum
/// of squared deviations, then the scaling.
template <int G, int K, bool Packed>
__global__ void __launch_bounds__(config<G, K>::block) norm_kernel(tview a, tview d, float eps, norm_kind kind) {
    using C = config<G, K>;
    __shared__ double sh[32];
    const int lane = static_cast<int>(threadIdx.x % G);
    const int slot = static_cast<int>(threadIdx.x / G);
    const i64 ne0 = a.ne[0];
    const i64 sa = Packed ? 4 : a.nb[0];
    const i64 sd = d.nb[0];
    const i64 nrows = a.nrows();
    for (i64 r = static_cast<i64>(blockIdx.x) * C::rows_per_block + slot; r < nrows;
         r += static_cast<i64>(gridDim.x) * C::rows_per_block) {
        i64 i1, i2, i3;
        row_index(a, r, i1, i2, i3);
        const char* pa = a.row(i1, i2, i3);
        char* pd = d.row(i1, i2, i3);
        float v[K > 0 ? K : 1] = {};
        if constexpr (K > 0) for_row<G, K>(ne0, lane, [&](int k, i64 i) { v[k] = ld<elem_type::f32>(pa + i * sa); });
        auto x = [&](int k, i64 i) {
            if constexpr (K > 0) {
                (void)i;
                return v[k];
            } else {
                (void)k;
                return ld<elem_type::f32>(pa + i * sa);
            }
        };
        double mean = 0.0;
        if (kind == norm_kind::centred) {
            double s = 0.0;
            for_row<G, K>(ne0, lane, [&](int k, i64 i) { s += x(k, i); });
            mean = group_sum<G>(s, sh) / static_cast<double>(ne0);
        }
        double s2 = 0.0;
        for_row<G, K>(ne0, lane, [&](int k, i64 i) {
            const double c = static_cast<double>(x(k, i)) - mean;
            s2 += __dmul_rn(c, c);
        });
        const double inv = norm_scale(kind, group_sum<G>(s2, sh), ne0, eps);
        for_row<G, K>(ne0, lane, [&](int k, i64 i) {
            st_f32(pd + i * sd, static_cast<float>((static_cast<double>(x(k, i)) - mean) * inv));
        });
    }
}

/// Calls f(pa, pd) for the values of channels [c0, c1) of sample i3 that thread `lane` of
/// G owns (every G-th, dimension 0 fastest).
template <int G, class F>
__device__ __forceinline__ void for_group(const tview& a, const tview& d, i64 c0, i64 c1, i64 i3, int lane, F&& f) {
    const i64 n = a.ne[0] * a.ne[1] * (c1 - c0);
    for (i64 e = lane; e < n; e += G) {
        const i64 i0 = e % a.ne[0], r = e / a.ne[0];
        const i64 i1 = r % a.ne[1], i2 = c0 + r / a.ne[1];
        f(a.row(i1, i2, i3) + i0 * a.nb[0], d.row(i1, i2, i3) + i0 * d.nb[0]);
    }
}

/// group_norm: a block of G threads per (group, sample) unit, over a grid-stride loop;
/// norm's formula over the group's values, in double as the CPU.
template <int G>
__global__ void __launch_bounds__(G) group_norm_kernel(tview a, tview d, channel_groups groups, float eps) {
    __shared__ double sh[32];
    const int lane = static_cast<int>(threadIdx.x);
    for (i64 u = blockIdx.x; u < groups.count * a.ne[3]; u += gridDim.x) {
        const i64 c0 = groups.first(u % groups.count), c1 = groups.end(u % groups.count), i3 = u / groups.count;
        const i64 n = a.ne[0] * a.ne[1] * (c1 - c0);
        double s = 0.0;
        for_group<G>(a, d, c0, c1, i3, lane, [&](const char* pa, char*) { s += ld<elem_type::f32>(pa); });
        const double mean = group_sum<G>(s, sh) / static_cast<double>(n);
        double s2 = 0.0;
        for_group<G>(a, d, c0, c1, i3, lane, [&](const char* pa, char*) {
            const double c = static_cast<double>(ld<elem_type::f32>(pa)) - mean;
            s2 += __dmul_rn(c, c);
        });
        const double inv = norm_scale(norm_kind::centred, group_sum<G>(s2, sh), n, eps);
        for_group<G>(a, d, c0, c1, i3, lane, [&](const char* pa, char* pd) {
            st_f32(pd, static_cast<float>((static_cast<double>(ld<elem_type::f32>(pa)) - mean) * inv));
        });
    }
}

/// soft_max: softmax(a * scale + slope * mask) per row, f32; M: the mask's type (none:
/// f32 with has_mask false); slope ALiBi's for head i2 (alibi::slope, 1 without
/// max_bias); sinks (optional, data null without) one f32 per head. The mask row is (i1,
/// i2 % m.ne2, i3 % m.ne3). The CPU's steps: the logits in f32 (x * scale, then + slope *
/// mask), their maximum (and the sink's), e = exp(logit - max) in f32 summed in double
/// (plus exp(sink - max)), e * f32(1 / sum); a row whose every logit is -inf, without a
/// sink, becomes zeros.
template <int G, int K, bool Packed, bool HasMask, elem_type M>
__global__ void __launch_bounds__(config<G, K>::block)
    soft_max_kernel(tview a, tview m, tview sinks, tview d, float scale, float max_bias) {
    using C = config<G, K>;
    __shared__ double shd[32];
    __shared__ float shf[32];
    const int lane = static_cast<int>(threadIdx.x % G);
    const int slot = static_cast<int>(threadIdx.x / G);
    const i64 ne0 = a.ne[0];
    const i64 sa = Packed ? 4 : a.nb[0];
    const i64 sm = m.nb[0];
    const i64 sd = d.nb[0];
    const i64 nrows = a.nrows();
    for (i64 r = static_cast<i64>(blockIdx.x) * C::rows_per_block + slot; r < nrows;
         r += static_cast<i64>(gridDim.x) * C::rows_per_block) {
        i64 i1, i2, i3;
        row_index(a, r, i1, i2, i3);
        const char* pa = a.row(i1, i2, i3);
        char* pd = d.row(i1, i2, i3);
        const char* pm = nullptr;
        float slope = 1.0f;
        if constexpr (HasMask) {
            pm = m.row(i1, i2 % m.ne[2], i3 % m.ne[3]);
            slope = alibi::slope(max_bias, static_cast<int>(a.ne[2]), static_cast<int>(i2));
        }
        auto logit = [&](i64 i) {
            float l = __fmul_rn(ld<elem_type::f32>(pa + i * sa), scale);
            if constexpr (HasMask) l = __fadd_rn(l, __fmul_rn(slope, ld<M>(pm + i * sm)));
            return l;
        };
        const float sink = sinks.data ? *reinterpret_cast<const float*>(sinks.data + i2 * sinks.nb[0]) : -INFINITY;

        float v[K > 0 ? K : 1] = {};
        float mx = -INFINITY;
        for_row<G, K>(ne0, lane, [&](int k, i64 i) {
            const float l = logit(i);
            if constexpr (K > 0) v[k] = l;
            else (void)k;
            mx = fmaxf(mx, l);
        });
        mx = fmaxf(group_max<G>(mx, shf), sink);
        if (mx == -INFINITY) { // every position masked, no sink: no mass anywhere
            for_row<G, K>(ne0, lane, [&](int, i64 i) { st_f32(pd + i * sd, 0.0f); });
            continue;
        }

        double s = 0.0;
        for_row<G, K>(ne0, lane, [&](int k, i64 i) {
            if constexpr (K > 0) {
                const float e = expf(v[k] - mx);
                v[k] = e;
                s += e;
            } else {
                (void)k;
                const float e = expf(logit(i) - mx);
                st_f32(pd + i * sd, e); // read back by this thread below
                s += e;
            }
        });
        s = group_sum<G>(s, shd);
        if (sinks.data) s += expf(sink - mx);
        const auto inv = static_cast<float>(1.0 / s);
        for_row<G, K>(ne0, lane, [&](int k, i64 i) {
            float e;
            if constexpr (K > 0) e = v[k];
            else {
                (void)k;
                e = *reinterpret_cast<const float*>(pd + i * sd);
            }
            st_f32(pd + i * sd, __fmul_rn(e, inv));
        });
    }
}

// -- launches ---------------------------------------------------------------------------

/// Calls f(config) with the streaming configuration for rows of ne0 values.
template <class F> inline cudaError_t with_stream_config(i64 ne0, F&& f) {
    if (ne0 <= 256) return f(config<32, 0>{});
    if (ne0 <= 4096) return f(config<256, 0>{});
    return f(config<1024, 0>{});
}

/// Calls f(config) with the configuration for rows of ne0 values held in registers
/// where they fit (up to 8192), streamed otherwise.
template <class F> inline cudaError_t with_cached_config(i64 ne0, F&& f) {
    if (ne0 <= 128) return f(config<32, 4>{});
    if (ne0 <= 1024) return f(config<128, 8>{});
    if (ne0 <= 4096) return f(config<512, 8>{});
    if (ne0 <= 8192) return f(config<1024, 8>{});
    return f(config<1024, 0>{});
}

/// Calls f(tag) with T the element type of a float source (f32, f16 or bf16).
template <elem_type T> struct type_tag {
    static constexpr elem_type value = T;
};
template <class F> inline cudaError_t with_float_type(elem_type t, F&& f) {
    switch (t) {
    case elem_type::f32: return f(type_tag<elem_type::f32>{});
    case elem_type::f16: return f(type_tag<elem_type::f16>{});
    case elem_type::bf16: return f(type_tag<elem_type::bf16>{});
    default: return cudaErrorNotSupported;
    }
}

inline cudaError_t launch_sum_rows(const tview& a, const tview& d, bool mean, cudaStream_t stream) {
    const bool packed = a.nb[0] == (a.type == elem_type::f32 ? 4 : 2);
    return with_float_type(a.type, [&]<class Tag>(Tag) {
        return with_stream_config(a.ne[0], [&]<class C>(C) {
            const unsigned blocks = blocks_for(a.nrows(), C::rows_per_block);
            if (packed)
                sum_rows_kernel<C::group, Tag::value, true><<<blocks, C::block, 0, stream>>>(a, d, mean);
            else
                sum_rows_kernel<C::group, Tag::value, false><<<blocks, C::block, 0, stream>>>(a, d, mean);
            return cudaGetLastError();
        });
    });
}

inline cudaError_t launch_argmax(const tview& a, const tview& d, cudaStream_t stream) {
    const bool packed = a.nb[0] == (a.type == elem_type::f32 ? 4 : 2);
    return with_float_type(a.type, [&]<class Tag>(Tag) {
        return with_stream_config(a.ne[0], [&]<class C>(C) {
            const unsigned blocks = blocks_for(a.nrows(), C::rows_per_block);
            if (packed)
                argmax_kernel<C::group, Tag::value, true><<<blocks, C::block, 0, stream>>>(a, d);
            else
                argmax_kernel<C::group, Tag::value, false><<<blocks, C::block, 0, stream>>>(a, d);
            return cudaGetLastError();
        });
    });
}

inline cudaError_t launch_norm(const tview& a, const tview& d, float eps, norm_kind kind, cudaStream_t stream) {
    if (a.type != elem_type::f32 || d.type != elem_type::f32) return cudaErrorNotSupported;
    const bool packed = a.nb[0] == 4;
    return with_cached_config(a.ne[0], [&]<class C>(C) {
        const unsigned blocks = blocks_for(a.nrows(), C::rows_per_block);
        if (packed)
            norm_kernel<C::group, C::per_thread, true><<<blocks, C::block, 0, stream>>>(a, d, eps, kind);
        else
            norm_kernel<C::group, C::per_thread, false><<<blocks, C::block, 0, stream>>>(a, d, eps, kind);
        return cudaGetLastError();
    });
}

inline cudaError_t launch_group_norm(const tview& a, const tview& d, std::int32_t n_groups, float eps,
                                     cudaStream_t stream) {
    if (a.type != elem_type::f32 || d.type != elem_type::f32) return cudaErrorNotSupported;
    const channel_groups groups = channel_groups_of(a.ne[2], n_groups);
    group_norm_kernel<256><<<blocks_for(groups.count * a.ne[3], 1), 256, 0, stream>>>(a, d, groups, eps);
    return cudaGetLastError();
}

template <bool HasMask, elem_type M>
inline cudaError_t launch_soft_max_as(const tview& a, const tview& m, const tview& sinks, const tview& d,
                                      float scale, float max_bias, cudaStream_t stream) {
    const bool packed = a.nb[0] == 4;
    return with_cached_config(a.ne[0], [&]<class C>(C) {
        const unsigned blocks = blocks_for(a.nrows(), C::rows_per_block);
        if (packed)
            soft_max_kernel<C::group, C::per_thread, true, HasMask, M>
                <<<blocks, C::block, 0, stream>>>(a, m, sinks, d, scale, max_bias);
        else
            soft_max_kernel<C::group, C::per_thread, false, HasMask, M>
                <<<blocks, C::block, 0, stream>>>(a, m, sinks, d, scale, max_bias);
        return cudaGetLastError();
    });
}

} // namespace rows_detail

/// sum_rows and mean (f32/f16/bf16 -> f32), sum (f32/f16/bf16 -> the same type, one
/// element), argmax (f32/f16/bf16 -> i32), norm, rms_norm and l2_norm (f32, eps in param
/// 0), group_norm (f32; n_groups, eps), any strides.
inline cudaError_t launch_rows(const tensor& node, const detail::launch_context& ctx) noexcept {
    const tensor* src = node.src[0];
    if (src == nullptr) return cudaErrorInvalidValue;
    if (node.nelements() == 0) return cudaSuccess; // (a's rows may be empty: sum_rows writes 0)
    const tview a = view_of(*src);
    const tview d = view_of(node);
    switch (node.op) {
    case op_kind::sum_rows: return rows_detail::launch_sum_rows(a, d, false, ctx.stream);
    case op_kind::mean: return rows_detail::launch_sum_rows(a, d, true, ctx.stream);
    case op_kind::sum:
        rows_detail::sum_kernel<1024><<<1, 1024, 0, ctx.stream>>>(a, d);
        return cudaGetLastError();
    case op_kind::argmax: return rows_detail::launch_argmax(a, d, ctx.stream);
    case op_kind::norm: return rows_detail::launch_norm(a, d, node.param<float>(0), rows_detail::norm_kind::centred, ctx.stream);
    case op_kind::rms_norm: return rows_detail::launch_norm(a, d, node.param<float>(0), rows_detail::norm_kind::rms, ctx.stream);
    case op_kind::l2_norm: return rows_detail::launch_norm(a, d, node.param<float>(0), rows_detail::norm_kind::l2, ctx.stream);
    case op_kind::group_norm:
        return rows_detail::launch_group_norm(a, d, node.param<std::int32_t>(0), node.param<float>(1), ctx.stream);
    default: return cudaErrorNotSupported;
    }
}

/// soft_max of f32 rows, scale and max_bias in params 0 and 1, optional f32 or f16 mask
/// (src[1]) of a's row length with rows i1 for a's rows i1, broadcast over dims 2 and 3,
/// optional f32 sinks (src[2]); any strides.
inline cudaError_t launch_soft_max(const tensor& node, const detail::launch_context& ctx) noexcept {
    const tensor* src = node.src[0];
    if (src == nullptr) return cudaErrorInvalidValue;
    if (node.nelements() == 0) return cudaSuccess;
    const tview a = view_of(*src);
    const tview d = view_of(node);
    if (a.type != elem_type::f32 || d.type != elem_type::f32) return cudaErrorNotSupported;
    const float scale = node.param<float>(0);
    const float max_bias = node.param<float>(1);
    const tview sinks = node.src[2] ? view_of(*node.src[2]) : tview{};
    const tensor* mask = node.src[1];
    if (mask == nullptr)
        return rows_detail::launch_soft_max_as<false, elem_type::f32>(a, tview{}, sinks, d, scale, max_bias, ctx.stream);
    const tview m = view_of(*mask);
    switch (m.type) {
    case elem_type::f32:
        return rows_detail::launch_soft_max_as<true, elem_type::f32>(a, m, sinks, d, scale, max_bias, ctx.stream);
    case elem_type::f16:
        return rows_detail::launch_soft_max_as<true, elem_type::f16>(a, m, sinks, d, scale, max_bias, ctx.stream);
    default: return cudaErrorNotSupported;
    }
}

} // namespace backplane::cuda::kernels
