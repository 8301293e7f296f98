# The CUDA language and the kernel library of the CUDA backend (included by
# BackplaneBackends.cmake when the CUDA toolkit was found).
#
# Architectures: BACKPLANE_CUDA_ARCHITECTURES (default "80-real;90": sm_80 and sm_90
# machine code plus compute_90 PTX, which the driver compiles for newer GPUs), unless the
# user set CMAKE_CUDA_ARCHITECTURES.
include_guard(GLOBAL)

option(BACKPLANE_CUDA_CUBLAS "Let the CUDA backend use cuBLAS for mul_mat (when found)" ON)
set(BACKPLANE_CUDA_ARCHITECTURES "80-real;90" CACHE STRING
    "CUDA architectures of the kernels (CMAKE_CUDA_ARCHITECTURES wins when set)")

if(NOT CMAKE_CUDA_COMPILER AND CUDAToolkit_NVCC_EXECUTABLE)
    set(CMAKE_CUDA_COMPILER "${CUDAToolkit_NVCC_EXECUTABLE}")
endif()
# Where no GPU will run them (the test command on a machine without one), the kernels are
# compiled only to check that they compile: PTX for one virtual architecture, without
# NVVM's optimisation passes (-Xcicc -O0: the kernel library in 30 s instead of 114 s).
# Such a build is for checking, not for running or installing.
option(BACKPLANE_CUDA_CHECK_ONLY
    "Compile the CUDA kernels only to check them: compute_90 PTX, unoptimised (no GPU here)" OFF)
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES "${BACKPLANE_CUDA_ARCHITECTURES}")
    if(BACKPLANE_CUDA_CHECK_ONLY)
        set(CMAKE_CUDA_ARCHITECTURES "90-virtual")
    endif()
endif()
if(NOT DEFINED CMAKE_CUDA_HOST_COMPILER)
    set(CMAKE_CUDA_HOST_COMPILER "${CMAKE_CXX_COMPILER}")
endif()
# the shared runtime: the one CUDA::cudart is, so host code and kernels share one
set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)
enable_language(CUDA)
# CMake 3.25 knows no CUDA20 standard flag for nvcc
set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")

set(BACKPLANE_CUDA_HAS_CUBLAS OFF)
if(BACKPLANE_CUDA_CUBLAS AND TARGET CUDA::cublas)
    set(BACKPLANE_CUDA_HAS_CUBLAS ON)
endif()
# NCCL (the NCCL collective of meta devices over CUDA parts, backends/cuda/nccl.hpp): in
# the CUDA Toolkit here, else wherever the user points BACKPLANE_NCCL_*.
option(BACKPLANE_CUDA_NCCL "Ship the NCCL collective with the CUDA backend (when NCCL is found)" ON)
set(BACKPLANE_CUDA_HAS_NCCL OFF)
if(BACKPLANE_CUDA_NCCL)
    find_path(BACKPLANE_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} DOC "Folder of nccl.h")
    find_library(BACKPLANE_NCCL_LIBRARY nccl
        HINTS "${CUDAToolkit_LIBRARY_DIR}" "${CUDAToolkit_LIBRARY_ROOT}/lib" "${CUDAToolkit_LIBRARY_ROOT}/lib64"
        DOC "The NCCL library")
    if(BACKPLANE_NCCL_INCLUDE_DIR AND BACKPLANE_NCCL_LIBRARY)
        set(BACKPLANE_CUDA_HAS_NCCL ON)
    endif()
endif()
message(STATUS "backplane: CUDA ${CUDAToolkit_VERSION} (${CMAKE_CUDA_COMPILER}), kernels for "
    "${CMAKE_CUDA_ARCHITECTURES}, cuBLAS ${BACKPLANE_CUDA_HAS_CUBLAS}, NCCL ${BACKPLANE_CUDA_HAS_NCCL}")
if(BACKPLANE_CUDA_CHECK_ONLY)
    message(STATUS "backplane: CUDA kernels compiled to check them only (BACKPLANE_CUDA_CHECK_ONLY): "
        "unoptimised PTX, not for running; configure with -DBACKPLANE_CUDA_CHECK_ONLY=OFF on a GPU machine")
endif()

add_library(backplane_cuda_kernels STATIC "${PROJECT_SOURCE_DIR}/src/backplane_cuda_kernels.cu")
set_target_properties(backplane_cuda_kernels PROPERTIES
    EXPORT_NAME cuda_kernels
    POSITION_INDEPENDENT_CODE ON # plugins link it into shared libraries
    CUDA_STANDARD 20
    CUDA_STANDARD_REQUIRED ON
    CUDA_EXTENSIONS OFF)
target_compile_options(backplane_cuda_kernels PRIVATE
    $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr -Xcompiler=-Wall,-Wextra>)
if(BACKPLANE_CUDA_CHECK_ONLY)
    target_compile_options(backplane_cuda_kernels PRIVATE "$<$<COMPILE_LANGUAGE:CUDA>:SHELL:-Xcicc -O0>")
endif()
target_include_directories(backplane_cuda_kernels PRIVATE "${PROJECT_SOURCE_DIR}/include")
target_link_libraries(backplane_cuda_kernels PUBLIC CUDA::cudart)
if(BACKPLANE_CUDA_HAS_CUBLAS)
    target_compile_definitions(backplane_cuda_kernels PRIVATE BACKPLANE_CUDA_CUBLAS=1)
    target_link_libraries(backplane_cuda_kernels PUBLIC CUDA::cublas)
endif()
