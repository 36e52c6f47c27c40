// One plane's frequency from its per-token phases. Phases are known only mod 2π, so θ is first
// taken from the smallest position difference (where Δp·θ cannot wrap past ±π, as |θ| < π for every
// RoPE plane) and then refined with larger differences, each unwrapped around the current estimate.
#include <algorithm>
#include <cmath>
#include <numbers>

#include "detect/phase_fit.hpp"

namespace grape::detect::internal {

namespace {
constexpr double pi = std::numbers::pi;
}

double wrap_angle(double a) {
  a = std::remainder(a, 2 * pi);
  return a <= -pi ? a + 2 * pi : a;
}

std::optional<double> theta_from_differences(const plane_phases& p, const std::vector<std::int64_t>& pos) {
  const std::size_t n = pos.size();
  std::size_t ref = n;
  for (std::size_t t = 0; t < n; ++t) {
    if (p.weight[t] <= 0) continue;
    if (ref == n || pos[t] < pos[ref] || (pos[t] == pos[ref] && p.weight[t] > p.weight[ref])) ref = t;
  }
  if (ref == n) return std::nullopt;
  struct sample {
    double delta, psi, w;
  };
  std::vector<sample> s;
  for (std::size_t t = 0; t < n; ++t)
    if (p.weight[t] > 0 && pos[t] != pos[ref])
      s.push_back({static_cast<double>(pos[t] - pos[ref]), wrap_angle(p.phase[t] - p.phase[ref]), p.weight[t]});
  if (s.empty()) return std::nullopt;
  std::sort(s.begin(), s.end(), [](const sample& a, const sample& b) { return a.delta < b.delta; });

  // The first difference leaves Δ candidates (ψ + 2πk)/Δ; the samples up to 4Δ choose one.
  const double d0 = s.front().delta;
  const std::size_t near_end =
      std::upper_bound(s.begin(), s.end(), 4 * d0, [](double v, const sample& x) { return v < x.delta; }) - s.begin();
  double theta = s.front().psi / d0, best = INFINITY;
  const auto turns = static_cast<std::int64_t>(std::min(d0, 4096.0));
  for (std::int64_t k = -turns / 2 - 1; k <= turns / 2 + 1; ++k) {
    const double cand = (s.front().psi + 2 * pi * static_cast<double>(k)) / d0;
    if (std::abs(cand) >= pi) continue;
    double cost = 0;
    for (std::size_t i = 0; i < near_end; ++i) {
      const double r = wrap_angle(s[i].psi - s[i].delta * cand);
      cost += s[i].w * r * r;
    }
    if (cost < best) best = cost, theta = cand;
  }
  double num = 0, den = 0;
  for (const sample& x : s) {
    const double unwrapped = x.delta * theta + wrap_angle(x.psi - x.delta * theta);
    num += x.w * x.delta * unwrapped;
    den += x.w * x.delta * x.delta;
    theta = num / den;
  }
  return theta;
}

absolute_fit refit_absolute(const plane_phases& p, const std::vector<std::int64_t>& pos, std::int64_t offset,
                            double theta) {
  absolute_fit f;
  double num = 0, den = 0, wsum = 0;
  for (std::size_t t = 0; t < pos.size(); ++t) {
    if (p.weight[t] <= 0) continue;
    const double q = static_cast<double>(pos[t] + offset);
    const double u = q * theta + wrap_angle(p.phase[t] - q * theta);
    num += p.weight[t] * q * u;
    den += p.weight[t] * q * q;
    wsum += p.weight[t];
  }
  f.theta = den > 0 ? num / den : theta;
  double sq = 0;
  for (std::size_t t = 0; t < pos.size(); ++t) {
    if (p.weight[t] <= 0) continue;
    const double q = static_cast<double>(pos[t] + offset);
    const double r = std::abs(wrap_angle(p.phase[t] - q * f.theta));
    sq += p.weight[t] * r * r;
    if (r > f.max_residual) f.max_residual = r, f.max_residual_position = pos[t];
  }
  f.rms_residual = wsum > 0 ? std::sqrt(sq / wsum) : 0.0;
  f.standard_error = den > 0 && wsum > 0 ? f.rms_residual / std::sqrt(den / wsum) : INFINITY;
  return f;
}

}  // namespace grape::detect::internal
