#!/usr/bin/env bash
# Ensures the Debian packages needed to build and test backplane are installed.
#   scripts/deps.sh          check, install what is missing (as root) or print
#                            the command to run and exit 1
#   . scripts/deps.sh        define BACKPLANE_PACKAGES and backplane_deps only
# Every backend's packages are in this one list. Vulkan: the loader and headers
# (libvulkan-dev), the build-time shader compiler and validator (glslc;
# spirv-tools, for spirv-val), a driver that runs without a GPU (mesa-vulkan-drivers:
# lavapipe) and the validation layers (vulkan-validationlayers).
BACKPLANE_PACKAGES="cmake ninja-build g++ pkg-config catch2 libfmt-dev libbenchmark-dev libopenblas-dev"
BACKPLANE_PACKAGES+=" libvulkan-dev glslc spirv-tools mesa-vulkan-drivers vulkan-validationlayers"
# clang (with its libFuzzer runtime): the GGUF reader's fuzz test
BACKPLANE_PACKAGES+=" clang"
# libnuma and libmemkind, loaded at run time by the NUMA and high-bandwidth memory buffer
# types (memory/host_memory.hpp): their tests take the library's path, not only "missing"
BACKPLANE_PACKAGES+=" libnuma1 libmemkind0"
# Open MPI: the MPI component (backplane::mpi) and mpirun, which runs its tests (label mpi)
BACKPLANE_PACKAGES+=" libopenmpi-dev openmpi-bin"

backplane_deps() {
    if ! command -v dpkg-query >/dev/null 2>&1; then
        echo "deps: no dpkg here; install the equivalents of: ${BACKPLANE_PACKAGES}" >&2
        return 0  # not Debian: let CMake report what is really missing
    fi

    local pkg missing=()
    for pkg in ${BACKPLANE_PACKAGES}; do
        # `dpkg -s` also succeeds for removed packages that left config files;
        # the status word tells them apart.
        if ! dpkg-query -W -f='${Status}' "${pkg}" 2>/dev/null | grep -q 'install ok installed'; then
            missing+=("${pkg}")
        fi
    done
    if [ "${#missing[@]}" -eq 0 ]; then
        return 0
    fi

    local cmd="apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ${missing[*]}"
    if [ "$(id -u)" -eq 0 ]; then
        echo "deps: installing ${missing[*]}"
        bash -c "${cmd}"
    else
        echo "deps: missing packages: ${missing[*]}" >&2
        echo "deps: run as root:" >&2
        echo "  ${cmd}" >&2
        return 1
    fi
}

# Executed (not sourced): do the check now.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    set -euo pipefail
    backplane_deps
fi
