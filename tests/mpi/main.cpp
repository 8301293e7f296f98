// The main of the MPI test programs: MPI is initialized before Catch2 runs and every rank
// runs the same test cases in the same order (their collectives must match). Each rank
// reports its own failures; mpirun's status is non-zero when any rank's is.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <backplane/mpi/environment.hpp>

#include <cstdio>

int main(int argc, char** argv) {
    auto env = backplane::mpi::environment::init(&argc, &argv);
    if (!env) {
        std::fprintf(stderr, "%s\n", env.error().describe().c_str());
        return 1;
    }
    return Catch::Session().run(argc, argv);
}
