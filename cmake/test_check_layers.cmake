# Tests cmake/check_layers.cmake (ctest `include_layers_selftest`) on the hand-made trees
# of tests/layers/ (see its README.md): `good` passes; `upward` fails naming each upward
# include with its file, line and two layers; `unplaced` fails on a header in no layer
# and on an include with quotes. Without this, a check that reads nothing or matches
# nothing would pass silently.
#
#   cmake -D TREES_DIR=<source>/tests/layers -P test_check_layers.cmake

cmake_policy(VERSION 3.25)

if(NOT DEFINED TREES_DIR)
    message(FATAL_ERROR "test_check_layers: -D TREES_DIR=... is required")
endif()
set(checker "${CMAKE_CURRENT_LIST_DIR}/check_layers.cmake")

# check(<rc var> <output var> <tree>): runs the check on TREES_DIR/<tree>.
function(check rc_var out_var tree)
    execute_process(COMMAND "${CMAKE_COMMAND}" -D "INCLUDE_DIR=${TREES_DIR}/${tree}" -P "${checker}"
        RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
    # CMake wraps its messages at the terminal width: match on one line of single spaces.
    string(REGEX REPLACE "[ \t\r\n]+" " " out "${out}")
    set(${rc_var} "${rc}" PARENT_SCOPE)
    set(${out_var} "${out}" PARENT_SCOPE)
endfunction()

# expect_failure(<tree> <expected regex>...): the check fails on <tree> and says each.
function(expect_failure tree)
    check(rc out "${tree}")
    if(rc EQUAL 0)
        message(FATAL_ERROR "check_layers passed on the tree '${tree}':\n${out}")
    endif()
    foreach(expected IN LISTS ARGN)
        if(NOT out MATCHES "${expected}")
            message(FATAL_ERROR "check_layers on '${tree}': the report lacks '${expected}':\n${out}")
        endif()
    endforeach()
endfunction()

check(rc out good)
if(NOT rc EQUAL 0 OR NOT out MATCHES "12 includes in 8 files, all downward")
    message(FATAL_ERROR "check_layers failed on the tree 'good', or did not read all of it:\n${out}")
endif()

expect_failure(upward
    "upward/backplane/core/tensor\\.hpp:4: layer 'core' includes <backplane/sched/scheduler\\.hpp> of layer 'sched'"
    "upward/backplane/backends/cpu/backend\\.hpp:3: layer 'backends' includes <backplane/backends/meta/device\\.hpp> of layer 'meta'"
    "upward/backplane/erased/any\\.hpp:3: layer 'erased' includes <backplane/runtime/registry\\.hpp> of layer 'runtime'")

expect_failure(unplaced
    "unplaced/backplane/extra\\.hpp: in no layer"
    "unplaced/backplane/runtime/registry\\.hpp:2: layer 'runtime' includes \"reg\\.hpp\" with quotes")

message(STATUS "test_check_layers: the good tree passes, the upward and unplaced trees fail as they should")
