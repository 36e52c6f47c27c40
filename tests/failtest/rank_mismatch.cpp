// Expected: "grape: the representation's rank (R::rank) differs from the group's (G::rank)"
// Not expected: "no matching function|cannot convert"
// Three-axis planes on a one-axis group; checking it must stop at the one sentence, not cascade
// through every law that applies the representation.
#include <random>

#include "grape/check/checker.hpp"
#include "grape/group/translation.hpp"
#include "grape/inject/rotate_qk.hpp"
#include "grape/rep/rotation_planes.hpp"
struct bad : grape::encoding<grape::translation<1>, grape::rotation_planes<3>,
                             grape::rotate_qk<grape::layout_kind::half_split>> {
  static constexpr std::string_view name = "bad", summary = "planes of rank 3 on a line";
  static constexpr grape::law_set claims = grape::rotary_laws;
  struct params { int head_dim; };
  static params random_params(std::mt19937_64&) { return {8}; }
  static instance make(const params& p) {
    return {grape::rotation_planes<3>(std::vector<std::array<double, 3>>(p.head_dim / 2)), p.head_dim, 1.0};
  }
};
int main() { return grape::check<bad>().passed() ? 0 : 1; }
