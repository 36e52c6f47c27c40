// The tutorial, part 3 (docs/tutorial.md): a score bias written from scratch, with its reference
// formula and its slopes' gradient. The checker confirms it, catches a sign slip in make() that the
// invariance laws cannot see (a bonus for distance is still a function of m − n): only the
// reference can; and catches a gradient off by a factor of −3 (part 3.3).
#include <cstdio>

#include "grape/check/checker.hpp"
#include "log_distance.hpp"

// The broken variant: slopes of the wrong sign, a bonus for distance instead of a penalty.
struct log_distance_flipped : log_distance {
  static constexpr std::string_view name = "log_distance_flipped";
  static instance make(const params& p) {
    instance i = log_distance::make(p);
    for (double& s : i.bias.slopes) s = -s;
    return i;
  }
};

// The gradient slip: bias() is right, the slopes' gradient is −3 times what it should be.
struct log_distance_bad_gradient_bias : log_distance_bias {
  void accumulate_grad(int h, const std::array<std::int64_t, 1>& m, const std::array<std::int64_t, 1>& n, double g,
                       double* acc) const {
    log_distance_bias::accumulate_grad(h, m, n, -3 * g, acc);
  }
};
struct log_distance_bad_gradient
    : grape::encoding<grape::translation<1>, grape::no_representation, grape::score_bias<log_distance_bad_gradient_bias>> {
  static constexpr std::string_view name = "log_distance_bad_gradient";
  static constexpr std::string_view summary = "the log-distance bias with its gradient times -3";
  static constexpr grape::law_set claims = log_distance::claims;
  using params = log_distance::params;
  static params random_params(std::mt19937_64& rng) { return log_distance::random_params(rng); }
  static instance make(const params& p) { return {{log_distance::make(p).bias}, p.head_dim}; }
  static double reference_bias(const params& p, int h, std::int64_t m, std::int64_t n) {
    return log_distance::reference_bias(p, h, m, n);
  }
};

int main() {
  // Check it: the group, translation invariance of the score, and agreement with the reference.
  const auto good = grape::check<log_distance>(grape::check_options{});
  std::printf("%s\n", good.table().c_str());

  // The sign slip: invariant still, but reference_agreement fails with a counterexample.
  const auto broken = grape::check<log_distance_flipped>(grape::check_options{});
  std::printf("%s\n", broken.table().c_str());
  const auto* invariance = broken.find(grape::law::score_invariance);
  const auto* reference = broken.find(grape::law::reference_agreement);
  const bool caught = !broken.passed() && invariance && invariance->status == grape::law_status::holds &&
                      reference && reference->status == grape::law_status::fails && reference->example;

  // The gradient slip: bias_gradient (against central differences of bias()) and
  // attention_gradient (the fused backward against a float64 one) fail; every other law holds.
  const auto slipped = grape::check<log_distance_bad_gradient>(grape::check_options{});
  std::printf("%s\n", slipped.table().c_str());
  const auto* gradient = slipped.find("bias_gradient");
  const bool gradient_caught = !slipped.passed() && gradient && gradient->status == grape::law_status::fails &&
                               gradient->example && slipped.find(grape::law::reference_agreement)->status ==
                                                        grape::law_status::holds;

  const bool ok = good.passed() && caught && gradient_caught;
  std::printf("tutorial_score_bias: %s\n", ok ? "as expected" : "UNEXPECTED");
  return ok ? 0 : 1;
}
