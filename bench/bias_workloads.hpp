#pragma once
// Score-bias tiles of the whole causal square (8 heads × 1024 queries × 1024 keys, float32): each
// against the same-traffic pass, a fill of the same tile rows with the same threads, to say what
// each bias's arithmetic costs above writing its tile. ALiBi (slopes only) is the reference
// point; the GRAPE paper's biases read per-token gates (gated GRAPE-A) or sum a path of
// log σ(⟨p_i, R p̂_ℓ⟩/P) terms over P = 16 channels (GRAPE-AP, O(T²·P) per head).
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "cpu/encode_bias.hpp"
#include "grape/encodings/alibi.hpp"
#include "grape/encodings/grape_a_gated.hpp"
#include "grape/encodings/grape_ap.hpp"
#include "rope_workloads.hpp"

namespace grape_bench {

inline constexpr std::int64_t bias_heads = 8;
inline constexpr std::int64_t bias_tokens = 1024;
inline constexpr int bias_p_dim = 16;

/// The biases measured, by case name.
inline const std::vector<std::string>& bias_names() {
  static const std::vector<std::string> names = {"alibi", "grape_a_key_gated", "grape_a_qk_gated",
                                                 "grape_ap_relative"};
  return names;
}

/// The tile buffer of `tokens` × `tokens` per head.
inline std::vector<float>& bias_tile_buffer(std::int64_t tokens) {
  static std::vector<float> out;
  out.resize(static_cast<std::size_t>(bias_heads * tokens * tokens));
  return out;
}

inline grape::cpu::bias_tile whole_tile(std::int64_t tokens, int threads) {
  return {bias_tile_buffer(tokens).data(), bias_heads, 0, tokens, 0, tokens, threads};
}

/// The same-traffic pass: every row of the tile written with a value of its own.
inline void fill_tile(const grape::cpu::bias_tile& t) {
  const std::int64_t rows = t.heads * t.q_len;
#pragma omp parallel for num_threads(t.threads) schedule(static)
  for (std::int64_t r = 0; r < rows; ++r) {
    float* out = t.out + r * t.k_len;
    const float v = -static_cast<float>(r) * runtime_one;
    for (std::int64_t c = 0; c < t.k_len; ++c) out[c] = v;
  }
}

/// One tile of bias `name` over a sequence of `tokens` (instances built once per length).
inline void run_bias(const std::string& name, const grape::cpu::bias_tile& t) {
  const std::int64_t tokens = t.q_len;
  static std::int64_t built_for = -1;
  static std::vector<float> slopes = grape::cpu::alibi_slopes(static_cast<int>(bias_heads));
  static std::optional<grape::bias_instance<grape::gated_linear_bias>> key_gated, qk_gated;
  static std::optional<grape::bias_instance<grape::path_integral_bias>> path;
  if (built_for != tokens) {
    std::mt19937_64 rng(11);
    const int h = static_cast<int>(bias_heads);
    const auto gates = [&] { return grape::detail::normal_vector(rng, static_cast<int>(bias_heads * tokens), 2.0); };
    key_gated = grape::grape_a_key_gated::make({h, 64, grape::detail::normal_vector(rng, h), gates()});
    qk_gated = grape::grape_a_qk_gated::make({h, 64, grape::detail::normal_vector(rng, h), gates(), gates()});
    path = grape::grape_ap_relative::make(
        {h, 64, bias_p_dim, 1e-6, grape::detail::normal_vector(rng, static_cast<int>(bias_heads * tokens * bias_p_dim))});
    built_for = tokens;
  }
  if (name == "alibi") grape::cpu::alibi_tile(t, slopes.data());
  else if (name == "grape_a_key_gated") grape::cpu::bias_tile_of(*key_gated, t);
  else if (name == "grape_a_qk_gated") grape::cpu::bias_tile_of(*qk_gated, t);
  else grape::cpu::bias_tile_of(*path, t);
}

}  // namespace grape_bench
