# Runs one compile-fail case; called by ctest as
#   cmake -D BUILD_DIR=<build tree> -D TARGET=<object library> -D SOURCE=<case.cpp>
#         -P check_compile_fail.cmake
# Passes only if building TARGET fails AND the build output matches the regex
# given on SOURCE's first line as `// expect: <regex>`. The regex is read here,
# at test time, so editing it needs no reconfigure.
foreach(var IN ITEMS BUILD_DIR TARGET SOURCE)
    if(NOT DEFINED ${var})
        message(FATAL_ERROR "check_compile_fail.cmake: -D ${var}=... is required")
    endif()
endforeach()

file(STRINGS "${SOURCE}" first_line LIMIT_COUNT 1)
if(NOT first_line MATCHES "^[ \t]*//[ \t]*expect:[ \t]*(.*[^ \t])[ \t]*$")
    message(FATAL_ERROR
        "${SOURCE}: the first line must be `// expect: <regex>` (got: '${first_line}')")
endif()
set(expect "${CMAKE_MATCH_1}")

# Naming the same variable for both pipes merges them in output order.
execute_process(
    COMMAND "${CMAKE_COMMAND}" --build "${BUILD_DIR}" --target "${TARGET}"
    RESULT_VARIABLE result
    OUTPUT_VARIABLE output
    ERROR_VARIABLE output)

if(result EQUAL 0)
    message(FATAL_ERROR
        "${SOURCE} compiled, but it must fail to compile.\nBuild output:\n${output}")
endif()
if(NOT output MATCHES "${expect}")
    message(FATAL_ERROR
        "${SOURCE} failed to compile as it should, but the diagnostics do not match "
        "the expected regex '${expect}'.\nBuild output:\n${output}")
endif()
message(STATUS "${SOURCE}: failed to compile as expected, output matches '${expect}'")
