# Tests cmake/check_test_inventory.cmake (ctest `ctest_inventory_selftest`): a stand-in
# test program (a shell script answering like a Catch2 program with the cases alpha, beta
# and gamma) under two hand-written ctest trees. A tree with one entry per case passes;
# a tree with an entry that selects nothing, a case run twice and a case never run fails,
# naming all three; two cases whose names differ only in case fail (Catch2 ignores case);
# specs with the escapes of catch_discover_tests are read as names; a name with a ';'
# fails.
#
#   cmake -D CTEST_COMMAND=<ctest> -D WORK_DIR=<dir> -P test_check_test_inventory.cmake

foreach(var CTEST_COMMAND WORK_DIR)
    if(NOT DEFINED ${var})
        message(FATAL_ERROR "test_check_test_inventory: -D ${var}=... is required")
    endif()
endforeach()
set(checker "${CMAKE_CURRENT_LIST_DIR}/check_test_inventory.cmake")

# fake_tree(<dir> <names> <entries>): a program listing <names> (separated by '|') and a
# CTestTestfile.cmake with one entry per element of <entries> (the spec; also its name).
function(fake_tree dir names entries)
    file(REMOVE_RECURSE "${dir}")
    file(MAKE_DIRECTORY "${dir}")
    string(REPLACE "|" "\" \"" quoted "${names}")
    file(WRITE "${dir}/fake.sh" "#!/bin/sh
# Catch2's --list-test-names-only: every name, or the one that equals the spec.
spec=\"$1\"
for name in \"${quoted}\"; do
  if [ \"$spec\" = --list-test-names-only ] || [ \"$spec\" = \"$name\" ]; then echo \"$name\"; fi
done
")
    file(CHMOD "${dir}/fake.sh" PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE)
    set(ctest_file "")
    foreach(entry IN LISTS entries)
        string(APPEND ctest_file "add_test([==[${entry}]==] \"${dir}/fake.sh\" [==[${entry}]==] --warn NoTests)\n")
    endforeach()
    file(WRITE "${dir}/CTestTestfile.cmake" "${ctest_file}")
    file(WRITE "${dir}/programs.txt" "${dir}/fake.sh\n")
endfunction()

# check(<rc var> <output var> <dir>)
function(check rc_var out_var dir)
    execute_process(COMMAND "${CMAKE_COMMAND}" -D "CTEST_COMMAND=${CTEST_COMMAND}" -D "BUILD_DIR=${dir}"
            -D "EXECUTABLES_FILE=${dir}/programs.txt" -P "${checker}"
        RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
    # CMake wraps its messages at the terminal width: match on one line of single spaces.
    string(REGEX REPLACE "[ \t\r\n]+" " " out "${out}")
    set(${rc_var} "${rc}" PARENT_SCOPE)
    set(${out_var} "${out}" PARENT_SCOPE)
endfunction()

fake_tree("${WORK_DIR}/good" "alpha|beta|gamma" "alpha;beta;gamma")
check(rc out "${WORK_DIR}/good")
if(NOT rc EQUAL 0)
    message(FATAL_ERROR "a tree with one entry per case failed:\n${out}")
endif()

fake_tree("${WORK_DIR}/bad" "alpha|beta|gamma" "alpha;beta;beta;delta")
check(rc out "${WORK_DIR}/bad")
if(rc EQUAL 0)
    message(FATAL_ERROR "a tree with a wrong entry, a case run twice and one never run passed:\n${out}")
endif()
foreach(expected "entry 'delta' selects 0" "'beta' of [^ ]+ is run by 2" "'gamma' of [^ ]+ is run by 0")
    if(NOT out MATCHES "${expected}")
        message(FATAL_ERROR "the report lacks '${expected}':\n${out}")
    endif()
endforeach()

# A plain spec is resolved from the list of names, as Catch2 matches it: ignoring case.
fake_tree("${WORK_DIR}/case" "alpha|Alpha|beta" "alpha;Alpha;beta")
check(rc out "${WORK_DIR}/case")
if(rc EQUAL 0 OR NOT out MATCHES "entry 'alpha' selects 2" OR NOT out MATCHES "'Alpha' of [^ ]+ is run by 2")
    message(FATAL_ERROR "two cases whose names differ only in case passed:\n${out}")
endif()

# The escaped ',', '[' and ']' of catch_discover_tests' specs are those characters: such a
# spec is resolved from the list of names too (the stand-in program, asked, would select
# nothing, as it compares the spec unread).
fake_tree("${WORK_DIR}/escaped" "a, b|c [d]" "a\\, b;c \\[d\\]")
check(rc out "${WORK_DIR}/escaped")
if(NOT rc EQUAL 0)
    message(FATAL_ERROR "a tree whose specs escape ',', '[' and ']' failed:\n${out}")
endif()
fake_tree("${WORK_DIR}/escaped_bad" "a, b|c [d]" "a\\, b;c \\[d\\];a\\, c")
check(rc out "${WORK_DIR}/escaped_bad")
if(rc EQUAL 0 OR NOT out MATCHES "entry 'a\\\\, c' selects 0")
    message(FATAL_ERROR "an escaped spec naming no case passed:\n${out}")
endif()

fake_tree("${WORK_DIR}/split" "alpha|one; two" "alpha;one;two")
check(rc out "${WORK_DIR}/split")
if(rc EQUAL 0 OR NOT out MATCHES "contain ';'")
    message(FATAL_ERROR "a case name with ';' passed:\n${out}")
endif()
message(STATUS "test_check_test_inventory: good tree passes, each kind of bad tree fails")
