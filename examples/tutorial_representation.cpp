// The tutorial, part 2 (docs/tutorial.md): a representation written from scratch. quaternion_turns
// turns blocks of four channels by unit quaternions; the checker confirms every claimed law, the
// kernels run it through its view, and a slip in its key action is caught with a counterexample.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <vector>

#include "cpu/encode_qk.hpp"
#include "grape/check/checker.hpp"
#include "quaternion_rope.hpp"

// The broken variant: keys turned the wrong way, κ(n) = ρ(−n). Queries are still right.
struct wrong_key_turns : quaternion_turns {
  using quaternion_turns::quaternion_turns;
  template <class T>
  void apply_key(const std::array<std::int64_t, 1>& c, const T* x, T* y) const {
    apply({-c[0]}, x, y);
  }
};

int main() {
  // Check it: every claimed law, random content, positions and parameters.
  const auto good = grape::check<quaternion_rope<>>(grape::check_options{});
  std::printf("%s\n", good.table().c_str());

  // The broken key action: (ρ(m)x)ᵀ(ρ(−n)y) depends on m + n, not on n − m.
  const auto broken = grape::check<quaternion_rope<wrong_key_turns>>(grape::check_options{});
  std::printf("%s\n", broken.table().c_str());
  const auto* relative = broken.find(grape::law::relative);
  const bool caught = !broken.passed() && relative && relative->status == grape::law_status::fails && relative->example;
  if (caught) std::printf("relative fails at %s\n\n", relative->example->positions.c_str());

  // Run it in the kernels: one head of Q and K at three positions, through the view.
  const auto turns = quaternion_rope<>::make({8, 10000.0, 7});
  const std::vector<std::int64_t> position = {0, 5, 1000000};
  std::vector<float> q(3 * 8), k(3 * 8);
  for (int i = 0; i < 24; ++i) q[i] = std::cos(i + 1.0f), k[i] = std::sin(i + 2.0f);
  const std::vector<float> q_in = q;
  grape::cpu::rotate_qk_args args;
  args.q = {q.data(), q.data(), /*heads=*/1, /*size=*/24, /*batch_stride=*/0, /*token_stride=*/8, /*head_stride=*/8};
  args.k = {k.data(), k.data(), 1, 24, 0, 8, 8};
  args.seq_len = 3;
  args.position_ids = position.data();
  grape::cpu::rotate_qk(turns, args);

  // The kernel's float32 output against the representation's float64 apply.
  double error = 0;
  for (int t = 0; t < 3; ++t) {
    std::array<double, 8> x, y;
    std::copy(q_in.begin() + 8 * t, q_in.begin() + 8 * t + 8, x.begin());
    turns.rep.apply({position[t]}, x.data(), y.data());
    for (int c = 0; c < 8; ++c) error = std::max(error, std::abs(y[c] - q[8 * t + c]));
  }
  std::printf("kernel vs float64 apply: max error %.2e\n", error);

  const bool ok = good.passed() && caught && error < 1e-5;
  std::printf("tutorial_representation: %s\n", ok ? "as expected" : "UNEXPECTED");
  return ok ? 0 : 1;
}
