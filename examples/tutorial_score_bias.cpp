// The tutorial, part 3 (docs/tutorial.md): a score bias written from scratch, with its reference
// formula. The checker confirms it, and catches a sign slip in make() that the invariance laws
// cannot see (a bonus for distance is still a function of m − n): only the reference can.
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

  const bool ok = good.passed() && caught;
  std::printf("tutorial_score_bias: %s\n", ok ? "as expected" : "UNEXPECTED");
  return ok ? 0 : 1;
}
