#pragma once
// Score-bias tiles: the additive bias b_h(i, j) for a block of query positions i and key
// positions j, written as [heads, q_len, k_len] float32 (row-major, contiguous), ready to be
// added to a tile of attention logits. Bad arguments throw grape::input_error.
#include <cstdint>
#include <limits>
#include <vector>

#include "common/bias_tile.hpp"
#include "cpu/kernel_vocabulary.hpp"

namespace grape::cpu {

/// ALiBi slopes of H heads (the exact rule for any H; grape::math::alibi_slope).
std::vector<float> alibi_slopes(int heads, double max_bias = 8.0);

/// ALiBi: b_h(i, j) = −slopes[h]·|i − j|.
void alibi_tile(const bias_tile& tile, const float* slopes);

/// dL/dslope_h = Σ_{i, j} g_h(i, j)·(−|i − j|) for the upstream gradient g of an ALiBi tile of
/// the given shape (tile.out is not used). Written (not accumulated) to grad_slopes[heads].
void alibi_slope_grad(const bias_tile& shape, const float* grad_tile, double* grad_slopes);

/// T5 relative buckets: b_h(i, j) = table[bucket(j − i), h], table [num_buckets, heads].
void t5_tile(const bias_tile& tile, const float* table, int num_buckets, int max_distance,
             bool bidirectional);

/// FoX prefix sums of per-head, per-token log forget gates: F[h, t] = Σ_{ℓ ≤ t} log_forget[h, ℓ]
/// (in double: the tile takes differences of large sums). Both arrays are [heads, seq_len].
void fox_prefix_sums(const float* log_forget, std::int64_t heads, std::int64_t seq_len,
                     double* prefix);

/// FoX: b_h(i, j) = F[h, i] − F[h, j] = Σ_{ℓ = j+1..i} log f_ℓ for j ≤ i. Keys after the query
/// (j > i) get `causal_mask_value` (default −∞, the causal mask; pass 0 when the attention kernel
/// masks by itself). Positions index the prefix sums: both ranges must lie in [0, seq_len).
void fox_tile(const bias_tile& tile, const double* prefix, std::int64_t seq_len,
              float causal_mask_value = -std::numeric_limits<float>::infinity());

}  // namespace grape::cpu
