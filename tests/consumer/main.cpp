// Compiled against the installed backplane package (see CMakeLists.txt here): builds a
// small graph, computes it on the CPU backend and checks the result, so the installed
// headers, the package config and its dependencies are all exercised.
#include <backplane/backplane.hpp>
#if defined(BACKPLANE_WITH_MPI)
#include <backplane/mpi/communicator.hpp> // <mpi.h> through backplane::mpi's include folders
#endif

#include <cmath>
#include <cstdio>
#include <vector>

int main() {
    using namespace backplane;
    context ctx; // with host data
    tensor* a = ctx.new_tensor(elem_type::f32, {3, 2});
    tensor* b = ctx.new_tensor(elem_type::f32, {3, 1});
    tensor_set(*a, std::vector<float>{1, 2, 3, 4, 5, 6}).throw_if_failed();
    tensor_set(*b, std::vector<float>{10, 20, 30}).throw_if_failed();
    tensor* s = sum_rows(ctx, add(ctx, a, b)); // [1, 2]: 66 and 75
    graph g(s);

    cpu_backend cpu;
    if (status st = cpu.compute(g); !st) {
        std::fprintf(stderr, "consumer: compute failed: %s\n", st.describe().c_str());
        return 1;
    }
    const auto out = tensor_get_all<float>(*s).value();
    if (out.size() != 2 || std::fabs(out[0] - 66.0f) > 1e-5f || std::fabs(out[1] - 75.0f) > 1e-5f) {
        std::fprintf(stderr, "consumer: wrong result\n");
        return 1;
    }
#if defined(BACKPLANE_WITH_MPI)
    if (mpi::communicator::world().ok()) { // MPI is not initialized: refused, not crashed
        std::fprintf(stderr, "consumer: a communicator without MPI_Init\n");
        return 1;
    }
#endif
    std::printf("consumer: ok\n");
    return 0;
}
