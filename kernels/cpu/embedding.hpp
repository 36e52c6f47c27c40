#pragma once
// Absolute position embeddings added to token embeddings x [tokens, dim] (row stride in
// elements, float32): sinusoidal (computed from the exact phase) and a learned table lookup.
// Bad arguments throw grape::input_error.
#include <cstdint>

namespace grape::cpu {

struct embedding_rows {
  float* x = nullptr;               // [tokens, dim] with rows row_stride elements apart
  std::int64_t tokens = 0;
  int dim = 0;
  std::int64_t row_stride = 0;
  const std::int64_t* positions = nullptr;  // [tokens], >= 0
  int threads = 0;
};

/// x[t] += PE(positions[t]), PE(m)[2i] = sin(m·ω_i), PE(m)[2i+1] = cos(m·ω_i),
/// ω_i = base^(−2i/dim) (Vaswani et al., pairs interleaved). dim must be even.
void add_sinusoidal(const embedding_rows& rows, double base = 10000.0);

/// The same with ω_i given as dim / 2 exact turn fractions (math::turn_fraction_of: a fraction of
/// a turn scaled by 2^64), as an encoding instance holds them (encode_embedding.hpp).
void add_sinusoidal_turns(const embedding_rows& rows, const std::uint64_t* turn_fractions);

/// x[t] += table[positions[t]], table [table_rows, dim] contiguous; positions < table_rows.
void add_learned(const embedding_rows& rows, const float* table, std::int64_t table_rows);

}  // namespace grape::cpu
