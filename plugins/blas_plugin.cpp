// The BLAS backend as a plugin: libbackplane-blas.so (one accel device on the host's
// memory, with the BLAS library this plugin links).

#include <backplane/runtime/builtin.hpp>
#include <backplane/runtime/plugin.hpp>

namespace {

int score() { return 10; }

} // namespace

BACKPLANE_PLUGIN("BLAS", backplane::blas_reg, score)
