// The tutorial (docs/tutorial.md): define a new encoding as a type and check it.
// A rotary encoding of positions on a 24-step cycle: for ρ to be a representation of Z/24, every
// plane must turn a whole number of times per cycle, θ_i = 2π·k_i/24. The checker confirms it, and
// catches the same encoding built with RoPE's usual frequencies, which are not periodic.
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "cpu/encode_qk.hpp"
#include "grape/check/checker.hpp"
#include "hour_of_day_rope.hpp"

int main() {
  // Check it: every claimed law, random content, positions and parameters.
  const auto good = grape::check<hour_of_day_rope<true>>(grape::check_options{});
  std::printf("%s\n", good.table().c_str());

  // The broken variant: ρ(23)·ρ(1) turns plane 1 by 24·θ, which is not a whole turn, while
  // 23∘1 = 0 in the group. The homomorphism law fails with a shrunk counterexample.
  const auto broken = grape::check<hour_of_day_rope<false>>(grape::check_options{});
  std::printf("%s\n", broken.table().c_str());

  // Run it: the same rotate_qk call as RoPE's, with every option it takes (strides, GQA,
  // varlen, dtypes). Q at hour 23 with K at hour 1 scores as Q at hour 0 with K at hour 2.
  const auto hours = hour_of_day_rope<true>::make({8});
  const std::vector<std::int64_t> hour = {23, 1, 0, 2};  // one position per token
  std::vector<float> q(4 * 8), k(4 * 8);
  for (int i = 0; i < 32; ++i) q[i] = std::cos(i % 8 + 1.0f), k[i] = std::sin(i % 8 + 2.0f);
  grape::cpu::rotate_qk_args args;
  args.q = {q.data(), q.data(), /*heads=*/1, /*size=*/32, /*batch_stride=*/0, /*token_stride=*/8, /*head_stride=*/8};
  args.k = {k.data(), k.data(), 1, 32, 0, 8, 8};
  args.seq_len = 4;
  args.position_ids = hour.data();
  grape::cpu::rotate_qk(hours, args);
  const auto score = [&](int m, int n) {
    float s = 0;
    for (int c = 0; c < 8; ++c) s += q[m * 8 + c] * k[n * 8 + c];
    return s;
  };
  std::printf("score(23 -> 1) = %.6f, score(0 -> 2) = %.6f\n", score(0, 1), score(2, 3));
  const bool wraps = std::abs(score(0, 1) - score(2, 3)) < 1e-5f;

  // A law of your own is a row like any other: it holds for the periodic encoding, not the broken one.
  const auto* own = good.find("same_hour_a_day_later");
  const auto* own_broken = broken.find("same_hour_a_day_later");
  const bool own_law = own && own->claimed && own->status == grape::law_status::holds && own_broken &&
                       own_broken->status == grape::law_status::fails && own_broken->example;

  const auto* h = broken.find(grape::law::homomorphism);
  const bool ok = good.passed() && !broken.passed() && h && h->status == grape::law_status::fails && h->example &&
                  wraps && own_law;
  std::printf("tutorial: %s\n", ok ? "as expected" : "UNEXPECTED");
  return ok ? 0 : 1;
}
