#pragma once
// The encoding of part 3 of the tutorial (docs/tutorial.md): a score bias written from scratch,
// b_h(m, n) = −λ_h·log(1 + |m − n|): like ALiBi it penalises distance, but by its logarithm, so
// far tokens are not silenced. It comes with a reference formula that the checker compares it to,
// and its slopes are learnable: it gives their gradient, which the checker tests too.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <random>
#include <string_view>
#include <vector>

#include "grape/check/laws.hpp"
#include "grape/config.hpp"
#include "grape/detail/error.hpp"
#include "grape/encoding.hpp"
#include "grape/group/translation.hpp"
#include "grape/inject/score_bias.hpp"

/// −λ·log(1 + |m − n|), the distance exact in int64; host and device code alike.
GRAPE_HOST_DEVICE inline double log_distance_value(double slope, std::int64_t m, std::int64_t n) {
  const std::int64_t distance = m > n ? m - n : n - m;
  return -slope * log1p(static_cast<double>(distance));
}

/// What score_bias<B> asks of B: heads() and the bias of one (query, key) pair of positions.
struct log_distance_bias {
  std::vector<double> slopes;  // λ_h > 0, one per head

  int heads() const { return static_cast<int>(slopes.size()); }
  double bias(int h, const std::array<std::int64_t, 1>& m, const std::array<std::int64_t, 1>& n) const {
    return log_distance_value(slopes[h], m[0], n[0]);
  }

  /// Learnable slopes (BiasWithGradient): the fused attention's backward adds each logit's
  /// gradient g into acc[h] as g·∂b/∂λ_h = −g·log(1 + |m − n|); gradient() reads them out.
  std::size_t parameter_count() const { return slopes.size(); }
  std::size_t grad_accumulator_size() const { return slopes.size(); }
  void accumulate_grad(int h, const std::array<std::int64_t, 1>& m, const std::array<std::int64_t, 1>& n, double g,
                       double* acc) const {
    acc[h] += g * log_distance_value(1.0, m[0], n[0]);
  }
  void gradient(const double* acc, double* grad) const { std::copy(acc, acc + slopes.size(), grad); }
  /// The slopes, read and set (BiasWithParameters): the checker's bias_gradient law compares the
  /// gradient with central differences of bias() along a random direction.
  void parameters(double* out) const { std::copy(slopes.begin(), slopes.end(), out); }
  void set_parameters(const double* p) { std::copy_n(p, slopes.size(), slopes.begin()); }

  /// The same bias in device-safe form, for the CUDA fused attention (cuda::attention; a
  /// ScoreView, kernels/cuda/instance_scores.hpp): the slopes' array and the formula above.
  struct view {
    const double* slopes;
    std::int64_t heads;
    GRAPE_HOST_DEVICE float operator()(std::int64_t h, std::int64_t m, std::int64_t n) const {
      return static_cast<float>(log_distance_value(slopes[h], m, n));
    }
    template <class Move>
    void relocate(Move&& move) {
      move(slopes, heads);
    }
  };
  view score_view() const { return {slopes.data(), heads()}; }
};

struct log_distance : grape::encoding<grape::translation<1>, grape::no_representation,
                                      grape::score_bias<log_distance_bias>> {
  static constexpr std::string_view name = "log_distance";
  static constexpr std::string_view summary = "score bias -slope_h*log(1 + |m - n|)";
  static constexpr grape::law_set claims =
      grape::law::group | grape::law::score_invariance | grape::law::reference_agreement;

  struct params {
    int heads;
    int head_dim;
  };
  static params random_params(std::mt19937_64& rng) {
    return {std::uniform_int_distribution<int>(1, 16)(rng), 4 * std::uniform_int_distribution<int>(1, 4)(rng)};
  }
  static instance make(const params& p) {
    if (p.heads <= 0 || p.head_dim <= 0) throw grape::input_error("heads, head_dim: must be positive");
    std::vector<double> slopes(p.heads);
    for (int h = 0; h < p.heads; ++h) slopes[h] = std::pow(2.0, -8.0 * (h + 1) / p.heads);  // ALiBi's rule
    return {log_distance_bias{slopes}, p.head_dim};  // bias_instance's fields: the bias, q·k's size
  }
  /// The reference the checker compares bias() with (reference_agreement): the formula written
  /// again from its definition, sharing no code with bias().
  static double reference_bias(const params& p, int h, std::int64_t m, std::int64_t n) {
    const double slope = std::exp2(-8.0 * (h + 1) / p.heads);
    return -slope * std::log(1.0 + std::abs(static_cast<double>(m) - static_cast<double>(n)));
  }
};
