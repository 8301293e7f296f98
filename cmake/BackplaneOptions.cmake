# User-facing options. Tests, examples and benchmarks are only built by default
# when backplane is the top-level project, so add_subdirectory()/FetchContent
# users do not pay for them.
include_guard(GLOBAL)

option(BACKPLANE_BUILD_TESTS "Build the backplane tests" ${PROJECT_IS_TOP_LEVEL})
option(BACKPLANE_BUILD_EXAMPLES "Build the backplane examples" ${PROJECT_IS_TOP_LEVEL})
option(BACKPLANE_BUILD_BENCHMARKS "Build the backplane benchmarks" ${PROJECT_IS_TOP_LEVEL})
option(BACKPLANE_HEADER_CHECK
    "With the tests: check that every public header compiles on its own (ctest header_self_containment)" ON)
option(BACKPLANE_UNITY_TESTS
    "Compile each test program, and the CPU benchmark program, as one translation unit (a full build is several times faster; off: one object per source file)" ON)
option(BACKPLANE_BUILD_PLUGINS "Build the enabled backends as plugins (libbackplane-<name>.so)" ${PROJECT_IS_TOP_LEVEL})

# Optional backends are tri-state: AUTO enables a backend when its dependency is
# found, ON makes the dependency required, OFF skips it without looking.
# MPI is not a backend but a component of the same kind: backplane::mpi (processes that
# compute one graph together, docs/distributed.md).
foreach(backend IN ITEMS BLAS VULKAN CUDA MPI)
    set(BACKPLANE_WITH_${backend} AUTO CACHE STRING
        "Build the ${backend} component target (AUTO: if its dependency is found; ON; OFF)")
    set_property(CACHE BACKPLANE_WITH_${backend} PROPERTY STRINGS AUTO ON OFF)
    string(TOUPPER "${BACKPLANE_WITH_${backend}}" _value)
    if(NOT _value MATCHES "^(AUTO|ON|OFF)$")
        message(FATAL_ERROR
            "BACKPLANE_WITH_${backend} is '${BACKPLANE_WITH_${backend}}'; use AUTO, ON or OFF")
    endif()
endforeach()
unset(_value)

# Comma-separated -fsanitize= list applied to our own tests and examples only
# (never to the exported library target), e.g. "address,undefined".
set(BACKPLANE_SANITIZE "" CACHE STRING
    "Sanitizers for backplane's own tests/examples, e.g. address,undefined (empty: none)")
# Comma-separated -fno-sanitize= list: checks of those sanitizers left out, e.g. "vptr,null"
# (the asan preset: docs/testing.md, "Build time").
set(BACKPLANE_NO_SANITIZE "" CACHE STRING
    "Checks of BACKPLANE_SANITIZE to leave out, e.g. vptr,null (empty: none)")

# A build tree of the same sources whose Vulkan kernel library (the compiled shaders) this
# tree uses instead of compiling them again (cmake/BackplaneShaders.cmake); scripts/test
# points the asan preset at the default one. Empty: compile them here.
set(BACKPLANE_VULKAN_KERNELS_FROM "" CACHE PATH
    "Build tree whose Vulkan kernel library to use instead of compiling the shaders here (empty: compile them)")
