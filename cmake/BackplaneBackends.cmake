# One INTERFACE target per enabled optional backend. Each carries backplane plus
# the vendor library, so linking backplane::vulkan is all a user needs and the
# core target never drags a vendor header or library into a program.
include_guard(GLOBAL)

# Lower-case component names of the enabled backends, in a fixed order; also
# used by the install rules and the package config.
set(BACKPLANE_COMPONENTS "")

# backplane_add_backend_target(<component> <BACKEND> <vendor targets...>)
function(backplane_add_backend_target component backend)
    if(NOT BACKPLANE_HAS_${backend})
        return()
    endif()
    add_library(backplane_${component} INTERFACE)
    add_library(backplane::${component} ALIAS backplane_${component})
    # Installed as backplane::<component>, matching the alias in the build tree.
    set_target_properties(backplane_${component} PROPERTIES EXPORT_NAME ${component})
    target_link_libraries(backplane_${component} INTERFACE backplane ${ARGN})
    # Tells <backplane/runtime.hpp> to register the backend as a compiled-in one.
    target_compile_definitions(backplane_${component} INTERFACE BACKPLANE_WITH_${backend}=1)
    set(BACKPLANE_COMPONENTS ${BACKPLANE_COMPONENTS} ${component} PARENT_SCOPE)
endfunction()

# BLAS links the library files FindBLAS chose (absolute paths) rather than BLAS::BLAS:
# an installed package then links the same library whose cblas.h it was built against,
# even where a consumer's own find_package(BLAS) would pick another vendor.
backplane_add_backend_target(blas BLAS ${BACKPLANE_BLAS_LIBRARIES})
if(TARGET backplane_blas)
    # SYSTEM: a vendor header, not ours to keep free of warnings.
    target_include_directories(backplane_blas SYSTEM INTERFACE "${BACKPLANE_BLAS_INCLUDE_DIR}")
    if(BACKPLANE_BLAS_DEFINITIONS)
        target_compile_definitions(backplane_blas INTERFACE ${BACKPLANE_BLAS_DEFINITIONS})
    endif()
    if(BACKPLANE_BLAS_LINKER_FLAGS)
        target_link_options(backplane_blas INTERFACE ${BACKPLANE_BLAS_LINKER_FLAGS})
    endif()
endif()
backplane_add_backend_target(vulkan VULKAN Vulkan::Vulkan)
if(TARGET backplane_vulkan)
    # The compute shaders, compiled to SPIR-V at build time into the kernel library
    # backplane::vulkan_kernels (cmake/BackplaneShaders.cmake), which the backend
    # links: <backplane/backends/vulkan/spirv.hpp> declares what it defines.
    include(BackplaneShaders)
    backplane_add_vulkan_shaders(backplane_vulkan_kernels
        SHADER_DIR "${PROJECT_SOURCE_DIR}/include/backplane/backends/vulkan/shaders"
        OUTPUT_DIR "${PROJECT_BINARY_DIR}/vulkan_spirv"
        EXPORT_NAME vulkan_kernels)
    target_link_libraries(backplane_vulkan INTERFACE backplane_vulkan_kernels)
endif()
# CUDA: the host code is header-only; the kernels (kernels.cuh) are compiled once by nvcc
# into a static library that backplane::cuda links, with the CUDA runtime (shared, the
# same one CUDA::cudart is) and cuBLAS when BACKPLANE_CUDA_CUBLAS (default ON) finds it.
if(BACKPLANE_HAS_CUDA)
    include(BackplaneCuda)
endif()
backplane_add_backend_target(cuda CUDA CUDA::cudart)
if(TARGET backplane_cuda)
    target_link_libraries(backplane_cuda INTERFACE backplane_cuda_kernels)
    if(BACKPLANE_CUDA_HAS_NCCL)
        target_include_directories(backplane_cuda SYSTEM INTERFACE "${BACKPLANE_NCCL_INCLUDE_DIR}")
        target_link_libraries(backplane_cuda INTERFACE "${BACKPLANE_NCCL_LIBRARY}")
        target_compile_definitions(backplane_cuda INTERFACE BACKPLANE_CUDA_NCCL=1)
    endif()
endif()

# MPI: processes that compute one graph together (include/backplane/mpi/); not a backend.
backplane_add_backend_target(mpi MPI MPI::MPI_CXX)

set(_bp_summary "")
foreach(component IN ITEMS blas vulkan cuda mpi)
    if(component IN_LIST BACKPLANE_COMPONENTS)
        string(APPEND _bp_summary " ${component}=ON")
    else()
        string(APPEND _bp_summary " ${component}=OFF")
    endif()
endforeach()
message(STATUS "backplane ${PROJECT_VERSION} components: cpu=ON${_bp_summary}")
unset(_bp_summary)

# backplane_link_enabled_backends(<target>): links every optional backend this build has
# (backplane::blas, ::vulkan, ::cuda; not ::mpi, which is no backend), so the program
# compiles them in (BACKPLANE_WITH_*) and the registry lists them. For the examples and
# tools that run on whatever is there. Not ::cuda when its kernels are compiled only to
# check them (BACKPLANE_CUDA_CHECK_ONLY: nothing could run them): loading cuBLAS costs
# every process 0.35 s, and the test command starts such programs a few hundred times.
function(backplane_link_enabled_backends target)
    foreach(component IN LISTS BACKPLANE_COMPONENTS)
        if(component STREQUAL "mpi" OR (component STREQUAL "cuda" AND BACKPLANE_CUDA_CHECK_ONLY))
            continue()
        endif()
        target_link_libraries(${target} PRIVATE backplane::${component})
    endforeach()
endfunction()

# backplane_mpirun_command(<var>): the command that starts N ranks of a program on this
# machine, up to the rank count: mpiexec, and for Open MPI's mpirun the flags that let it
# run more ranks than cores, as root, and over shared memory without the ptrace-based
# single copy (not allowed in many containers). Append: -np <N> <program> [args...].
function(backplane_mpirun_command var)
    set(cmd "${MPIEXEC_EXECUTABLE}")
    execute_process(COMMAND "${MPIEXEC_EXECUTABLE}" --version OUTPUT_VARIABLE version ERROR_QUIET)
    if(version MATCHES "Open MPI|OpenRTE")
        list(APPEND cmd --oversubscribe --allow-run-as-root --bind-to none
            --mca btl self,vader --mca btl_vader_single_copy_mechanism none)
    endif()
    set(${var} "${cmd}" PARENT_SCOPE)
endfunction()
