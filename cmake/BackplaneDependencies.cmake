# Finds the core dependencies and resolves the AUTO/ON/OFF backend options into
# BACKPLANE_HAS_<BACKEND> booleans. Only packages are searched for: nothing here
# probes for a device, so configuring works the same on machines without GPUs.
include_guard(GLOBAL)

find_package(fmt REQUIRED)
find_package(Threads REQUIRED)

# backplane_find_backend(<BACKEND> <package> [find_package args...])
# A macro, not a function, so the variables and imported targets that
# find_package() defines stay visible to the caller.
macro(backplane_find_backend backend package)
    string(TOUPPER "${BACKPLANE_WITH_${backend}}" _bp_mode)
    set(BACKPLANE_HAS_${backend} OFF)
    if(_bp_mode STREQUAL "ON")
        find_package(${package} ${ARGN} REQUIRED)
        set(BACKPLANE_HAS_${backend} ON)
    elseif(_bp_mode STREQUAL "AUTO")
        find_package(${package} ${ARGN} QUIET)
        if(${package}_FOUND)
            set(BACKPLANE_HAS_${backend} ON)
        endif()
    endif()
    unset(_bp_mode)
endmacro()

# BLAS: the library (FindBLAS) and its cblas.h, the one header the BLAS backend
# includes. OpenBLAS is asked for first unless the user set BLA_VENDOR (variable or
# environment): FindBLAS's default search may settle on another vendor or on the
# reference libblas (through Debian's alternatives), which is many times slower and
# lacks openblas_set_num_threads.
# The header is looked for where that library's pkg-config file says (Debian keeps
# OpenBLAS's cblas.h in include/<arch>/openblas-pthread), so header and library match.
# Sets BACKPLANE_HAS_BLAS, BACKPLANE_BLAS_LIBRARIES, BACKPLANE_BLAS_LINKER_FLAGS,
# BACKPLANE_BLAS_DEFINITIONS and the cache entry BACKPLANE_BLAS_INCLUDE_DIR (the folder
# holding cblas.h).
string(TOUPPER "${BACKPLANE_WITH_BLAS}" _bp_blas_mode)
set(BACKPLANE_HAS_BLAS OFF)
if(NOT _bp_blas_mode STREQUAL "OFF")
    if(NOT DEFINED BLA_VENDOR AND "$ENV{BLA_VENDOR}" STREQUAL "")
        set(BLA_VENDOR OpenBLAS)
        find_package(BLAS QUIET)
        unset(BLA_VENDOR)
    endif()
    if(NOT BLAS_FOUND)
        find_package(BLAS QUIET) # the user's BLA_VENDOR, or any vendor
    endif()

    set(_bp_blas_hints "")
    set(_bp_blas_is_openblas OFF)
    if(BLAS_FOUND AND BLAS_LIBRARIES MATCHES "openblas")
        set(_bp_blas_is_openblas ON)
        find_package(PkgConfig QUIET)
        if(PkgConfig_FOUND)
            pkg_check_modules(_bp_openblas_pc QUIET openblas)
            list(APPEND _bp_blas_hints ${_bp_openblas_pc_INCLUDE_DIRS})
        endif()
    endif()
    if(_bp_blas_is_openblas)
        # openblas_config.h lives only beside OpenBLAS's own cblas.h
        find_path(BACKPLANE_BLAS_INCLUDE_DIR NAMES openblas_config.h HINTS ${_bp_blas_hints}
            PATH_SUFFIXES openblas-pthread openblas-openmp openblas-serial openblas
            DOC "Folder of the cblas.h that the BLAS backend includes")
    else()
        # the plain cblas.h: on Debian an alternative switched together with libblas.so
        find_path(BACKPLANE_BLAS_INCLUDE_DIR NAMES cblas.h
            DOC "Folder of the cblas.h that the BLAS backend includes")
    endif()

    if(BLAS_FOUND AND BACKPLANE_BLAS_INCLUDE_DIR AND EXISTS "${BACKPLANE_BLAS_INCLUDE_DIR}/cblas.h")
        set(BACKPLANE_HAS_BLAS ON)
        set(BACKPLANE_BLAS_LIBRARIES ${BLAS_LIBRARIES})
        set(BACKPLANE_BLAS_LINKER_FLAGS ${BLAS_LINKER_FLAGS})
        set(BACKPLANE_BLAS_DEFINITIONS "")
        # OpenBLAS's cblas.h declares openblas_set_num_threads, which the backend calls;
        # Debian's OpenBLAS-built libblas.so.3 (what BLA_VENDOR=Generic finds through the
        # alternatives) has the cblas functions but not these: tell the header so.
        if(EXISTS "${BACKPLANE_BLAS_INCLUDE_DIR}/openblas_config.h")
            include(CheckCXXSourceCompiles)
            set(CMAKE_REQUIRED_INCLUDES "${BACKPLANE_BLAS_INCLUDE_DIR}")
            set(CMAKE_REQUIRED_LIBRARIES ${BLAS_LIBRARIES})
            set(CMAKE_REQUIRED_QUIET ON)
            unset(BACKPLANE_BLAS_HAVE_OPENBLAS_API CACHE) # the library may have changed
            check_cxx_source_compiles([=[
#include <cblas.h>
int main() { openblas_set_num_threads(1); return openblas_get_corename() != nullptr ? 0 : 1; }
]=] BACKPLANE_BLAS_HAVE_OPENBLAS_API)
            unset(CMAKE_REQUIRED_INCLUDES)
            unset(CMAKE_REQUIRED_LIBRARIES)
            unset(CMAKE_REQUIRED_QUIET)
            if(NOT BACKPLANE_BLAS_HAVE_OPENBLAS_API)
                list(APPEND BACKPLANE_BLAS_DEFINITIONS BACKPLANE_BLAS_NO_OPENBLAS_API)
            endif()
        endif()
        message(STATUS "backplane: BLAS: ${BLAS_LIBRARIES} (cblas.h in ${BACKPLANE_BLAS_INCLUDE_DIR})")
    else()
        if(NOT BLAS_FOUND)
            set(_bp_blas_missing "no BLAS library was found")
        else()
            set(_bp_blas_missing "BLAS library ${BLAS_LIBRARIES} found but not its cblas.h")
        endif()
        if(_bp_blas_mode STREQUAL "ON")
            message(FATAL_ERROR "BACKPLANE_WITH_BLAS=ON but ${_bp_blas_missing} "
                "(Debian/Ubuntu: apt install libopenblas-dev; or set BLA_VENDOR / "
                "BACKPLANE_BLAS_INCLUDE_DIR)")
        endif()
        message(STATUS "backplane: BLAS backend off: ${_bp_blas_missing}")
        unset(_bp_blas_missing)
    endif()
    unset(_bp_blas_hints)
    unset(_bp_blas_is_openblas)
endif()
unset(_bp_blas_mode)

# Vulkan: the loader and headers, plus glslc, which compiles the backend's GLSL
# compute shaders to SPIR-V at build time (cmake/BackplaneShaders.cmake). Without
# glslc the backend cannot be built, so it counts as missing. spirv-val (from
# spirv-tools) is optional: when found, every compiled shader is validated.
# Sets BACKPLANE_HAS_VULKAN and the cache entry BACKPLANE_SPIRV_VAL_EXECUTABLE.
string(TOUPPER "${BACKPLANE_WITH_VULKAN}" _bp_vulkan_mode)
set(BACKPLANE_HAS_VULKAN OFF)
if(NOT _bp_vulkan_mode STREQUAL "OFF")
    # Not REQUIRED even for ON: the message below names what is missing.
    find_package(Vulkan QUIET COMPONENTS glslc)
    if(Vulkan_FOUND AND TARGET Vulkan::glslc)
        set(BACKPLANE_HAS_VULKAN ON)
        find_program(BACKPLANE_SPIRV_VAL_EXECUTABLE NAMES spirv-val
            HINTS "$ENV{VULKAN_SDK}/bin"
            DOC "spirv-val, validates the compiled Vulkan shaders (optional)")
        if(BACKPLANE_SPIRV_VAL_EXECUTABLE)
            set(_bp_spirv_val "validated by ${BACKPLANE_SPIRV_VAL_EXECUTABLE}")
        else()
            set(_bp_spirv_val "not validated: spirv-val not found (package spirv-tools)")
        endif()
        message(STATUS "backplane: Vulkan: ${Vulkan_LIBRARY}; shaders compiled by "
            "${Vulkan_GLSLC_EXECUTABLE}, ${_bp_spirv_val}")
        unset(_bp_spirv_val)
    else()
        # FindVulkan reports the library and glslc together in Vulkan_FOUND:
        # look at each to say which one is missing.
        set(_bp_vulkan_missing "")
        set(_bp_vulkan_packages "")
        if(NOT Vulkan_LIBRARY OR NOT Vulkan_INCLUDE_DIR)
            list(APPEND _bp_vulkan_missing "the Vulkan loader and headers (package libvulkan-dev)")
            list(APPEND _bp_vulkan_packages libvulkan-dev)
        endif()
        if(NOT Vulkan_GLSLC_EXECUTABLE)
            list(APPEND _bp_vulkan_missing "the shader compiler glslc (package glslc)")
            list(APPEND _bp_vulkan_packages glslc)
        endif()
        if(NOT _bp_vulkan_missing) # both there, yet FindVulkan failed
            list(APPEND _bp_vulkan_missing "a usable Vulkan installation (FindVulkan failed)")
        endif()
        list(JOIN _bp_vulkan_missing " and " _bp_vulkan_missing)
        list(JOIN _bp_vulkan_packages " " _bp_vulkan_packages)
        if(_bp_vulkan_mode STREQUAL "ON")
            message(FATAL_ERROR "BACKPLANE_WITH_VULKAN=ON but not found: ${_bp_vulkan_missing}. "
                "Debian/Ubuntu: apt install ${_bp_vulkan_packages}; elsewhere set VULKAN_SDK, "
                "or Vulkan_GLSLC_EXECUTABLE to glslc's path.")
        endif()
        message(STATUS "backplane: Vulkan backend off, not found: ${_bp_vulkan_missing}")
        unset(_bp_vulkan_packages)
        unset(_bp_vulkan_missing)
    endif()
endif()
unset(_bp_vulkan_mode)

backplane_find_backend(CUDA CUDAToolkit)

# MPI (Open MPI on Debian: libopenmpi-dev, and openmpi-bin for mpirun): the C API only.
# MPI_CXX_SKIP_MPICXX keeps the deprecated C++ bindings out of every translation unit
# that includes <mpi.h>.
set(MPI_CXX_SKIP_MPICXX ON CACHE BOOL "Include <mpi.h> without the MPI C++ bindings")
backplane_find_backend(MPI MPI COMPONENTS CXX)
if(BACKPLANE_HAS_MPI)
    message(STATUS "backplane: MPI ${MPI_CXX_VERSION}: ${MPI_CXX_LIBRARIES}; launcher ${MPIEXEC_EXECUTABLE}")
elseif(NOT BACKPLANE_WITH_MPI STREQUAL "OFF")
    message(STATUS "backplane: MPI component off: no MPI found (Debian/Ubuntu: apt install libopenmpi-dev openmpi-bin)")
endif()
