// Naming fitted frequencies: grape's own schedule code (evaluate) computes each candidate's table,
// and a candidate matches when every plane lies within that plane's fit tolerance.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "detect/phase_fit.hpp"
#include "grape/detail/error.hpp"

namespace grape::detect::internal {

std::optional<schedule_table> table_of(const rope_schedule& s, std::int64_t seq_len) {
  try {
    validate(s, "candidate");
    return evaluate(s, seq_len);
  } catch (const input_error&) {
    return std::nullopt;
  }
}

double worst_sigma(const detection& d, const std::vector<double>& inv_freq) {
  if (inv_freq.size() != d.theta.size()) return INFINITY;
  double w = 0;
  for (std::size_t j = 0; j < d.theta.size(); ++j)
    w = std::max(w, std::abs(d.theta[j] - inv_freq[j]) / d.theta_tolerance[j]);
  return w;
}

namespace {

double chi2(const detection& d, const rope_schedule& s, std::int64_t seq_len) {
  const auto t = table_of(s, seq_len);
  if (!t) return INFINITY;
  double c = 0;
  for (std::size_t j = 0; j < d.theta.size(); ++j) {
    const double z = (d.theta[j] - t->inv_freq[j]) / d.theta_tolerance[j];
    c += z * z;
  }
  return c;
}

double sigma_of(const detection& d, const rope_schedule& s, std::int64_t seq_len) {
  const auto t = table_of(s, seq_len);
  return t ? worst_sigma(d, t->inv_freq) : INFINITY;
}

// The shortest decimal (fewest significant digits) that still matches: 500000, not 500000.0000003.
double rounded_value(const detection& d, rope_schedule s, double rope_schedule::*field, std::int64_t seq_len) {
  const double v = s.*field;
  for (int digits = 1; digits <= 15; ++digits) {
    // 10^k is exact for |k| <= 22, so divide or multiply by it rather than by its inverse.
    const int k = static_cast<int>(std::floor(std::log10(std::abs(v)))) - digits + 1;
    const double p = std::pow(10.0, std::abs(k));
    s.*field = k >= 0 ? std::round(v / p) * p : std::round(v * p) / p;
    if (sigma_of(d, s, seq_len) <= 1) return s.*field;
  }
  return v;
}

// `s` with `field` set to the value in [lo, hi] closest to the fit (matching or not).
rope_schedule best_field(const detection& d, rope_schedule s, double rope_schedule::*field, double lo, double hi,
                         std::int64_t seq_len, int grid = 200) {
  // A log-grid scan finds the basin (the table is not smooth across YaRN/llama3 band edges), then a
  // golden-section search in log space narrows it.
  const double llo = std::log(lo), lhi = std::log(hi);
  double best_x = llo, best = INFINITY;
  for (int i = 0; i <= grid; ++i) {
    s.*field = std::exp(llo + (lhi - llo) * i / grid);
    const double c = chi2(d, s, seq_len);
    if (c < best) best = c, best_x = llo + (lhi - llo) * i / grid;
  }
  const double step = (lhi - llo) / grid;
  double a = best_x - step, b = best_x + step;
  const double g = (std::sqrt(5.0) - 1) / 2;
  auto f = [&](double x) {
    s.*field = std::exp(x);
    return chi2(d, s, seq_len);
  };
  double c1 = b - g * (b - a), c2 = a + g * (b - a), f1 = f(c1), f2 = f(c2);
  for (int it = 0; it < 50 && b - a > 1e-12; ++it) {  // 0.618^50: 4e-11 of the bracket
    if (f1 < f2) b = c2, c2 = c1, f2 = f1, c1 = b - g * (b - a), f1 = f(c1);
    else a = c1, c1 = c2, f1 = f2, c2 = a + g * (b - a), f2 = f(c2);
  }
  s.*field = std::exp((a + b) / 2);
  return s;
}

}  // namespace

std::optional<rope_schedule> fit_field(const detection& d, rope_schedule s, double rope_schedule::*field, double lo,
                                       double hi, std::int64_t seq_len) {
  s = best_field(d, s, field, lo, hi, seq_len);
  if (sigma_of(d, s, seq_len) > 1) return std::nullopt;
  s.*field = rounded_value(d, s, field, seq_len);
  return s;
}

std::string describe_schedule(const rope_schedule& s) {
  switch (s.type) {
    case rope_type::default_rope: return fmt::format("default: base {}", s.base);
    case rope_type::linear: return fmt::format("linear: base {}, factor {}", s.base, s.factor);
    case rope_type::ntk: return fmt::format("ntk: base {}, factor {}", s.base, s.factor);
    case rope_type::dynamic:
      return fmt::format("dynamic: base {}, factor {}, max_position_embeddings {}", s.base, s.factor,
                         s.max_position_embeddings);
    case rope_type::yarn:
      return fmt::format("yarn: base {}, factor {}, original context {}, beta_fast {}, beta_slow {}", s.base,
                         s.factor, s.original_max_position_embeddings, s.beta_fast, s.beta_slow);
    case rope_type::llama3:
      return fmt::format("llama3: base {}, factor {}, low_freq_factor {}, high_freq_factor {}, original context {}",
                         s.base, s.factor, s.low_freq_factor, s.high_freq_factor, s.original_max_position_embeddings);
    case rope_type::longrope:
      return fmt::format("longrope: base {}, factor {}, original context {} (factor lists from the config)", s.base,
                         s.factor, s.original_max_position_embeddings);
  }
  return "unknown";
}

namespace {

std::optional<schedule_match> matched(const detection& d, const rope_schedule& s, std::int64_t seq_len) {
  const auto t = table_of(s, seq_len);
  if (!t) return std::nullopt;
  const double w = worst_sigma(d, t->inv_freq);
  if (w > 1) return std::nullopt;
  return schedule_match{s, seq_len, t->attention_factor, w, describe_schedule(s)};
}

// YaRN and llama3 keep the fast planes and divide the slow ones by the factor: the base comes from
// the fast planes, the factor from the slowest, the original context from a grid of powers of two.
std::optional<schedule_match> banded(const detection& d, rope_type type, std::int64_t seq_len) {
  const int n = static_cast<int>(d.theta.size());
  if (n < 4 || std::abs(d.theta[0] - 1) > d.theta_tolerance[0]) return std::nullopt;
  const double b0 = std::pow(d.theta[1], -d.rotary_dim / 2.0);
  const double f0 = std::pow(b0, -2.0 * (n - 1) / d.rotary_dim) / d.theta[n - 1];
  if (!(f0 > 1.0001) || !std::isfinite(b0)) return std::nullopt;
  std::vector<std::pair<double, double>> llama_bands = {{1, 4}, {1, 2}, {2, 4}, {1, 8}};
  for (std::int64_t l = 1024; l <= (std::int64_t{1} << 20); l *= 2)
    for (std::size_t band = 0; band < (type == rope_type::llama3 ? llama_bands.size() : 1); ++band) {
      rope_schedule s;
      s.type = type;
      s.rotary_dim = d.rotary_dim;
      s.base = b0;
      s.factor = f0;
      s.original_max_position_embeddings = l;
      s.max_position_embeddings = l;
      if (type == rope_type::llama3) std::tie(s.low_freq_factor, s.high_freq_factor) = llama_bands[band];
      // Base and factor by turns (the base sets the kept planes, the factor the others), then each
      // rounded to the shortest decimal that still matches.
      s = best_field(d, s, &rope_schedule::base, b0 / 1.5, b0 * 1.5, seq_len, 40);
      for (int round = 0; round < 3; ++round) {
        s = best_field(d, s, &rope_schedule::factor, s.factor / 1.05, s.factor * 1.05, seq_len, 8);
        s = best_field(d, s, &rope_schedule::base, s.base / 1.01, s.base * 1.01, seq_len, 8);
      }
      if (sigma_of(d, s, seq_len) > 1) continue;
      s.base = rounded_value(d, s, &rope_schedule::base, seq_len);
      s.factor = rounded_value(d, s, &rope_schedule::factor, seq_len);
      if (auto m = matched(d, s, seq_len)) return m;
    }
  return std::nullopt;
}

}  // namespace

std::optional<schedule_match> identify_schedule(const detection& d, std::int64_t seq_len) {
  rope_schedule s;
  s.rotary_dim = d.rotary_dim;
  if (auto fit = fit_field(d, s, &rope_schedule::base, 2.0, 1e12, seq_len)) return matched(d, *fit, seq_len);
  if (d.theta[0] < 1 - d.theta_tolerance[0]) {
    s.type = rope_type::linear;
    s.factor = 1 / d.theta[0];
    if (auto fit = fit_field(d, s, &rope_schedule::base, 2.0, 1e12, seq_len))
      if (auto f = fit_field(d, *fit, &rope_schedule::factor, s.factor / 1.01, s.factor * 1.01, seq_len))
        return matched(d, *f, seq_len);
  }
  if (auto m = banded(d, rope_type::llama3, seq_len)) return m;
  return banded(d, rope_type::yarn, seq_len);
}

}  // namespace grape::detect::internal
