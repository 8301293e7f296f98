// libFuzzer target for the GGUF reader: any bytes must parse or be refused with a
// status, never crash, hang or read out of bounds (built with -fsanitize=fuzzer,address,
// undefined by cmake/run_fuzzer.cmake). What parses is used: every metadata value read,
// every tensor loaded over the bytes and read back.
//
// With BACKPLANE_FUZZ_SEED_DIR set, LLVMFuzzerInitialize first writes a few valid files
// there (every tensor type, every value type, nested arrays) as the starting corpus.

#include <backplane/backplane.hpp>
#include <backplane/io/gguf.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

namespace {

namespace gg = backplane::gguf;
using namespace backplane;

void write_seeds(const std::filesystem::path& dir) {
    std::filesystem::create_directories(dir);
    for (int variant = 0; variant < 3; ++variant) {
        context ctx;
        gg::writer w;
        (void)w.set("general.architecture", "llama");
        (void)w.set("llama.block_count", std::uint32_t{2});
        (void)w.set("f", 0.5f);
        (void)w.set("tokens", gg::array{gg::value_type::string, {gg::value("a"), gg::value("b")}});
        if (variant == 2) (void)w.set("general.alignment", std::uint32_t{64});
        int i = 0;
        for (elem_type t : all_elem_types) {
            if (variant == 1 && i > 1) break;
            tensor* x = ctx.new_tensor(t, {256, 2}); // whole blocks of every type
            x->name = "t" + std::to_string(i++);
            std::vector<float> v(512, 0.25f);
            from_float_row(t, v.data(), x->data, 512);
            (void)w.add_tensor(*x);
        }
        (void)w.write(dir / ("seed" + std::to_string(variant) + ".gguf"));
    }
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    if (const char* dir = std::getenv("BACKPLANE_FUZZ_SEED_DIR")) write_seeds(dir);
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    // a private, writable copy: a CPU buffer over the data may be written
    std::vector<std::byte> bytes(reinterpret_cast<const std::byte*>(data), reinterpret_cast<const std::byte*>(data) + size);
    auto f = gg::file::parse(std::span<const std::byte>(bytes.data(), bytes.size()));
    if (!f) return 0;
    std::size_t sink = 0;
    for (const auto& [k, v] : f->metadata()) {
        sink += k.size() + static_cast<std::size_t>(v.type());
        if (auto s = f->get<std::string>(k)) sink += s->size();
        if (auto n = f->get<std::int64_t>(k)) sink += static_cast<std::size_t>(*n);
    }
    context ctx{context_params{.no_alloc = true}};
    if (auto l = f->load(ctx)) {
        for (tensor* t : l->tensors) {
            auto values = tensor_read_f32(*t);
            if (values) sink += values->size();
        }
    }
    return sink == 42 ? 0 : 0;
}
