#pragma once
// alibi: a linear score bias −slope_h·|m − n| (Press et al.), with the exact slope rule for any
// head count (math/bias.hpp). grape_a is the same bias written as a unipotent lift.
#include <boost/hana/define_struct.hpp>
#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "grape/check/bias_reference.hpp"
#include "grape/detail/random.hpp"
#include "grape/detail/validate.hpp"
#include "grape/encoding.hpp"
#include "grape/group/translation.hpp"
#include "grape/inject/offset_tile.hpp"
#include "grape/inject/score_bias.hpp"
#include "grape/math/bias.hpp"

namespace grape {

/// Slopes of H heads, validated.
inline std::vector<double> alibi_slopes(int num_heads, double max_bias = 8.0) {
  detail::require_count("heads", num_heads);
  detail::require_positive("max_bias", max_bias);
  std::vector<double> s(num_heads);
  for (int h = 0; h < num_heads; ++h) s[h] = math::alibi_slope(h, num_heads, max_bias);
  return s;
}

struct alibi_bias {
  std::vector<double> slopes;
  int heads() const { return static_cast<int>(slopes.size()); }
  double bias(int h, const std::array<std::int64_t, 1>& m, const std::array<std::int64_t, 1>& n) const {
    return -slopes[h] * static_cast<double>(m[0] > n[0] ? m[0] - n[0] : n[0] - m[0]);
  }
  float at_offset(int h, std::int64_t offset) const {
    return static_cast<float>(-slopes[h] * static_cast<double>(offset < 0 ? -offset : offset));
  }
  // A whole tile for the fused attention, the bias evaluated once per offset (offset_tile.hpp).
  void add_tile(int h, const std::int64_t* m, std::int64_t rows, const std::int64_t* n, std::int64_t cols, float* S,
                std::int64_t ld) const {
    add_offset_tile(m, rows, n, cols, S, ld, [&](std::int64_t offset) { return at_offset(h, offset); });
  }
  bool offset_values(int h, const std::int64_t* m, std::int64_t rows, const std::int64_t* n, std::int64_t cols,
                     float* values) const {
    return offset_tile_values(m, rows, n, cols, values, [&](std::int64_t offset) { return at_offset(h, offset); });
  }
  // Gradient: dL/d slope_h = −Σ g·|m − n| over the head's logits.
  std::size_t parameter_count() const { return slopes.size(); }
  std::size_t grad_accumulator_size() const { return slopes.size(); }
  void accumulate_grad(int h, const std::array<std::int64_t, 1>& m, const std::array<std::int64_t, 1>& n, double g,
                       double* acc) const {
    acc[h] -= g * static_cast<double>(m[0] > n[0] ? m[0] - n[0] : n[0] - m[0]);
  }
  void gradient(const double* acc, double* grad) const { std::copy(acc, acc + slopes.size(), grad); }
  void parameters(double* out) const { std::copy(slopes.begin(), slopes.end(), out); }
  void set_parameters(const double* p) { std::copy_n(p, slopes.size(), slopes.begin()); }
};

struct alibi final : encoding<translation<1>, no_representation, score_bias<alibi_bias>> {
  static constexpr std::string_view name = "alibi";
  static constexpr std::string_view summary = "ALiBi: score bias -slope_h*|m-n|, exact slopes for any head count";
  static constexpr law_set claims = law::group | law::score_invariance | law::reference_agreement;

  struct params {
    BOOST_HANA_DEFINE_STRUCT(params, (int, heads), (int, head_dim), (double, max_bias),
                             (std::vector<double>, slopes));  // slopes: empty = the standard rule
  };
  static params default_params() { return {12, 64, 8.0, {}}; }
  static params random_params(std::mt19937_64& rng) {
    return {std::uniform_int_distribution<int>(1, 64)(rng), detail::pick(rng, {4, 8, 16}), 8.0, {}};
  }
  static instance make(const params& p) {
    detail::require_count("head_dim", p.head_dim);
    std::vector<double> slopes = p.slopes;
    if (slopes.empty()) {
      slopes = alibi_slopes(p.heads, p.max_bias);
    } else {
      if (static_cast<int>(slopes.size()) != p.heads)
        throw input_error(fmt::format("slopes: must hold heads = {} values (got {})", p.heads, slopes.size()));
      for (std::size_t h = 0; h < slopes.size(); ++h)
        detail::require_positive(fmt::format("slopes[{}]", h), slopes[h]);
    }
    return {{std::move(slopes)}, p.head_dim};
  }
  /// The reference bias (shared/reference/biases.md), for the reference_agreement law.
  static double reference_bias(const params& p, int h, std::int64_t m, std::int64_t n) {
    const double slope = p.slopes.empty() ? reference::alibi_slopes(p.heads)[h] : p.slopes[h];
    return -slope * std::abs(static_cast<double>(m - n));
  }
};

}  // namespace grape
