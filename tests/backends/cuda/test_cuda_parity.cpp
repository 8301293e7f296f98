// The CUDA backend against the CPU backend's reference kernels: the parity cases
// (tests/conformance/parity_cases.hpp) on device 0 with mul_mat through cuBLAS (when the
// kernels were built with it) and with the own kernels only, each computing a host-memory
// graph relocated into one device buffer (tests/support/device_mirror.hpp). Each target
// computes the graph three times: when the buffer comes back at the same address (as
// cudaMalloc tends to give it), the second compute captures a CUDA graph and the third
// replays it; the last results are compared.
//
// The CUDA backend claims every combination the CPU computes but quantization into q8_K
// (the K-quants' activation type; a copy of q8_K into itself is claimed), iq4_xs, tq1_0
// and tq2_0, and any reading of the lattice i-quants iq3_xxs ... iq1_m (their copies into
// themselves and concat are claimed). Without a GPU each case still
// checks that claim (supports_op is host code), then warns that it skipped the run.

#include <backplane/backends/cuda.hpp>

#include "../../support/device_mirror.hpp"
#include "../../support/parity_targets.hpp"

#include <memory>
#include <string>
#include <string_view>

struct cuda_targets {
    static constexpr std::string_view backend = "CUDA";
    // The op table's counts (parity_targets.hpp) narrowed to the types CUDA computes.
    static constexpr auto expected = parity::narrowed(
        parity::op_table_combinations,
        {{"copy", 26 * 15 + 11 + 2 + 28}, // cpy from f32 f16 bf16, the 13 quantized types, iq4_xs tq1_0 tq2_0 and
                                           // the 7 lattice i-quants into f32 f16 bf16 and the 12 quantized types but
                                           // q8_K; q8_K, iq4_xs, tq1_0, tq2_0 and the lattice i-quants into
                                           // themselves, i32 -> i32, i64 -> i64; dup / cont of each type
         {"mul_mat", 26 * 3},              // f32 f16 bf16 and the 23 quantized types x f32 f16 bf16
         {"get_rows", 26 + 1},             // those 26 types and i32 rows
         {"set_rows", 15 * 3 * 2},         // into f32 f16 bf16 and the 12 quantized types but q8_K
         {"mul_mat_id", 26 * 3},           // as mul_mat
         {"out_prod", 1 + 22}});           // a f32 and every quantized type but q8_K
    static bool claims(const backplane::tensor& t) { return backplane::cuda::supports_op(t); }

    /// Device 0 with cuBLAS (when built in) and without; none, and why, without a GPU.
    static parity::target_list targets() {
        using namespace backplane;
        auto dev = cuda_device::open({.index = 0});
        if (!dev)
            return {{}, "no usable CUDA device: " + dev.error().describe()};
        parity::target_list list;
        for (const bool cublas : {true, false}) {
            if (cublas && !cuda::detail::kernel_table_instance().with_cublas)
                continue;
            auto be = dev->make_backend({.cublas = cublas, .cuda_graphs = true});
            if (!be)
                return {{}, "no CUDA backend on " + std::string(dev->name()) + ": " + be.error().describe()};
            auto state = std::make_shared<cuda_backend>(std::move(*be));
            list.targets.push_back({std::string(dev->name()) + (cublas ? " cuBLAS" : " own kernels"),
                                    [state](const tensor& t) { return state->supports_op(t); },
                                    [state](graph& g) {
                                        for (int run = 0; run < 2; ++run)
                                            if (status s = test::compute_on_device(*state, g); !s)
                                                return s;
                                        return test::compute_on_device(*state, g);
                                    }});
        }
        return list;
    }
};

#define BACKPLANE_PARITY_PROVIDERS cuda_targets
#include "../../conformance/parity_cases.hpp"
