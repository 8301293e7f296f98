// The CUDA backend as a plugin: libbackplane-cuda.so. Its registry entry is the one a
// program with CUDA compiled in gets (cuda_reg: one device per GPU); its score is 0 (not
// loaded) on a machine without an NVIDIA driver or GPU.

#include <backplane/runtime/builtin.hpp>
#include <backplane/runtime/plugin.hpp>

namespace {

int score() {
    auto devices = backplane::cuda::physical_devices();
    return devices && !devices->empty() ? 100 : 0;
}

} // namespace

BACKPLANE_PLUGIN("CUDA", backplane::cuda_reg, score)
