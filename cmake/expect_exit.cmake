# Runs a program that must fail in a given way (a ctest script for misuse tests):
#   cmake -D EXIT=<status> -D OUTPUT=<regex> [-D ABSENT=<path>] -P expect_exit.cmake --
#         <program> [args...]
# Passes when the program exits with exactly <status>, its stdout + stderr match <regex>
# and, with ABSENT, no file exists at <path> afterwards (one found is removed, so that
# the next run starts clean); fails otherwise, printing what the program did. A bare WILL_FAIL would also
# pass on a crash or on the wrong message.
foreach(var EXIT OUTPUT)
    if(NOT DEFINED ${var})
        message(FATAL_ERROR "expect_exit.cmake: ${var} is not set")
    endif()
endforeach()
set(cmd "")
set(after_dashes FALSE)
math(EXPR last "${CMAKE_ARGC} - 1")
foreach(i RANGE ${last})
    if(after_dashes)
        string(REPLACE ";" "\\;" arg "${CMAKE_ARGV${i}}") # an argument stays one argument
        list(APPEND cmd "${arg}")
    elseif("${CMAKE_ARGV${i}}" STREQUAL "--")
        set(after_dashes TRUE)
    endif()
endforeach()
if(NOT cmd)
    message(FATAL_ERROR "expect_exit.cmake: no program given after --")
endif()
execute_process(COMMAND ${cmd} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
string(JOIN " " shown ${cmd})
if(ABSENT AND EXISTS "${ABSENT}") # checked first, so the file is removed whatever else failed
    file(REMOVE "${ABSENT}")
    message(FATAL_ERROR "expect_exit.cmake: '${shown}' (exit '${rc}') left a file at ${ABSENT} "
                        "(removed now)\nstdout:\n${out}\nstderr:\n${err}")
endif()
if(NOT "${rc}" STREQUAL "${EXIT}")
    message(FATAL_ERROR "expect_exit.cmake: '${shown}' exited with '${rc}', want ${EXIT}\n"
                        "stdout:\n${out}\nstderr:\n${err}")
endif()
if(NOT "${out}${err}" MATCHES "${OUTPUT}")
    message(FATAL_ERROR "expect_exit.cmake: the output of '${shown}' does not match '${OUTPUT}'\n"
                        "stdout:\n${out}\nstderr:\n${err}")
endif()
message(STATUS "'${shown}' exited with ${rc} as expected")
