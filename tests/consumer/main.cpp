// The tutorial's encoding (examples/hour_of_day_rope.hpp), checked and run from a project that
// links grape::check only: exits non-zero if a claimed law fails or the kernel does not wrap.
#include <cmath>
#include <cstdio>
#include <vector>

#include "cpu/encode_qk.hpp"
#include "grape/check/checker.hpp"
#include "../../examples/hour_of_day_rope.hpp"  // shared with the tutorial

int main() {
  const auto report = grape::check<hour_of_day_rope<true>>(grape::check_options{});
  std::printf("%s", report.table().c_str());

  // Hour 23 then hour 1 scores as hour 0 then hour 2: one rotate_qk call over four tokens.
  const std::vector<std::int64_t> hour = {23, 1, 0, 2};
  std::vector<float> q(4 * 8), k(4 * 8);
  for (int i = 0; i < 32; ++i) q[i] = std::cos(i % 8 + 1.0f), k[i] = std::sin(i % 8 + 2.0f);
  grape::cpu::rotate_qk_args args;
  args.q = {q.data(), q.data(), 1, 32, 0, 8, 8};
  args.k = {k.data(), k.data(), 1, 32, 0, 8, 8};
  args.seq_len = 4;
  args.position_ids = hour.data();
  grape::cpu::rotate_qk(hour_of_day_rope<true>::make({8}), args);
  float wrapped = 0, direct = 0;
  for (int c = 0; c < 8; ++c) wrapped += q[c] * k[8 + c], direct += q[16 + c] * k[24 + c];
  std::printf("score(23 -> 1) = %.6f, score(0 -> 2) = %.6f\n", wrapped, direct);
  return report.passed() && std::abs(wrapped - direct) < 1e-5f ? 0 : 1;
}
