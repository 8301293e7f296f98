# backplane_add_plugin(<target> SOURCES <file>... [LIBRARIES <target>...]
#                      [OUTPUT_NAME <name>] [OUTPUT_DIRECTORY <dir>])
#
# Builds a backend plugin: a shared library (a CMake MODULE) named
# libbackplane-<OUTPUT_NAME>.so (OUTPUT_NAME defaults to <target>), the file name
# registry::load_all() looks for. SOURCES define the entry point with
# BACKPLANE_PLUGIN (<backplane/runtime/plugin.hpp>); LIBRARIES are linked
# privately (backplane::backplane when none names a backplane target, e.g.
# backplane::vulkan for a Vulkan plugin).
#
# The library is built with hidden visibility, so it keeps its own copy of the
# header-only library's inline state (the module anchor that makes unloading
# safe among it), and with GCC's -fno-gnu-unique, without which a library that
# holds function-local statics of inline functions can never be unmapped.
include_guard(GLOBAL)

function(backplane_add_plugin target)
    cmake_parse_arguments(PARSE_ARGV 1 arg "" "OUTPUT_NAME;OUTPUT_DIRECTORY" "SOURCES;LIBRARIES")
    if(NOT arg_SOURCES OR arg_UNPARSED_ARGUMENTS)
        message(FATAL_ERROR
            "usage: backplane_add_plugin(<target> SOURCES <file>... [LIBRARIES <target>...] "
            "[OUTPUT_NAME <name>] [OUTPUT_DIRECTORY <dir>]) (got: ${ARGV})")
    endif()
    if(NOT arg_OUTPUT_NAME)
        set(arg_OUTPUT_NAME "${target}")
    endif()
    add_library(${target} MODULE ${arg_SOURCES})
    set(libraries ${arg_LIBRARIES})
    if(NOT libraries MATCHES "backplane::")
        list(APPEND libraries backplane::backplane)
    endif()
    target_link_libraries(${target} PRIVATE ${libraries})
    set_target_properties(${target} PROPERTIES
        PREFIX "lib"
        OUTPUT_NAME "backplane-${arg_OUTPUT_NAME}"
        CXX_VISIBILITY_PRESET hidden
        VISIBILITY_INLINES_HIDDEN ON)
    if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
        target_compile_options(${target} PRIVATE -fno-gnu-unique)
    endif()
    if(arg_OUTPUT_DIRECTORY)
        set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY "${arg_OUTPUT_DIRECTORY}")
    endif()
endfunction()
