// The tutorial (docs/tutorial.md): define a new encoding as a type and check it.
// A rotary encoding of positions on a 24-step cycle: for ρ to be a representation of Z/24, every
// plane must turn a whole number of times per cycle, θ_i = 2π·k_i/24. The checker confirms it, and
// catches the same encoding built with RoPE's usual frequencies, which are not periodic.
#include <cmath>
#include <cstdio>
#include <random>

#include "cyclic_group.hpp"
#include "grape/check/checker.hpp"
#include "grape/encoding.hpp"
#include "grape/inject/rotate_qk.hpp"
#include "grape/rep/rotation_planes.hpp"

// 1. The encoding: group x representation x injection, plus its claims and parameters.
template <bool Periodic>
struct hour_of_day_rope : grape::encoding<cyclic<24>, grape::rotation_planes<1>,
                                          grape::rotate_qk<grape::layout_kind::half_split>> {
  static constexpr std::string_view name = Periodic ? "hour_of_day_rope" : "hour_of_day_rope_broken";
  static constexpr std::string_view summary = "RoPE on a 24-step cycle";
  static constexpr grape::law_set claims = grape::rotary_laws;
  static constexpr std::int64_t position_limit = 24;

  struct params {
    int head_dim;
  };
  static params random_params(std::mt19937_64& rng) { return {2 * std::uniform_int_distribution<int>(1, 8)(rng)}; }
  static instance make(const params& p) {
    std::vector<double> inv_freq(p.head_dim / 2);
    for (int i = 0; i < p.head_dim / 2; ++i)
      inv_freq[i] = Periodic ? 2 * M_PI * (i + 1) / 24.0 : std::pow(10000.0, -2.0 * i / p.head_dim);
    return {grape::rotation_planes<1>::from_inv_freq(inv_freq), p.head_dim, 1.0};
  }
};

int main() {
  // 2. Check it: every claimed law, random content, positions and parameters.
  const auto good = grape::check<hour_of_day_rope<true>>(grape::check_options{});
  std::printf("%s\n", good.table().c_str());

  // 3. The broken variant: ρ(23)·ρ(1) turns plane 1 by 24·θ, which is not a whole turn, while
  // 23∘1 = 0 in the group. The homomorphism law fails with a shrunk counterexample.
  const auto broken = grape::check<hour_of_day_rope<false>>(grape::check_options{});
  std::printf("%s\n", broken.table().c_str());

  const auto* h = broken.find(grape::law::homomorphism);
  const bool ok = good.passed() && !broken.passed() && h && h->status == grape::law_status::fails && h->example;
  std::printf("tutorial: %s\n", ok ? "as expected" : "UNEXPECTED");
  return ok ? 0 : 1;
}
