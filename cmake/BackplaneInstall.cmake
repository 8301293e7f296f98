# Install rules and the relocatable package config consumed by
# find_package(backplane [COMPONENTS blas vulkan cuda]).
include_guard(GLOBAL)

include(CMakePackageConfigHelpers)

set(BACKPLANE_CONFIG_DIR "${CMAKE_INSTALL_LIBDIR}/cmake/backplane")

install(TARGETS backplane EXPORT backplaneTargets)
install(DIRECTORY include/ DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}")
install(EXPORT backplaneTargets
    NAMESPACE backplane::
    DESTINATION "${BACKPLANE_CONFIG_DIR}")

# Each backend goes into its own export file, so the config only loads it (and
# only looks for its vendor package) when that component is requested.
foreach(component IN LISTS BACKPLANE_COMPONENTS)
    install(TARGETS backplane_${component} EXPORT backplane-${component}Targets)
    install(EXPORT backplane-${component}Targets
        NAMESPACE backplane::
        DESTINATION "${BACKPLANE_CONFIG_DIR}")
endforeach()

configure_package_config_file(
    "${CMAKE_CURRENT_LIST_DIR}/backplaneConfig.cmake.in"
    "${PROJECT_BINARY_DIR}/backplaneConfig.cmake"
    INSTALL_DESTINATION "${BACKPLANE_CONFIG_DIR}")
# Header-only: the same install serves 32- and 64-bit consumers.
write_basic_package_version_file(
    "${PROJECT_BINARY_DIR}/backplaneConfigVersion.cmake"
    COMPATIBILITY SameMajorVersion
    ARCH_INDEPENDENT)
install(FILES
    "${PROJECT_BINARY_DIR}/backplaneConfig.cmake"
    "${PROJECT_BINARY_DIR}/backplaneConfigVersion.cmake"
    DESTINATION "${BACKPLANE_CONFIG_DIR}")
