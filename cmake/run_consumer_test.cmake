# Consumer test, run by ctest as `cmake -D... -P run_consumer_test.cmake`:
# install the build tree BUILD_DIR into a fresh prefix under WORK_DIR, then
# configure, build and run the project in SOURCE_DIR against that prefix with
# the same generator and compiler. Any failing step fails the test and prints
# that step's output.
#
# Inputs: BUILD_DIR SOURCE_DIR WORK_DIR GENERATOR CTEST_COMMAND (required);
#         MAKE_PROGRAM CXX_COMPILER fmt_DIR COMPONENTS (comma-separated) CONFIG.
foreach(var IN ITEMS BUILD_DIR SOURCE_DIR WORK_DIR GENERATOR CTEST_COMMAND)
    if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
        message(FATAL_ERROR "run_consumer_test.cmake: -D ${var}=... is required")
    endif()
endforeach()

set(prefix "${WORK_DIR}/prefix")
set(consumer_build "${WORK_DIR}/build")
# Start clean: a leftover prefix or cache could hide a broken install.
file(REMOVE_RECURSE "${WORK_DIR}")

set(config_args "")   # for cmake --build / --install
set(ctest_config "")  # for ctest
if(CONFIG)
    set(config_args --config "${CONFIG}")
    set(ctest_config -C "${CONFIG}")
endif()

# run_step(<description> <command...>): run it, stop with its output on failure.
function(run_step what)
    execute_process(COMMAND ${ARGN}
        RESULT_VARIABLE result OUTPUT_VARIABLE output ERROR_VARIABLE output)
    if(NOT result EQUAL 0)
        message(FATAL_ERROR "consumer test: ${what} failed (${result}):\n${output}")
    endif()
    message(STATUS "consumer test: ${what}: ok")
endfunction()

run_step("install into ${prefix}"
    "${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${prefix}" ${config_args})

set(configure_args
    -S "${SOURCE_DIR}" -B "${consumer_build}" -G "${GENERATOR}"
    "-DCMAKE_PREFIX_PATH=${prefix}"
    "-DBACKPLANE_CONSUMER_COMPONENTS=${COMPONENTS}")
# Same toolchain, build type and {fmt} as the main build.
if(MAKE_PROGRAM)
    list(APPEND configure_args "-DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM}")
endif()
if(CXX_COMPILER)
    list(APPEND configure_args "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}")
endif()
if(fmt_DIR)
    list(APPEND configure_args "-Dfmt_DIR=${fmt_DIR}")
endif()
if(CONFIG)
    # Unoptimised: what is checked is that the installed package configures, compiles,
    # links and runs; optimising the CPU backend that main.cpp instantiates was most of
    # the test's time.
    string(TOUPPER "${CONFIG}" config_upper)
    list(APPEND configure_args "-DCMAKE_BUILD_TYPE=${CONFIG}" "-DCMAKE_CXX_FLAGS_${config_upper}=-O0 -g0")
endif()

run_step("configure ${SOURCE_DIR}" "${CMAKE_COMMAND}" ${configure_args})
run_step("build" "${CMAKE_COMMAND}" --build "${consumer_build}" ${config_args})
# The consumer registers its program as a test: ctest finds it in any
# generator's output layout.
run_step("run" "${CTEST_COMMAND}" --test-dir "${consumer_build}" --output-on-failure
    ${ctest_config})
