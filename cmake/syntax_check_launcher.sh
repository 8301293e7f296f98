#!/bin/sh
# The compiler launcher of the header self-containment check (tests/CMakeLists.txt,
# docs/testing.md): runs the compile command CMake hands it with another compiler in place
# of the configured one and -fsyntax-only, then creates the object file the build expects.
# A header is checked by parsing it, its includes and what it instantiates; no code is
# generated.
#
#   syntax_check_launcher.sh <checking compiler> <configured compiler> <its arguments...>
set -eu
checker=$1
shift 2
object=""
previous=""
for argument in "$@"; do
    if [ "$previous" = "-o" ]; then
        object=$argument
    fi
    previous=$argument
done
"$checker" -fsyntax-only "$@"
if [ -n "$object" ]; then
    : > "$object"
fi
