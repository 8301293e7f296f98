# Runs a failure scenario of the MPI tests (tests/mpi/mpi_failure.cpp) and checks that
# every rank but the one that stopped printed "rank R: PASS", none "FAIL", and that
# mpirun itself ended within LIMIT seconds (no rank hung).
#   cmake -D "MPIRUN=<mpirun;flags...>" -D NP=<ranks> -D PROGRAM=<path> -D MODE=killed|silent|pipeline
#         -D TIMEOUT_MS=<ms> -D LIMIT=<s> -P run_mpi_failure.cmake
foreach(var MPIRUN NP PROGRAM MODE TIMEOUT_MS LIMIT)
    if(NOT DEFINED ${var})
        message(FATAL_ERROR "run_mpi_failure.cmake: ${var} is not set")
    endif()
endforeach()
string(TIMESTAMP start "%s")
execute_process(
    COMMAND ${MPIRUN} -np ${NP} "${PROGRAM}" ${MODE} ${TIMEOUT_MS}
    TIMEOUT ${LIMIT}
    RESULT_VARIABLE rc
    OUTPUT_VARIABLE out
    ERROR_VARIABLE err)
string(TIMESTAMP stop "%s")
math(EXPR elapsed "${stop} - ${start}")
message("${out}")
string(REGEX MATCHALL "rank [0-9]+: PASS" passed "${out}")
list(LENGTH passed n_passed)
math(EXPR expected "${NP} - 1")
if(rc MATCHES "timeout")
    message(FATAL_ERROR "mpirun did not end within ${LIMIT} s (${rc}): a rank hung\n${err}")
endif()
if(out MATCHES "FAIL")
    message(FATAL_ERROR "a rank failed its check\n${err}")
endif()
if(NOT n_passed EQUAL expected)
    message(FATAL_ERROR "${n_passed} of the ${expected} remaining ranks reported the failure\n${err}")
endif()
message("run_mpi_failure: ${MODE}: ${expected} ranks failed with a clear error; mpirun ended after ${elapsed} s")
