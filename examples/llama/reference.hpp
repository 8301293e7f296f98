#pragma once
// Another implementation's logits for a fixed sequence of token ids (llama --reference
// FILE), and how this run's logits compare with them.
//
// The file (little-endian; scripts/llamacpp/dump_logits.cpp writes it from llama.cpp):
//
//   char magic[4] = "BPLL", u32 version = 1, u32 n_vocab, u32 n_prompt, u32 n_steps,
//   i32 ids[n_prompt + n_steps], f32 logits[n_prompt + n_steps][n_vocab]
//
// The first n_prompt ids go in one batch, with the logits of every position kept; then
// one id per step. Row k of the logits is position k's.

#include "model.hpp"

#include "../common/report.hpp"

#include <backplane/core/error.hpp>
#include <backplane/core/types.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <vector>

namespace llama {

struct reference_logits {
    int n_vocab = 0;
    int n_prompt = 0;
    int n_steps = 0;
    std::vector<std::int32_t> ids;   ///< n_prompt + n_steps
    std::vector<float> logits;       ///< (n_prompt + n_steps) * n_vocab, position-major

    int n_positions() const noexcept { return n_prompt + n_steps; }
    std::span<const float> row(int k) const noexcept {
        return std::span(logits).subspan(static_cast<std::size_t>(k) * static_cast<std::size_t>(n_vocab),
                                         static_cast<std::size_t>(n_vocab));
    }
};

/// The file at `path`, checked: magic, version, sizes (at most 2^20 positions and a
/// vocabulary of 2^24), ids within the vocabulary, the exact length.
inline backplane::result<reference_logits> read_reference(const std::filesystem::path& path) {
    using backplane::errc;
    using backplane::status;
    const auto bad = [&](const std::string& why) {
        return status(errc::invalid_argument, "reference " + path.string() + ": " + why);
    };
    std::ifstream f(path, std::ios::binary);
    if (!f)
        return bad("cannot open it");
    char magic[4];
    std::uint32_t h[4]; // version, n_vocab, n_prompt, n_steps
    if (!f.read(magic, 4) || !f.read(reinterpret_cast<char*>(h), sizeof h))
        return bad("shorter than its header");
    if (std::memcmp(magic, "BPLL", 4) != 0)
        return bad("not a logits file (no BPLL magic)");
    if (h[0] != 1)
        return bad("version " + std::to_string(h[0]) + ", this program reads 1");
    if (h[1] == 0 || h[1] > (1u << 24) || h[2] == 0 || h[2] > (1u << 20) || h[3] > (1u << 20))
        return bad("implausible sizes (n_vocab " + std::to_string(h[1]) + ", n_prompt " +
                   std::to_string(h[2]) + ", n_steps " + std::to_string(h[3]) + ")");
    reference_logits r;
    r.n_vocab = static_cast<int>(h[1]);
    r.n_prompt = static_cast<int>(h[2]);
    r.n_steps = static_cast<int>(h[3]);
    const auto n = static_cast<std::size_t>(r.n_positions());
    r.ids.resize(n);
    r.logits.resize(n * h[1]);
    if (!f.read(reinterpret_cast<char*>(r.ids.data()), static_cast<std::streamsize>(n * 4)) ||
        !f.read(reinterpret_cast<char*>(r.logits.data()), static_cast<std::streamsize>(r.logits.size() * 4)))
        return bad("shorter than its sizes say");
    if (f.peek() != std::char_traits<char>::eof())
        return bad("longer than its sizes say");
    for (const std::int32_t id : r.ids)
        if (id < 0 || id >= r.n_vocab)
            return bad("token id " + std::to_string(id) + " outside the vocabulary of " + std::to_string(r.n_vocab));
    return r;
}

/// The largest NMSE a position may have against llama.cpp's logits (llama --reference;
/// --max-nmse overrides it), by the model's tensor types:
///
/// - quantized ones: 5e-4, the NMSE ggml itself accepts for a quantized mul_mat between
///   two of its backends (its test-backend-ops). ggml's CPU quantizes the activations of
///   every such product to 8 bits, which alone moves the logits by about 1e-4 from exact
///   arithmetic: the Vulkan backend, which multiplies f32 activations, measures up to
///   1.2e-4. The CPU backend quantizes them as ggml's does and agrees to 1e-13, except
///   from the position where a value within the last bits of a rounding boundary takes
///   the neighbouring code on one side (measured up to 6e-5), and for q4_1 and q5_1,
///   whose activation sums ggml rounds to f16 and backplane keeps in f32 (up to 9e-5).
/// - bf16 ones, none quantized: 2e-5. ggml's CPU rounds the activations to bf16 for bf16
///   weights, where backplane multiplies them in f32 (measured 4e-6 to 7e-6).
/// - else 1e-6: the same for f16 weights, rounded to f16 (measured 6e-8 to 1e-7); f32
///   models agree to 1e-13 (gemma2's: 5e-9, ggml's GELU table).
inline double default_max_nmse(const model& m) {
    if (m.any_tensor_type([](backplane::elem_type t) { return backplane::is_quantized(t); }))
        return 5e-4;
    if (m.any_tensor_type([](backplane::elem_type t) { return t == backplane::elem_type::bf16; }))
        return 2e-5;
    return 1e-6;
}

/// One position compared: the largest logit's index on either side, the reference's gap
/// between its two largest logits (how close the argmax is to a tie), and the NMSE.
struct position_comparison {
    int argmax = 0;
    int ref_argmax = 0;
    double ref_margin = 0;
    double nmse = 0;
};

inline position_comparison compare_position(std::span<const float> got, std::span<const float> ref) {
    position_comparison c;
    float first = -INFINITY, second = -INFINITY;
    for (std::size_t j = 0; j < ref.size(); ++j) {
        if (got[j] > got[static_cast<std::size_t>(c.argmax)])
            c.argmax = static_cast<int>(j);
        if (ref[j] > first) {
            second = first;
            first = ref[j];
            c.ref_argmax = static_cast<int>(j);
        } else if (ref[j] > second) {
            second = ref[j];
        }
    }
    c.ref_margin = static_cast<double>(first) - second;
    examples::nmse_sum e;
    e.add(got, ref);
    c.nmse = e.value();
    return c;
}

/// Prints one line a position and a verdict; true when every position has the
/// reference's argmax and an NMSE of at most max_nmse.
inline bool report_reference(const reference_logits& ref, const std::vector<std::vector<float>>& rows,
                             double max_nmse) {
    if (rows.size() != static_cast<std::size_t>(ref.n_positions())) {
        std::printf("reference: %zu positions computed, the reference has %d: FAILED\n", rows.size(),
                    ref.n_positions());
        return false;
    }
    bool ok = true;
    double worst = 0;
    int same = 0;
    for (std::size_t k = 0; k < rows.size(); ++k) {
        const auto c = compare_position(rows[k], ref.row(static_cast<int>(k)));
        const bool good = c.argmax == c.ref_argmax && c.nmse <= max_nmse;
        std::printf("reference: position %zu (%s): argmax %d, reference %d (ahead by %.3g), NMSE %.3g%s\n", k,
                    static_cast<int>(k) < ref.n_prompt ? "prompt" : "step", c.argmax, c.ref_argmax, c.ref_margin,
                    c.nmse, good ? "" : "  <- FAILED");
        ok = ok && good;
        same += c.argmax == c.ref_argmax;
        worst = std::max(worst, c.nmse);
    }
    std::printf("reference: %d of %d positions with the same argmax, largest NMSE %.3g (at most %.0e): %s\n", same,
                ref.n_positions(), worst, max_nmse, ok ? "ok" : "FAILED");
    return ok;
}

} // namespace llama
