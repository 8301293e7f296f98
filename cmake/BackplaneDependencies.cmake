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
backplane_find_backend(VULKAN Vulkan)
backplane_find_backend(CUDA CUDAToolkit)
