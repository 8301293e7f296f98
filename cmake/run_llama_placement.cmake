# examples/llama's default placement follows measured speeds (ctest
# example_llama_default_placement; examples/llama/devices.hpp):
#
#   cmake -D LLAMA=<program> -D WORK_DIR=<dir> -P run_llama_placement.cmake -- <llama args...>
#
# 1. runs llama with its default devices and a cost cache of its own
#    (BACKPLANE_COST_CACHE): it calibrates the device it finds and the CPU, and says
#    whether it used the device; no device found: exit status 77 (a skip, with a message);
# 2. rewrites the device's calibrated profile in that cache as a device ten thousand
#    times faster than measured: llama must now offload every layer to it;
# 3. and as one ten thousand times slower: llama must run on the CPU alone.
# Every run must pass llama's own --check (logits against a CPU-only run).

cmake_policy(VERSION 3.25)
foreach(var LLAMA WORK_DIR)
    if(NOT DEFINED ${var})
        message(FATAL_ERROR "run_llama_placement: -D ${var}=... is required")
    endif()
endforeach()

set(args "")
set(seen_dashes FALSE)
math(EXPR last "${CMAKE_ARGC} - 1")
foreach(i RANGE ${last})
    if(seen_dashes)
        list(APPEND args "${CMAKE_ARGV${i}}")
    elseif(CMAKE_ARGV${i} STREQUAL "--")
        set(seen_dashes TRUE)
    endif()
endforeach()

file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
set(cache "${WORK_DIR}/costs.tsv")

# run(<label> <expect regex>): llama with the cost cache; its output must match.
function(run label expect)
    execute_process(COMMAND "${CMAKE_COMMAND}" -E env "BACKPLANE_COST_CACHE=${cache}" "${LLAMA}" ${args}
        OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
    message(STATUS "${label}:\n${out}${err}")
    if(NOT rc EQUAL 0)
        message(FATAL_ERROR "run_llama_placement: ${label}: exit status ${rc}")
    endif()
    if(NOT out MATCHES "${expect}")
        message(FATAL_ERROR "run_llama_placement: ${label}: the output does not match '${expect}'")
    endif()
    set(last_output "${out}" PARENT_SCOPE)
endfunction()

run("measured speeds" "check: .*: ok")
if(NOT last_output MATCHES "devices: ([A-Za-z]+[0-9]+) \\(")
    message(STATUS "run_llama_placement: no Vulkan or CUDA device here: nothing to place (skipped)")
    cmake_language(EXIT 77)
endif()
set(device "${CMAKE_MATCH_1}")

file(READ "${cache}" measured)

# speeds(<shift>): the cache as measured, but the device's profile 10^shift times as fast
# (every rate times it, every latency divided by it)
function(speeds shift)
    string(REPLACE "\n" ";" lines "${measured}")
    set(text "")
    set(found FALSE)
    foreach(line IN LISTS lines)
        if(line MATCHES "^profile\tkey=${device} @ ")
            set(found TRUE)
            string(REPLACE "\t" ";" fields "${line}")
            set(line "")
            foreach(f IN LISTS fields)
                if(f MATCHES "^([a-z_]+(latency|flops|bytes))=([0-9.]+)(e([-+]?[0-9]+))?$")
                    set(exponent "${CMAKE_MATCH_5}")
                    if(exponent STREQUAL "")
                        set(exponent 0)
                    endif()
                    if(CMAKE_MATCH_2 STREQUAL "latency")
                        math(EXPR exponent "${exponent} - ${shift}")
                    else()
                        math(EXPR exponent "${exponent} + ${shift}")
                    endif()
                    set(f "${CMAKE_MATCH_1}=${CMAKE_MATCH_3}e${exponent}")
                endif()
                string(APPEND line "${f}\t")
            endforeach()
            string(REGEX REPLACE "\t$" "" line "${line}")
        endif()
        if(NOT line STREQUAL "")
            string(APPEND text "${line}\n")
        endif()
    endforeach()
    if(NOT found)
        message(FATAL_ERROR "run_llama_placement: ${cache} has no profile of ${device}")
    endif()
    file(WRITE "${cache}" "${text}")
endfunction()

speeds(4)
run("${device} 10000 times faster than measured"
    "devices: ${device} .* used: estimated faster.*devices: ${device} .* holds [0-9]+ of [0-9]+ layers and the output.*check: .*: ok")
speeds(-4)
run("${device} 10000 times slower than measured"
    "devices: ${device} .* skipped: estimated slower.*devices: the CPU alone.*check: .*: ok")
