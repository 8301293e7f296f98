# The test lsan_foreign_module (asan preset): a leak inside a foreign library that its
# host unloads must still be attributable to that library, so that a suppression can name
# it, while a leak of the host's own stays reported.
#
#   cmake -D HOST=<foreign_module_host> -D MODULE=<libbp_foreign_module.so>
#         -D SUPPRESSIONS=<scripts/lsan.supp> -D WORK_DIR=<dir> -P run_lsan_foreign_module.cmake
#
# 1. interposer on, suppressions naming the module: the leak is suppressed, exit 0;
# 2. interposer off (BACKPLANE_TEST_UNLOAD_MODULES=1): the module is gone at exit and the
#    leak is reported without its name (from "<unknown module>", or from whatever module
#    the sanitizer's stale list puts there), so no suppression can name it: the failure
#    that scripts/lsan.supp alone could not handle;
# 3. interposer on, the host leaks too: reported, naming the host's own function.

foreach(var HOST MODULE SUPPRESSIONS WORK_DIR)
    if(NOT DEFINED ${var})
        message(FATAL_ERROR "run_lsan_foreign_module: -D ${var}=... is required")
    endif()
endforeach()

file(MAKE_DIRECTORY "${WORK_DIR}")
set(supp "${WORK_DIR}/lsan_foreign_module.supp")
file(READ "${SUPPRESSIONS}" project_supp)
get_filename_component(module_file "${MODULE}" NAME)
file(WRITE "${supp}" "${project_supp}\nleak:${module_file}\n")

# run(<result var> <output var> <unload 0|1> <host args>...)
function(run rc_var out_var unload)
    execute_process(
        COMMAND "${CMAKE_COMMAND}" -E env
            "BACKPLANE_TEST_UNLOAD_MODULES=${unload}"
            "ASAN_OPTIONS=detect_leaks=1:abort_on_error=0"
            "LSAN_OPTIONS=suppressions=${supp}:print_suppressions=1"
            "${HOST}" "${MODULE}" ${ARGN}
        RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
    set(${rc_var} "${rc}" PARENT_SCOPE)
    set(${out_var} "${out}" PARENT_SCOPE)
endfunction()

run(rc out 0)
if(NOT rc EQUAL 0)
    message(FATAL_ERROR "1. the foreign module's leak was not suppressed (exit ${rc}):\n${out}")
endif()
if(NOT out MATCHES "${module_file}")
    message(FATAL_ERROR "1. the suppression used does not name ${module_file}:\n${out}")
endif()

run(rc out 1)
if(rc EQUAL 0 OR out MATCHES "${module_file}")
    message(FATAL_ERROR "2. with the module unloaded, the leak should be reported without the module's name "
        "(exit ${rc}):\n${out}")
endif()

run(rc out 0 own)
if(rc EQUAL 0 OR NOT out MATCHES "main")
    message(FATAL_ERROR "3. the host's own leak was hidden (exit ${rc}):\n${out}")
endif()
message(STATUS "run_lsan_foreign_module: foreign leak attributed and suppressed; own leak reported")
