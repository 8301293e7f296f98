# Install rules and the relocatable package config consumed by
# find_package(backplane [COMPONENTS blas vulkan cuda]).
include_guard(GLOBAL)

include(CMakePackageConfigHelpers)

set(BACKPLANE_CONFIG_DIR "${CMAKE_INSTALL_LIBDIR}/cmake/backplane")

install(TARGETS backplane EXPORT backplaneTargets)
# The Vulkan shader sources are not installed: consumers get them compiled, in
# the generated header installed below.
install(DIRECTORY include/ DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}"
    REGEX "/backends/vulkan/shaders$" EXCLUDE)
install(EXPORT backplaneTargets
    NAMESPACE backplane::
    DESTINATION "${BACKPLANE_CONFIG_DIR}")

# Each backend goes into its own export file, so the config only loads it (and
# only looks for its vendor package) when that component is requested.
foreach(component IN LISTS BACKPLANE_COMPONENTS)
    # CUDA: its kernels come compiled, in the static library the target links
    set(_bp_targets backplane_${component})
    if(TARGET backplane_${component}_kernels)
        list(APPEND _bp_targets backplane_${component}_kernels)
    endif()
    install(TARGETS ${_bp_targets} EXPORT backplane-${component}Targets
        ARCHIVE DESTINATION "${CMAKE_INSTALL_LIBDIR}")
    install(EXPORT backplane-${component}Targets
        NAMESPACE backplane::
        DESTINATION "${BACKPLANE_CONFIG_DIR}")
endforeach()
unset(_bp_targets)

# The Vulkan backend's generated SPIR-V header (cmake/BackplaneShaders.cmake),
# next to the backend's own headers: the include folder of the installed
# backplane target covers it, so backplane::vulkan needs no folder of its own.
# The build writes it: run `cmake --build` before `cmake --install`.
if(TARGET backplane_vulkan_spirv)
    install(FILES "${BACKPLANE_VULKAN_SPIRV_HEADER}"
        DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}/backplane/backends/vulkan")
endif()

configure_package_config_file(
    "${CMAKE_CURRENT_LIST_DIR}/backplaneConfig.cmake.in"
    "${PROJECT_BINARY_DIR}/backplaneConfig.cmake"
    INSTALL_DESTINATION "${BACKPLANE_CONFIG_DIR}")
# Header-only (but for the CUDA kernel library, built for the installing machine):
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
