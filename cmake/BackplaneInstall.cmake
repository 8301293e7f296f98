# Install rules and the relocatable package config consumed by
# find_package(backplane [COMPONENTS blas vulkan cuda]).
include_guard(GLOBAL)

include(CMakePackageConfigHelpers)

set(BACKPLANE_CONFIG_DIR "${CMAKE_INSTALL_LIBDIR}/cmake/backplane")

install(TARGETS backplane EXPORT backplaneTargets)
# The Vulkan shader sources are not installed: consumers get them compiled, in
# the backend's kernel library installed below.
install(DIRECTORY include/ DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}"
    REGEX "/backends/vulkan/shaders$" EXCLUDE)
install(EXPORT backplaneTargets
    NAMESPACE backplane::
    DESTINATION "${BACKPLANE_CONFIG_DIR}")

# Each backend goes into its own export file, so the config only loads it (and
# only looks for its vendor package) when that component is requested.
foreach(component IN LISTS BACKPLANE_COMPONENTS)
    # CUDA and Vulkan: their kernels come compiled, in the static library the target links
    set(_bp_targets backplane_${component})
    if(TARGET backplane_${component}_kernels)
        get_target_property(_bp_imported backplane_${component}_kernels IMPORTED)
        if(_bp_imported) # BACKPLANE_VULKAN_KERNELS_FROM: the other tree installs it
            install(CODE "message(FATAL_ERROR \"this build tree takes its ${component} kernel \"
                \"library from ${BACKPLANE_VULKAN_KERNELS_FROM}: install from there\")")
        else()
            list(APPEND _bp_targets backplane_${component}_kernels)
        endif()
    endif()
    install(TARGETS ${_bp_targets} EXPORT backplane-${component}Targets
        ARCHIVE DESTINATION "${CMAKE_INSTALL_LIBDIR}")
    install(EXPORT backplane-${component}Targets
        NAMESPACE backplane::
        DESTINATION "${BACKPLANE_CONFIG_DIR}")
endforeach()
unset(_bp_targets)
unset(_bp_imported)

configure_package_config_file(
    "${CMAKE_CURRENT_LIST_DIR}/backplaneConfig.cmake.in"
    "${PROJECT_BINARY_DIR}/backplaneConfig.cmake"
    INSTALL_DESTINATION "${BACKPLANE_CONFIG_DIR}")
# Header-only (but for the CUDA and Vulkan kernel libraries, built for the installing machine):
# the same install serves 32- and 64-bit consumers.
write_basic_package_version_file(
    "${PROJECT_BINARY_DIR}/backplaneConfigVersion.cmake"
    COMPATIBILITY SameMajorVersion
    ARCH_INDEPENDENT)
install(FILES
    "${PROJECT_BINARY_DIR}/backplaneConfig.cmake"
    "${PROJECT_BINARY_DIR}/backplaneConfigVersion.cmake"
    "${CMAKE_CURRENT_LIST_DIR}/BackplanePlugin.cmake"
    DESTINATION "${BACKPLANE_CONFIG_DIR}")
