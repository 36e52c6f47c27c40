// Score-bias tiles: validation and launch (bodies in score_bias_items.hpp).
#include "cpu/score_bias.hpp"

#include <cmath>
#include <string>

#include "cpu/launch.hpp"
#include "cpu/score_bias_items.hpp"
#include "cpu/threads.hpp"
#include "grape/detail/error.hpp"
#include "grape/math/bias.hpp"

namespace grape::cpu {
namespace {

detail::tile_shape checked(const bias_tile& t, bool needs_out) {
  if (needs_out && t.out == nullptr) throw input_error("tile.out is null");
  if (t.heads < 0) throw input_error("tile.heads is negative");
  if (t.q_len < 0) throw input_error("tile.q_len is negative");
  if (t.k_len < 0) throw input_error("tile.k_len is negative");
  if (t.q_start < 0) throw input_error("tile.q_start is negative");
  if (t.k_start < 0) throw input_error("tile.k_start is negative");
  if (t.threads < 0) throw input_error("tile.threads is negative");
  std::int64_t n = 0;
  if (__builtin_mul_overflow(t.heads, t.q_len, &n) || __builtin_mul_overflow(n, t.k_len, &n) ||
      t.q_start > std::numeric_limits<std::int64_t>::max() - t.q_len ||
      t.k_start > std::numeric_limits<std::int64_t>::max() - t.k_len)
    throw input_error("tile sizes overflow 64 bits");
  return {t.out, t.heads, t.q_start, t.q_len, t.k_start, t.k_len};
}

}  // namespace

std::vector<float> alibi_slopes(int heads, double max_bias) {
  if (heads <= 0) throw input_error("heads must be positive");
  if (!(max_bias > 0) || !std::isfinite(max_bias)) throw input_error("max_bias must be positive");
  std::vector<float> s(heads);
  for (int h = 0; h < heads; ++h) s[h] = static_cast<float>(math::alibi_slope(h, heads, max_bias));
  return s;
}

void alibi_tile(const bias_tile& tile, const float* slopes) {
  const detail::tile_shape t = checked(tile, true);
  if (slopes == nullptr && t.heads > 0) throw input_error("slopes is null");
  detail::launch_items(t.heads * t.q_len, 0, tile.threads, detail::alibi_row{t, slopes});
}

void alibi_slope_grad(const bias_tile& shape, const float* grad_tile, double* grad_slopes) {
  const detail::tile_shape t = checked(shape, false);
  if (grad_slopes == nullptr && t.heads > 0) throw input_error("grad_slopes is null");
  if (grad_tile == nullptr && t.heads * t.q_len * t.k_len > 0) throw input_error("grad_tile is null");
  [[maybe_unused]] const int threads = shape.threads > 0 ? shape.threads : detail::max_threads();
#pragma omp parallel for num_threads(threads) schedule(static)
  for (std::int64_t h = 0; h < t.heads; ++h) {
    double sum = 0;
    for (std::int64_t r = 0; r < t.q_len; ++r) {
      const std::int64_t i = t.q_start + r;
      const float* g = grad_tile + (h * t.q_len + r) * t.k_len;
      for (std::int64_t c = 0; c < t.k_len; ++c) {
        const std::int64_t j = t.k_start + c;
        sum -= static_cast<double>(g[c]) * static_cast<double>(i > j ? i - j : j - i);
      }
    }
    grad_slopes[h] = sum;
  }
}

void t5_tile(const bias_tile& tile, const float* table, int num_buckets, int max_distance,
             bool bidirectional) {
  const detail::tile_shape t = checked(tile, true);
  if (table == nullptr) throw input_error("table is null");
  if (num_buckets < (bidirectional ? 4 : 2))
    throw input_error("num_buckets must be at least " + std::to_string(bidirectional ? 4 : 2));
  const int exact = (bidirectional ? num_buckets / 2 : num_buckets) / 2;
  if (max_distance <= exact)
    throw input_error("max_distance must exceed the exact range (" + std::to_string(exact) + ")");
  detail::launch_items(t.heads * t.q_len, 0, tile.threads,
                       detail::t5_row{t, table, num_buckets, max_distance, bidirectional});
}

void fox_prefix_sums(const float* log_forget, std::int64_t heads, std::int64_t seq_len,
                     double* prefix) {
  if (heads < 0) throw input_error("heads is negative");
  if (seq_len < 0) throw input_error("seq_len is negative");
  std::int64_t n = 0;
  if (__builtin_mul_overflow(heads, seq_len, &n)) throw input_error("heads * seq_len overflows");
  if (n > 0 && (log_forget == nullptr || prefix == nullptr))
    throw input_error(log_forget == nullptr ? "log_forget is null" : "prefix is null");
  // A log forget gate is log σ(·) ∈ (−∞, 0]: check first (no exception may leave the parallel loop).
  for (std::int64_t i = 0; i < n; ++i)
    if (!(log_forget[i] <= 0.0f) || !std::isfinite(log_forget[i]))
      throw input_error("log_forget[" + std::to_string(i) + "] is not a finite value <= 0");
#pragma omp parallel for schedule(static)
  for (std::int64_t h = 0; h < heads; ++h) {
    double sum = 0;
    for (std::int64_t t = 0; t < seq_len; ++t) {
      sum += log_forget[h * seq_len + t];
      prefix[h * seq_len + t] = sum;
    }
  }
}

void fox_tile(const bias_tile& tile, const double* prefix, std::int64_t seq_len,
              float causal_mask_value) {
  const detail::tile_shape t = checked(tile, true);
  if (prefix == nullptr) throw input_error("prefix is null");
  if (seq_len < 0) throw input_error("seq_len is negative");
  if (t.q_len > 0 && t.q_start + t.q_len > seq_len)
    throw input_error("tile query range ends past seq_len (" + std::to_string(seq_len) + ")");
  if (t.k_len > 0 && t.k_start + t.k_len > seq_len)
    throw input_error("tile key range ends past seq_len (" + std::to_string(seq_len) + ")");
  detail::launch_items(t.heads * t.q_len, 0, tile.threads,
                       detail::fox_row{t, prefix, seq_len, causal_mask_value});
}

}  // namespace grape::cpu
