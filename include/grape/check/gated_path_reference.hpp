#pragma once
// Independent float64 references for gated GRAPE-A's and GRAPE-AP's biases, transcribed from the GRAPE authors'
// formulas (shared reference grape-paper-code.md) term by term, sharing no code with the
// encodings: the checker's reference_agreement law compares the two.
#include <cmath>
#include <cstdint>
#include <optional>
#include <vector>

namespace grape::reference {

/// Gated GRAPE-A: −max(m − n, 0)·softplus(ω̃)·slope·rate, rate = softplus(key logit), plus
/// softplus(query logit) when there is one; masked (−∞) for n > m.
inline double grape_a_gated_bias(double slope, double omega_logit, double key_logit, std::optional<double> query_logit,
                                 std::int64_t m, std::int64_t n) {
  if (n > m) return -INFINITY;
  auto softplus = [](double x) { return std::log(1.0 + std::exp(x)); };
  double rate = softplus(key_logit);
  if (query_logit) rate += softplus(*query_logit);
  return -static_cast<double>(m - n) * softplus(omega_logit) * slope * rate;
}

/// GRAPE-AP v1: Σ_{l=n+1..m} slope·log σ(⟨row, rot(p̂_l, l)⟩/P) with p̂ = p/√(mean(p²) + eps) and
/// the reference's half-split rotation y1 = x1 cos φ + x2 sin φ, y2 = −x1 sin φ + x2 cos φ.
/// row = p_m as in the reference, or rot(p_m, m) with rotate_rows. p is [heads, length, P].
inline double grape_ap_bias(const std::vector<double>& p, std::int64_t length, int P, double eps, double slope, int h,
                            std::int64_t m, std::int64_t n, bool rotate_rows) {
  if (n > m) return -INFINITY;
  auto token = [&](std::int64_t t) {
    return std::vector<double>(p.begin() + (h * length + t) * P, p.begin() + (h * length + t + 1) * P);
  };
  auto rotated = [&](std::vector<double> x, double phi) {
    std::vector<double> y(P);
    for (int k = 0; k < P / 2; ++k) {
      y[k] = x[k] * std::cos(phi) + x[k + P / 2] * std::sin(phi);
      y[k + P / 2] = -x[k] * std::sin(phi) + x[k + P / 2] * std::cos(phi);
    }
    return y;
  };
  std::vector<double> row = token(m);
  if (rotate_rows) row = rotated(row, static_cast<double>(m));
  double sum = 0;
  for (std::int64_t l = n + 1; l <= m; ++l) {
    std::vector<double> key = token(l);
    double mean_square = 0;
    for (double v : key) mean_square += v * v / P;
    for (double& v : key) v /= std::sqrt(mean_square + eps);
    key = rotated(key, static_cast<double>(l));
    double dot = 0;
    for (int k = 0; k < P; ++k) dot += row[k] * key[k];
    sum += slope * std::log(1.0 / (1.0 + std::exp(-dot / P)));
  }
  return sum;
}

}  // namespace grape::reference
