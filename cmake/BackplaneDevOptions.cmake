# Compiler options for backplane's own tests, examples and benchmarks. These
# targets are neither installed nor exported: the library never imposes
# warning or sanitizer flags on its users.
include_guard(GLOBAL)

# Our own targets compile as -std=c++20, not gnu++20, so a GNU extension in a
# header cannot slip past the tests. (Users keep their own choice.)
set(CMAKE_CXX_EXTENSIONS OFF)

# Warnings that catch real bugs in templates; not -Werror, so a newer compiler's
# new warning does not break the build, except where the code is certainly wrong.
add_library(backplane_warnings INTERFACE)
target_compile_options(backplane_warnings INTERFACE
    $<$<CXX_COMPILER_ID:GNU,Clang,AppleClang>:
        -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Woverloaded-virtual
        -Wimplicit-fallthrough -Werror=return-type>
    $<$<CXX_COMPILER_ID:MSVC>:/W4 /permissive->)

# Warnings plus the sanitizers named by BACKPLANE_SANITIZE. Tests and examples
# link this; benchmarks link only backplane_warnings.
add_library(backplane_test_options INTERFACE)
target_link_libraries(backplane_test_options INTERFACE backplane_warnings)
if(BACKPLANE_SANITIZE)
    # -fno-sanitize-recover=all: a UBSan report fails the test instead of
    # scrolling past; frame pointers give readable ASan stacks at -O1.
    set(_bp_sanitize_flags
        -fsanitize=${BACKPLANE_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
    set(_bp_sanitize_text "${BACKPLANE_SANITIZE}")
    if(BACKPLANE_NO_SANITIZE)
        list(APPEND _bp_sanitize_flags -fno-sanitize=${BACKPLANE_NO_SANITIZE})
        string(APPEND _bp_sanitize_text " (left out: ${BACKPLANE_NO_SANITIZE})")
    endif()
    target_compile_options(backplane_test_options INTERFACE ${_bp_sanitize_flags})
    target_link_options(backplane_test_options INTERFACE ${_bp_sanitize_flags})
    message(STATUS "backplane tests/examples sanitizers: ${_bp_sanitize_text}")
    unset(_bp_sanitize_text)
    unset(_bp_sanitize_flags)
endif()

# backplane_unity(<target>)
#
# For a test or benchmark program: with BACKPLANE_UNITY_TESTS, compiles <target>'s
# sources as one translation unit. The library's inline functions and templates (the CPU
# kernels, the scheduler) are then compiled once per program instead of once per source
# file, which is most of a test file's compile time.
function(backplane_unity target)
    if(BACKPLANE_UNITY_TESTS)
        set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 0)
    endif()
endfunction()

# backplane_syntax_check(<target>)
#
# For an object library whose sources are compiled only to check that they compile (the
# header check, the benchmark checks): no optimisation and no debug information, and,
# under g++ where clang++ is installed, clang++ -fsyntax-only instead
# (cmake/syntax_check_launcher.sh, docs/testing.md "Build time"): it parses and
# instantiates in about 60 % of the time g++ -O0 takes, and the sources then compile
# under a second compiler.
find_program(BACKPLANE_CLANGXX NAMES clang++ clang++-14)
function(backplane_syntax_check target)
    target_compile_options(${target} PRIVATE $<$<CXX_COMPILER_ID:GNU,Clang>:-O0 -g0>)
    if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND BACKPLANE_CLANGXX)
        set_target_properties(${target} PROPERTIES CXX_COMPILER_LAUNCHER
            "${PROJECT_SOURCE_DIR}/cmake/syntax_check_launcher.sh;${BACKPLANE_CLANGXX}")
    endif()
endfunction()

# The CPU backend's kernels compiled once for our own programs (backplane_cpu_kernels,
# src/backplane_cpu_kernels.cpp; docs/backends/cpu.md, "Kernels compiled once"): the test
# programs, examples, tools and benchmarks call them through it instead of each compiling
# every kernel specialisation, the largest part of such a program's compile time. Same
# flags as the tests (sanitizers included). hello_graph, the plugins and the header check
# stay header-only, so that mode keeps being built and run too.
option(BACKPLANE_SEPARATE_KERNELS
    "Compile the CPU kernels once for the tests, examples, tools and benchmarks (off: each program compiles them)" ON)
if(BACKPLANE_SEPARATE_KERNELS)
    add_library(backplane_cpu_kernels STATIC "${PROJECT_SOURCE_DIR}/src/backplane_cpu_kernels.cpp")
    target_link_libraries(backplane_cpu_kernels PUBLIC backplane::backplane PRIVATE backplane_test_options)
    target_compile_definitions(backplane_cpu_kernels PUBLIC BACKPLANE_CPU_SEPARATE_KERNELS=1)
endif()

# backplane_link_cpu_kernels(<target> [NO_SANITIZERS]): links the compiled-once CPU kernels
# when built. NO_SANITIZERS: <target> is built without backplane_test_options (a benchmark,
# a .cu program), so it links them only when they carry no sanitizer, and otherwise keeps
# compiling its own.
function(backplane_link_cpu_kernels target)
    cmake_parse_arguments(PARSE_ARGV 1 arg "NO_SANITIZERS" "" "")
    if(NOT TARGET backplane_cpu_kernels OR (arg_NO_SANITIZERS AND BACKPLANE_SANITIZE))
        return()
    endif()
    target_link_libraries(${target} PRIVATE backplane_cpu_kernels)
endfunction()
