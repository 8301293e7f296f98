# What this machine has for the optional backends, for scripts/demo and scripts/test
# (sourced; defines functions only). Nothing here builds backplane.

# bp_nvidia_gpus: one line per NVIDIA GPU the driver sees, "<compute capability> <name>"
# (e.g. "9.0 NVIDIA H200"); nothing without a GPU or a driver.
bp_nvidia_gpus() {
    command -v nvidia-smi >/dev/null 2>&1 || return 0
    nvidia-smi --query-gpu=compute_cap,name --format=csv,noheader 2>/dev/null |
        sed -n 's/^\([0-9][0-9]*\.[0-9]\), */\1 /p'
}

# bp_cuda_architectures: the CUDA architectures of this machine's GPUs for CMake
# ("90-real", "80-real;90-real"); nothing without a GPU.
bp_cuda_architectures() {
    bp_nvidia_gpus | awk '{ sub(/\./, "", $1); print $1 "-real" }' | sort -u | paste -sd ';' -
}

# bp_vulkan_devices <work dir>: one line per Vulkan device, "<kind> <name>" (kind:
# discrete, integrated, virtual, cpu or other; scripts/vulkan_devices.c), built there
# with the C compiler; nothing without a Vulkan driver, the loader's headers or a compiler.
bp_vulkan_devices() {
    local dir=$1 root
    root="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
    mkdir -p "${dir}"
    local probe="${dir}/vulkan_devices"
    if [ ! -x "${probe}" ] || [ "${root}/vulkan_devices.c" -nt "${probe}" ]; then
        cc -O1 -o "${probe}" "${root}/vulkan_devices.c" -lvulkan 2>/dev/null || return 0
    fi
    "${probe}" 2>/dev/null || true
}
