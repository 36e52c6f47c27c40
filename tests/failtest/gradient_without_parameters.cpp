// Expected: "grape: a bias that gives a parameter gradient also gives parameters(out) and set_parameters(p)"
// Not expected: "error: .*set_parameters.* has no member"
#include <array>
#include <cstddef>
#include <cstdint>
#include <random>
#include <string_view>

#include "grape/check/checker.hpp"
#include "grape/group/translation.hpp"
#include "grape/inject/score_bias.hpp"

// A learnable bias whose gradient the checker could not test: nothing moves its slope.
struct slope_bias {
  double slope = 0.5;
  int heads() const { return 1; }
  double bias(int, const std::array<std::int64_t, 1>& m, const std::array<std::int64_t, 1>& n) const {
    return -slope * static_cast<double>(m[0] > n[0] ? m[0] - n[0] : n[0] - m[0]);
  }
  std::size_t parameter_count() const { return 1; }
  std::size_t grad_accumulator_size() const { return 1; }
  void accumulate_grad(int h, const std::array<std::int64_t, 1>& m, const std::array<std::int64_t, 1>& n, double g,
                       double* acc) const {
    acc[h] -= g * static_cast<double>(m[0] > n[0] ? m[0] - n[0] : n[0] - m[0]);
  }
  void gradient(const double* acc, double* grad) const { grad[0] = acc[0]; }
};

struct slope_encoding : grape::encoding<grape::translation<1>, grape::no_representation, grape::score_bias<slope_bias>> {
  static constexpr std::string_view name = "slope";
  static constexpr std::string_view summary = "a learnable slope";
  static constexpr grape::law_set claims = grape::law::group | grape::law::score_invariance;
  struct params {
    int head_dim;
  };
  static params random_params(std::mt19937_64&) { return {4}; }
  static instance make(const params& p) { return {{}, p.head_dim}; }
};

void check_it() { (void)grape::check<slope_encoding>(); }
