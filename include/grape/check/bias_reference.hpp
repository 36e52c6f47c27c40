#pragma once
// Independent float64 references for the score biases, written from the papers' own formulas
// (shared reference biases.md) and deliberately not sharing code with math/bias.hpp: the
// checker's reference_agreement law compares the two.
#include <cmath>
#include <cstdint>
#include <vector>

namespace grape::reference {

/// ALiBi slopes as in Press et al.'s code: a geometric sequence r^(k+1), r = 2^(−8/n), for the
/// largest power of two P <= H, then every other element of the 2P sequence.
inline std::vector<double> alibi_slopes(int heads) {
  auto pow2_rule = [](int n) {
    const double r = std::pow(2.0, -8.0 / n);
    std::vector<double> s(n);
    double v = 1.0;
    for (int k = 0; k < n; ++k) s[k] = (v *= r);
    return s;
  };
  const int p = 1 << static_cast<int>(std::floor(std::log2(static_cast<double>(heads))));
  std::vector<double> s = pow2_rule(p);
  const std::vector<double> extra = pow2_rule(2 * p);
  for (int i = 0; static_cast<int>(s.size()) < heads; i += 2) s.push_back(extra[i]);
  return s;
}

/// T5's bucket, transcribed from transformers' _relative_position_bucket.
inline int t5_bucket(std::int64_t relative_position, bool bidirectional, int num_buckets, int max_distance) {
  int ret = 0;
  std::int64_t n = -relative_position;
  if (bidirectional) {
    num_buckets /= 2;
    ret += (n < 0) ? num_buckets : 0;
    n = n < 0 ? -n : n;
  } else {
    n = n > 0 ? n : 0;
  }
  const int max_exact = num_buckets / 2;
  if (n < max_exact) return ret + static_cast<int>(n);
  const auto large = max_exact + static_cast<std::int64_t>(std::log(static_cast<double>(n) / max_exact) /
                                                           std::log(static_cast<double>(max_distance) / max_exact) *
                                                           (num_buckets - max_exact));
  return ret + static_cast<int>(large < num_buckets - 1 ? large : num_buckets - 1);
}

/// FoX: the sum of log σ(z_ℓ) for ℓ = n+1 .. m, term by term (no prefix sums).
inline double fox_bias(const std::vector<double>& gate_logits, std::int64_t length, int head, std::int64_t m, std::int64_t n) {
  if (n > m) return -INFINITY;
  double s = 0;
  for (std::int64_t l = n + 1; l <= m; ++l) s += std::log(1.0 / (1.0 + std::exp(-gate_logits[head * length + l])));
  return s;
}

}  // namespace grape::reference
