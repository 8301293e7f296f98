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

backplane_find_backend(BLAS BLAS)
backplane_find_backend(VULKAN Vulkan)
backplane_find_backend(CUDA CUDAToolkit)
