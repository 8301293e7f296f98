# Checks that ctest runs every Catch2 test case exactly once (ctest test `ctest_inventory`).
#
#   cmake -D CTEST_COMMAND=<ctest> -D BUILD_DIR=<build dir> -D EXECUTABLES_FILE=<file> \
#         -P check_test_inventory.cmake
#
# EXECUTABLES_FILE lists the Catch2 test programs of the build, one path a line. For each
# program, every ctest entry that runs it must select exactly one test case (asked of the
# program itself with the entry's own test spec), and every test case the program has must
# be selected by exactly one entry. A name that ctest splits (a ';' in it), one that Catch2
# reads as a pattern, a program whose discovery failed or two entries naming one case all
# fail here, each with a line saying which.

cmake_policy(VERSION 3.25)

foreach(var CTEST_COMMAND BUILD_DIR EXECUTABLES_FILE)
    if(NOT DEFINED ${var})
        message(FATAL_ERROR "check_test_inventory: -D ${var}=... is required")
    endif()
endforeach()

# lines_of(<out var> <text>): the non-empty lines of <text>, as a list (';' escaped).
function(lines_of out text)
    string(REPLACE ";" "\\;" text "${text}")
    string(REPLACE "\r" "" text "${text}")
    string(REPLACE "\n" ";" lines "${text}")
    list(FILTER lines EXCLUDE REGEX "^[ \t]*$")
    set(${out} "${lines}" PARENT_SCOPE)
endfunction()

# names_of(<out var> <program> [<spec>]): the test case names <program> selects.
function(names_of out program)
    execute_process(COMMAND "${program}" ${ARGN} --list-test-names-only
        OUTPUT_VARIABLE listed ERROR_VARIABLE listed_err RESULT_VARIABLE rc)
    if(rc LESS 0 OR NOT rc MATCHES "^[0-9]+$")
        message(FATAL_ERROR "check_test_inventory: ${program} ${ARGN} --list-test-names-only failed (${rc}): ${listed_err}")
    endif()
    if(listed MATCHES ";")
        # ctest splits such a name into two entries that each run nothing.
        string(REGEX MATCHALL "[^\n]*;[^\n]*" bad "${listed}")
        message(FATAL_ERROR "check_test_inventory: test case names of ${program} contain ';': ${bad}")
    endif()
    lines_of(names "${listed}")
    set(${out} "${names}" PARENT_SCOPE)
endfunction()

# plain_name(<out var> <spec>): the one name Catch2 reads <spec> as, which selects the
# cases whose names equal it but for case (its name patterns ignore case); empty where it
# reads <spec> as anything else. Such a spec has no character its test-spec parser treats
# specially (wildcards, tags, exclusion, alternatives, quotes, escapes) but the escaped
# ',', '[' and ']' that catch_discover_tests writes for those characters of a name, no
# leading '-' (an option) or "exclude:", no space at either end (trimmed). It is resolved
# from the program's list of names; any other spec is asked of the program itself, a
# process per spec.
function(plain_name out spec)
    string(REGEX REPLACE "\\\\[],[]" "" rest "${spec}")
    if(rest MATCHES "[*,~\"\\]" OR rest MATCHES "\\[" OR rest MATCHES "\\]"
       OR spec MATCHES "^[- ]" OR spec MATCHES "^exclude:" OR spec MATCHES " $")
        set(${out} "" PARENT_SCOPE)
    else()
        string(REGEX REPLACE "\\\\([],[])" "\\1" name "${spec}")
        set(${out} "${name}" PARENT_SCOPE)
    endif()
endfunction()

execute_process(COMMAND "${CTEST_COMMAND}" --show-only=json-v1
    WORKING_DIRECTORY "${BUILD_DIR}" OUTPUT_VARIABLE json RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
    message(FATAL_ERROR "check_test_inventory: ctest --show-only=json-v1 failed (${rc})")
endif()

file(STRINGS "${EXECUTABLES_FILE}" programs)
set(problems 0)
set(checked 0)

# The specs and names of the ctest entries, grouped by the program they run: one pass over
# the list, each entry taken out of the document once (string(JSON) parses what it is given
# on every call, so querying the whole document per entry and program is quadratic).
string(JSON n_tests LENGTH "${json}" tests)
math(EXPR last "${n_tests} - 1")
foreach(i RANGE ${last})
    string(JSON test GET "${json}" tests ${i})
    string(JSON cmd_len ERROR_VARIABLE no_cmd LENGTH "${test}" command)
    if(no_cmd OR cmd_len LESS 2)
        continue()
    endif()
    string(JSON exe GET "${test}" command 0)
    string(JSON spec GET "${test}" command 1)
    string(JSON entry GET "${test}" name)
    string(REPLACE ";" "\\;" spec "${spec}")
    string(REPLACE ";" "\\;" entry "${entry}")
    string(MD5 program_key "${exe}")
    list(APPEND specs_${program_key} "${spec}")
    list(APPEND entries_${program_key} "${entry}")
endforeach()

foreach(program IN LISTS programs)
    string(MD5 program_key "${program}")
    set(specs "${specs_${program_key}}")
    set(entries "${entries_${program_key}}")

    names_of(all_names "${program}")
    foreach(name IN LISTS all_names)
        string(MD5 key "${name}")
        set(count_${key} 0)
        # the names of each lower-case spelling, per program
        string(TOLOWER "${name}" lower)
        string(MD5 lower_key "${program_key}:${lower}")
        list(APPEND named_${lower_key} "${name}")
    endforeach()

    list(LENGTH specs n_specs)
    if(n_specs EQUAL 0)
        message(SEND_ERROR "check_test_inventory: ${program} has no ctest entry (test discovery failed?)")
        math(EXPR problems "${problems} + 1")
        continue()
    endif()
    math(EXPR last_spec "${n_specs} - 1")
    foreach(j RANGE ${last_spec})
        list(GET specs ${j} spec)
        list(GET entries ${j} entry)
        plain_name(name "${spec}")
        if(NOT name STREQUAL "")
            string(TOLOWER "${name}" lower)
            string(MD5 lower_key "${program_key}:${lower}")
            set(selected "${named_${lower_key}}")
        else()
            names_of(selected "${program}" "${spec}")
        endif()
        list(LENGTH selected n_selected)
        if(NOT n_selected EQUAL 1)
            message(SEND_ERROR "check_test_inventory: ctest entry '${entry}' selects ${n_selected} test cases of ${program} (exactly 1 expected)")
            math(EXPR problems "${problems} + 1")
        endif()
        foreach(name IN LISTS selected)
            string(MD5 key "${name}")
            if(DEFINED count_${key})
                math(EXPR count_${key} "${count_${key}} + 1")
            endif()
        endforeach()
    endforeach()

    foreach(name IN LISTS all_names)
        string(MD5 key "${name}")
        math(EXPR checked "${checked} + 1")
        if(NOT count_${key} EQUAL 1)
            message(SEND_ERROR "check_test_inventory: test case '${name}' of ${program} is run by ${count_${key}} ctest entries (exactly 1 expected)")
            math(EXPR problems "${problems} + 1")
        endif()
    endforeach()
endforeach()

if(problems GREATER 0)
    message(FATAL_ERROR "check_test_inventory: ${problems} problem(s) in ${checked} test cases")
endif()
list(LENGTH programs n_programs)
message(STATUS "check_test_inventory: ${checked} test cases of ${n_programs} programs, each run by exactly one ctest entry")
