# Builds a libFuzzer target with clang and runs it for a bounded time (a ctest script).
#   -D CLANGXX=<clang++> -D SOURCE=<fuzz target .cpp> -D INCLUDE_DIR=<include dir>
#   -D WORK_DIR=<scratch dir> -D SECONDS=<run time> [-D EXTRA_FLAGS=<...>]
# Fails when the build fails or the fuzzer finds a crash, a leak or undefined behaviour.
foreach(var CLANGXX SOURCE INCLUDE_DIR WORK_DIR SECONDS)
    if(NOT DEFINED ${var})
        message(FATAL_ERROR "run_fuzzer.cmake: ${var} is not set")
    endif()
endforeach()
file(MAKE_DIRECTORY "${WORK_DIR}/corpus")
get_filename_component(name "${SOURCE}" NAME_WE)
set(exe "${WORK_DIR}/${name}")
execute_process(
    COMMAND "${CLANGXX}" -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined
            -fno-sanitize-recover=undefined -I "${INCLUDE_DIR}" ${EXTRA_FLAGS}
            "${SOURCE}" -o "${exe}" -lfmt -lpthread
    RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
    message(FATAL_ERROR "run_fuzzer.cmake: building ${name} with ${CLANGXX} failed")
endif()
execute_process(
    COMMAND "${CMAKE_COMMAND}" -E env "BACKPLANE_FUZZ_SEED_DIR=${WORK_DIR}/corpus"
            "${exe}" "${WORK_DIR}/corpus" -max_total_time=${SECONDS} -max_len=4096 -timeout=10
            -rss_limit_mb=2048 -print_final_stats=1
    RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
    message(FATAL_ERROR "run_fuzzer.cmake: ${name} found a failure (exit ${rc}); the input is in ${WORK_DIR}")
endif()
