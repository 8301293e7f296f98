# Checks that the library's includes only go downward through its layers (ctest test
# `include_layers`; docs/architecture.md, "Layers").
#
#   cmake -D INCLUDE_DIR=<dir holding backplane/> -P check_layers.cmake
#
# Every file under INCLUDE_DIR/backplane belongs to one layer, found from its path by the
# first matching rule of `layer_rules` below. Each `#include <backplane/...>` in it must
# name a header of the same layer or of one the layer may use (`may_use_<layer>`); a
# library header that includes another with quotes ("...") escapes the check and fails
# too, as does a file that no rule places. Each problem is a line
#
#   <file>:<line>: layer '<from>' includes <backplane/...> of layer '<to>' ...
#
# and the check fails when there is any. Commented-out includes do not count.

cmake_policy(VERSION 3.25)

if(NOT DEFINED INCLUDE_DIR)
    message(FATAL_ERROR "check_layers: -D INCLUDE_DIR=... is required")
endif()
# Relative to the working directory; file(GLOB RELATIVE) needs an absolute path.
cmake_path(ABSOLUTE_PATH INCLUDE_DIR BASE_DIRECTORY "${CMAKE_CURRENT_BINARY_DIR}" NORMALIZE)
if(NOT IS_DIRECTORY "${INCLUDE_DIR}/backplane")
    message(FATAL_ERROR "check_layers: ${INCLUDE_DIR}/backplane is not a directory")
endif()

# The layers, lowest first, and what each may include beside itself. The main line is
# core <- memory <- backends <- erased <- sched <- runtime. The meta backend is a backend
# built over erased devices and may use the scheduler's types: it sits above sched, so no
# other backend may include it. io, conformance and mpi are leaves: each uses what it
# needs, and nothing in the library includes them.
set(layers core memory backends erased sched meta runtime io conformance mpi)
set(may_use_core "")
set(may_use_memory core)
set(may_use_backends core memory)
set(may_use_erased core memory backends)
set(may_use_sched core memory backends erased)
set(may_use_meta core memory backends erased sched)
set(may_use_runtime core memory backends erased sched meta)
set(may_use_io core memory)
set(may_use_conformance core memory backends)
set(may_use_mpi core memory backends erased sched meta)

# Path (relative to INCLUDE_DIR/backplane) -> layer: "<regex>=<layer>", the first match
# wins, so backends/meta comes before backends; the NCCL collective (a meta::collective
# kept with the CUDA backend) is in the meta layer. Umbrella headers sit with what they bring:
# backplane.hpp (core, memory and the CPU backend) and enabled.hpp (the backends compiled
# in) are in the backends layer.
set(layer_rules
    "^core(/|\\.hpp$)=core"
    "^memory(/|\\.hpp$)=memory"
    "^backends/cuda/nccl\\.hpp$=meta"
    "^backends/meta(/|\\.hpp$)=meta"
    "^backends/=backends"
    "^(backplane|enabled)\\.hpp$=backends"
    "^erased(/|\\.hpp$)=erased"
    "^sched(/|\\.hpp$)=sched"
    "^runtime(/|\\.hpp$)=runtime"
    "^io(/|\\.hpp$)=io"
    "^conformance(/|\\.hpp$)=conformance"
    "^mpi(/|\\.hpp$)=mpi")

foreach(layer IN LISTS layers)
    foreach(used IN LISTS may_use_${layer})
        if(NOT used IN_LIST layers)
            message(FATAL_ERROR "check_layers: may_use_${layer} names '${used}', which is no layer")
        endif()
    endforeach()
endforeach()

# layer_of(<out var> <path relative to backplane/>): its layer, or "" when no rule places it.
function(layer_of out rel)
    foreach(rule IN LISTS layer_rules)
        string(REGEX MATCH "^(.*)=([a-z_]+)$" _ "${rule}")
        set(regex "${CMAKE_MATCH_1}")
        set(layer "${CMAKE_MATCH_2}") # before the next match overwrites CMAKE_MATCH_<n>
        if(rel MATCHES "${regex}")
            set(${out} "${layer}" PARENT_SCOPE)
            return()
        endif()
    endforeach()
    set(${out} "" PARENT_SCOPE)
endfunction()

set(root "${INCLUDE_DIR}/backplane")
file(GLOB_RECURSE files LIST_DIRECTORIES false RELATIVE "${root}" "${root}/*")
list(SORT files)
if(files STREQUAL "")
    message(FATAL_ERROR "check_layers: no file under ${root}: nothing was checked")
endif()
set(problems "")
set(n_includes 0)

foreach(rel IN LISTS files)
    set(path "${root}/${rel}")
    layer_of(from "${rel}")
    if(from STREQUAL "")
        string(APPEND problems "${path}: in no layer: add a rule for it to layer_rules in cmake/check_layers.cmake\n")
        continue()
    endif()
    file(READ "${path}" text)
    # Only files that include something are read line by line.
    if(NOT text MATCHES "#[ \t]*include")
        continue()
    endif()
    # One list element per line: characters that CMake lists treat specially are
    # replaced first (none of them can be part of an include's path).
    string(REPLACE "\\" "/" text "${text}")
    string(REPLACE ";" "," text "${text}")
    string(REPLACE "[" "(" text "${text}")
    string(REPLACE "]" ")" text "${text}")
    string(REPLACE "\r" "" text "${text}")
    string(REPLACE "\n" ";" lines "${text}")
    set(line_no 0)
    # C++ headers must include the library's headers by their full name; shaders include
    # their neighbours with quotes, which glslc resolves.
    set(is_cxx FALSE)
    if(rel MATCHES "\\.(hpp|h|cuh)$")
        set(is_cxx TRUE)
    endif()
    foreach(line IN LISTS lines)
        math(EXPR line_no "${line_no} + 1")
        if(NOT line MATCHES "^[ \t]*#[ \t]*include")
            continue()
        endif()
        if(line MATCHES "^[ \t]*#[ \t]*include[ \t]*<backplane/([^>]+)>")
            set(target "${CMAKE_MATCH_1}")
            math(EXPR n_includes "${n_includes} + 1")
            layer_of(to "${target}")
            if(to STREQUAL "")
                string(APPEND problems "${path}:${line_no}: layer '${from}' includes <backplane/${target}>, "
                                       "which is in no layer\n")
            elseif(NOT to STREQUAL from AND NOT to IN_LIST may_use_${from})
                list(JOIN may_use_${from} ", " allowed)
                if(allowed STREQUAL "")
                    set(allowed "nothing")
                endif()
                string(APPEND problems "${path}:${line_no}: layer '${from}' includes <backplane/${target}> of "
                                       "layer '${to}' (upward: '${from}' may use ${allowed})\n")
            endif()
        elseif(is_cxx AND line MATCHES "^[ \t]*#[ \t]*include[ \t]*\"([^\"]+)\"")
            string(APPEND problems "${path}:${line_no}: layer '${from}' includes \"${CMAKE_MATCH_1}\" with quotes: "
                                   "include library headers as <backplane/...>\n")
        endif()
    endforeach()
endforeach()

if(NOT problems STREQUAL "")
    message(FATAL_ERROR "check_layers: includes that break the layering (docs/architecture.md, Layers):\n${problems}")
endif()
list(LENGTH files n_files)
message(STATUS "check_layers: ${n_includes} includes in ${n_files} files, all downward")
