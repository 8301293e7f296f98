// Dumps llama.cpp's logits for a fixed sequence of token ids: the reference that backplane's
// llama.cpp comparison reads (scripts/llamacpp/make_reference writes it for every file).
// Built against a llama.cpp checkout's llama.h and libllama, never by backplane's own build.
//
//   dump_logits MODEL.gguf OUT.bin N_PROMPT N_STEPS
//
// The ids: id(k) = (7919 k + 13) mod n_vocab for k = 0 ... N_PROMPT + N_STEPS - 1. The
// first N_PROMPT go in one batch (the logits of every position kept), then one id per
// decode. One thread, flash attention off, the KV cache in F32 (backplane's default).
//
// OUT.bin, little-endian: "BPLL", u32 version (1), u32 n_vocab, u32 n_prompt, u32 n_steps,
// i32 ids[n_prompt + n_steps], f32 logits[(n_prompt + n_steps) * n_vocab] (position-major).

#include <llama.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

int fail(const std::string& why) {
    std::fprintf(stderr, "dump_logits: %s\n", why.c_str());
    return 1;
}

bool write_all(std::FILE* f, const void* p, std::size_t bytes) { return std::fwrite(p, 1, bytes, f) == bytes; }

// The logits of every position the batch asked for, appended to out.
bool decode(llama_context* ctx, const std::vector<llama_token>& ids, int first, int n, int n_vocab,
            std::vector<float>& out) {
    llama_batch batch = llama_batch_init(n, 0, 1);
    for (int i = 0; i < n; ++i) {
        batch.token[i] = ids[static_cast<std::size_t>(first + i)];
        batch.pos[i] = first + i;
        batch.n_seq_id[i] = 1;
        batch.seq_id[i][0] = 0;
        batch.logits[i] = 1;
    }
    batch.n_tokens = n;
    const bool ok = llama_decode(ctx, batch) == 0;
    for (int i = 0; ok && i < n; ++i) {
        const float* row = llama_get_logits_ith(ctx, i);
        out.insert(out.end(), row, row + n_vocab);
    }
    llama_batch_free(batch);
    return ok;
}

} // namespace

int main(int argc, char** argv) {
    if (argc != 5)
        return fail("usage: dump_logits MODEL.gguf OUT.bin N_PROMPT N_STEPS");
    const int n_prompt = std::atoi(argv[3]), n_steps = std::atoi(argv[4]);
    if (n_prompt < 1 || n_steps < 0)
        return fail("N_PROMPT must be >= 1 and N_STEPS >= 0");

    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    llama_model* model = llama_model_load_from_file(argv[1], mp);
    if (model == nullptr)
        return fail(std::string("cannot load ") + argv[1]);
    const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));

    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = static_cast<std::uint32_t>(n_prompt + n_steps);
    cp.n_batch = cp.n_ubatch = static_cast<std::uint32_t>(n_prompt);
    cp.n_seq_max = 1;
    cp.n_threads = cp.n_threads_batch = 1;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    cp.type_k = cp.type_v = GGML_TYPE_F32;
    llama_context* ctx = llama_init_from_model(model, cp);
    if (ctx == nullptr)
        return fail("cannot create a context");

    std::vector<llama_token> ids(static_cast<std::size_t>(n_prompt + n_steps));
    for (std::size_t k = 0; k < ids.size(); ++k)
        ids[k] = static_cast<llama_token>((7919 * static_cast<std::int64_t>(k) + 13) % n_vocab);

    std::vector<float> logits;
    bool ok = decode(ctx, ids, 0, n_prompt, n_vocab, logits);
    for (int s = 0; ok && s < n_steps; ++s)
        ok = decode(ctx, ids, n_prompt + s, 1, n_vocab, logits);
    llama_free(ctx);
    llama_model_free(model);
    if (!ok)
        return fail("llama_decode failed");

    std::FILE* f = std::fopen(argv[2], "wb");
    if (f == nullptr)
        return fail(std::string("cannot write ") + argv[2]);
    const std::uint32_t header[] = {1, static_cast<std::uint32_t>(n_vocab), static_cast<std::uint32_t>(n_prompt),
                                    static_cast<std::uint32_t>(n_steps)};
    ok = write_all(f, "BPLL", 4) && write_all(f, header, sizeof header) &&
         write_all(f, ids.data(), ids.size() * sizeof(llama_token)) &&
         write_all(f, logits.data(), logits.size() * sizeof(float));
    ok = std::fclose(f) == 0 && ok;
    if (!ok)
        return fail(std::string("cannot write ") + argv[2]);
    std::printf("%s: %d positions of %d logits\n", argv[2], n_prompt + n_steps, n_vocab);
    return 0;
}
