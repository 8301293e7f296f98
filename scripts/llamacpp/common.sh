# shellcheck shell=bash
# What make_reference and check_written share: the families' shapes, the id sequence's
# lengths, llama.cpp's build and dump_logits. Sourced from the repository root.

llama=build/default/examples/llama
families_file=tests/data/llamacpp/families # a family a line: its name, then llama's options
n_prompt=8
n_steps=4
[ -x "$llama" ] || { echo "$0: build $llama first (cmake --build --preset default --target llama)" >&2; exit 1; }

# the families' names, in the file's order
mapfile -t families < <(cut -d' ' -f1 "$families_file")

# write_family NAME FILE [OPTION...]: the family's model written to FILE by backplane
write_family() {
    local name=$1 file=$2
    shift 2
    local opts
    opts=$(awk -v n="$name" '$1 == n { $1 = ""; print }' "$families_file")
    # shellcheck disable=SC2086 # opts holds several options
    "$llama" --write-model --model "$file" $opts "$@" --prompt 1 --gen 0 --device CPU --quiet > /dev/null
}

# prepare_llamacpp DIR DUMP: llama.cpp built in DIR/build (CPU only) when its tools are
# missing, and dump_logits.cpp compiled against it into DUMP
prepare_llamacpp() {
    local lcpp=$1 dump=$2
    if [ ! -x "$lcpp/build/bin/llama-quantize" ] || [ ! -x "$lcpp/build/bin/llama-bench" ]; then
        cmake -S "$lcpp" -B "$lcpp/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF \
            -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF -DGGML_CUDA=OFF -DGGML_VULKAN=OFF \
            -DGGML_BLAS=OFF
        cmake --build "$lcpp/build" -j "${JOBS:-2}" --target llama-quantize llama-bench llama
    fi
    c++ -std=c++17 -O2 -I "$lcpp/include" -I "$lcpp/ggml/include" scripts/llamacpp/dump_logits.cpp \
        -L "$lcpp/build/bin" -lllama -lggml -lggml-base -Wl,-rpath,"$lcpp/build/bin" -o "$dump"
}

# dump_quietly DUMP MODEL OUT: llama.cpp's logits of MODEL into OUT, llama.cpp's log shown
# only when it fails
dump_quietly() {
    local log
    log=$(mktemp)
    if ! "$1" "$2" "$3" "$n_prompt" "$n_steps" > "$log" 2>&1; then
        cat "$log" >&2
        rm -f "$log"
        return 1
    fi
    rm -f "$log"
}

# llamacpp_commit DIR: the checkout's commit (or LLAMA_CPP_COMMIT for a tree without git)
llamacpp_commit() {
    git -C "$1" rev-parse HEAD 2>/dev/null || echo "${LLAMA_CPP_COMMIT:-unknown}"
}
