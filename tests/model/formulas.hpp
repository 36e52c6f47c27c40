#pragma once
// Independent float64 implementations of the formulas in rope-scaling.md and biases.md, written
// from the reference text for the tests. They never call the code under test.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <vector>

namespace grape::test_formulas {

inline double pow_neg(double base, int i, int d) { return std::pow(base, -2.0 * i / d); }

inline std::vector<double> rope_default(double base, int d) {
  std::vector<double> t;
  for (int i = 0; i < d / 2; ++i) t.push_back(pow_neg(base, i, d));
  return t;
}

inline std::vector<double> rope_linear(double base, int d, double factor) {
  auto t = rope_default(base, d);
  for (auto& x : t) x /= factor;
  return t;
}

inline std::vector<double> rope_ntk(double base, int d, double factor) {
  return rope_default(base * std::pow(factor, d / (d - 2.0)), d);
}

inline std::vector<double> rope_dynamic(double base, int d, double factor, std::int64_t l_max,
                                        std::int64_t seq_len) {
  if (seq_len <= l_max) return rope_default(base, d);
  const double x = factor * static_cast<double>(seq_len) / static_cast<double>(l_max) - (factor - 1);
  return rope_default(base * std::pow(x, d / (d - 2.0)), d);
}

struct yarn_result {
  std::vector<double> inv_freq;
  double low, high, attention_factor;
};

inline double get_mscale(double s, double m = 1.0) { return s <= 1 ? 1.0 : 0.1 * m * std::log(s) + 1.0; }

inline yarn_result rope_yarn(double base, int d, double factor, std::int64_t l_orig,
                             double beta_fast = 32, double beta_slow = 1, bool truncate = true,
                             const double* mscale = nullptr, const double* mscale_all_dim = nullptr,
                             const double* attention_factor = nullptr) {
  auto corr = [&](double r) {
    return d * std::log(static_cast<double>(l_orig) / (r * 2 * std::numbers::pi)) / (2 * std::log(base));
  };
  double low = corr(beta_fast), high = corr(beta_slow);
  if (truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, d - 1.0);
  if (low == high) high += 0.001;
  yarn_result r{{}, low, high, 1.0};
  for (int i = 0; i < d / 2; ++i) {
    const double ramp = std::min(1.0, std::max(0.0, (i - low) / (high - low)));
    const double extrapolation = 1 - ramp;
    const double th = pow_neg(base, i, d);
    r.inv_freq.push_back(th / factor * (1 - extrapolation) + th * extrapolation);
  }
  if (attention_factor) r.attention_factor = *attention_factor;
  else if (mscale && mscale_all_dim) r.attention_factor = get_mscale(factor, *mscale) / get_mscale(factor, *mscale_all_dim);
  else r.attention_factor = get_mscale(factor);
  return r;
}

inline std::vector<double> rope_llama3(double base, int d, double factor, double low_freq_factor,
                                       double high_freq_factor, std::int64_t l_orig) {
  const double lo_wl = l_orig / low_freq_factor, hi_wl = l_orig / high_freq_factor;
  std::vector<double> t;
  for (int i = 0; i < d / 2; ++i) {
    const double th = pow_neg(base, i, d);
    const double wl = 2 * std::numbers::pi / th;
    if (wl < hi_wl) t.push_back(th);
    else if (wl > lo_wl) t.push_back(th / factor);
    else {
      const double s = (l_orig / wl - low_freq_factor) / (high_freq_factor - low_freq_factor);
      t.push_back((1 - s) * th / factor + s * th);
    }
  }
  return t;
}

inline std::vector<double> rope_longrope(double base, int d, const std::vector<double>& ext) {
  std::vector<double> t;
  for (int i = 0; i < d / 2; ++i) t.push_back(1.0 / (ext[i] * std::pow(base, 2.0 * i / d)));
  return t;
}

inline double longrope_attention(double factor, std::int64_t l_orig) {
  return factor <= 1 ? 1.0 : std::sqrt(1 + std::log(factor) / std::log(static_cast<double>(l_orig)));
}

/// ALiBi, biases.md: slopes_pow2(n) = [r^(k+1)], r = 2^(-max_bias/n); other H: P + every other of 2P.
inline std::vector<double> alibi_slopes(int heads, double max_bias = 8.0) {
  auto pow2 = [&](int n) {
    std::vector<double> s;
    const double r = std::pow(2.0, -max_bias / n);
    for (int k = 0; k < n; ++k) s.push_back(std::pow(r, k + 1));
    return s;
  };
  int p = 1;
  while (p * 2 <= heads) p *= 2;
  auto s = pow2(p);
  const auto s2 = pow2(2 * p);
  for (int k = 0; static_cast<int>(s.size()) < heads; k += 2) s.push_back(s2[k]);
  return s;
}

inline bool near_rel(double a, double b, double rel) {
  return std::fabs(a - b) <= rel * std::max(std::fabs(a), std::fabs(b));
}

}  // namespace grape::test_formulas
