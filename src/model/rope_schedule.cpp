// Evaluating RoPE schedules (formulas: rope-scaling.md; user guide: docs/models.md).
// Two precisions: float64 straight from the formulas, or the reference's float32 table, evaluated
// with the float32 operations that transformers' rope functions perform on torch CPU tensors, in
// their order and with torch's rounding (model/torch_float32.hpp): scalar parameters are Python
// doubles rounded to float32 where they meet a tensor, `s / tensor` is a reciprocal and a product.
#include "model/rope_schedule.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>

#include "grape/detail/enum_names.hpp"
#include "grape/detail/error.hpp"
#include "model/torch_float32.hpp"

namespace grape {

namespace {

constexpr double two_pi = 2.0 * std::numbers::pi;

// base ** (arange(0, d, 2).float() / d) in torch float32: the reference's `pos_freqs`.
std::vector<float> float32_pos_freqs(float base, int d) {
  return torch_cpu::pow_scalar_base(base, torch_cpu::rope_exponents(d));
}

// 1.0 / pos_freqs.
std::vector<double> float32_base_table(float base, int d) {
  const auto pos_freqs = float32_pos_freqs(base, d);
  std::vector<double> t(pos_freqs.size());
  for (std::size_t i = 0; i < t.size(); ++i) t[i] = torch_cpu::rdiv(1.0f, pos_freqs[i]);
  return t;
}

// base^(-2i/d) for every plane, in the requested precision.
std::vector<double> base_table(double base, int d, frequency_precision p) {
  if (p == frequency_precision::float64) return rope_inv_freq(d, base);
  return float32_base_table(static_cast<float>(base), d);
}

// Dynamic NTK's base as transformers recomputes it in the forward pass, where seq_len is a tensor
// (max(position_ids) + 1): base * ((factor * seq_len / max_pos) - (factor - 1)) ** (d / (d - 2))
// in float32, the power of a 1-element tensor.
float dynamic_base_float32(const rope_schedule& s, std::int64_t seq_len) {
  const float x = static_cast<float>(s.factor) * static_cast<float>(seq_len) /
                      static_cast<float>(s.max_position_embeddings) -
                  static_cast<float>(s.factor - 1.0);
  const double d = s.rotary_dim;
  return static_cast<float>(s.base) * torch_cpu::pow_single(x, d / (d - 2.0));
}

// NTK-aware base change: base · x^(d/(d-2)).
double ntk_base(double base, double x, int d) {
  return base * std::pow(x, static_cast<double>(d) / (d - 2));
}

void check_finite(double v, std::string_view where, std::string_view field) {
  if (!std::isfinite(v)) throw input_error(fmt::format("{}.{}: must be a finite number", where, field));
}

// The reference's float32 table rounds every parameter to float32: one beyond its range would
// turn into infinity there, so it is refused rather than evaluated into zeros or NaN.
void check_float32_range(const rope_schedule& s) {
  auto check = [](std::string_view field, double v) {
    if (!(std::fabs(v) < std::numeric_limits<float>::max()))
      throw input_error(fmt::format("rope schedule: {} {} is beyond float32, where the reference's "
                                    "float32 table lives (use --precision float64)", field, v));
  };
  check("rope_theta", s.base);
  check("factor", s.factor);
  check("low_freq_factor", s.low_freq_factor);
  check("high_freq_factor", s.high_freq_factor);
  for (double f : s.short_factor) check("short_factor", f);
  for (double f : s.long_factor) check("long_factor", f);
}

// The table's frequencies and bands, one per plane of the schedule.
void size_table(const rope_schedule& s, schedule_table& t) {
  t.inv_freq.resize(s.rotary_dim / 2);
  t.bands.resize(s.rotary_dim / 2);
}

// The reference's float32 pos_freqs, or none when the formulas are evaluated in float64.
std::vector<float> reference_pos_freqs(const rope_schedule& s, frequency_precision p) {
  if (p == frequency_precision::float64) return {};
  return float32_pos_freqs(static_cast<float>(s.base), s.rotary_dim);
}

void fill_yarn(const rope_schedule& s, frequency_precision p, schedule_table& t) {
  const int d = s.rotary_dim;
  const double l_orig = static_cast<double>(s.original_max_position_embeddings);
  auto correction_dim = [&](double r) {
    return d * std::log(l_orig / (r * two_pi)) / (2.0 * std::log(s.base));
  };
  double low = correction_dim(s.beta_fast);
  double high = correction_dim(s.beta_slow);
  if (s.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(d - 1));
  if (low == high) high += 0.001;
  t.yarn_low = low;
  t.yarn_high = high;
  const int n = d / 2;
  size_table(s, t);
  const auto pos_freqs = reference_pos_freqs(s, p);
  for (int i = 0; i < n; ++i) {
    double ramp;
    if (p == frequency_precision::float64) {
      ramp = std::clamp((i - low) / (high - low), 0.0, 1.0);
      const double w = 1.0 - ramp;  // extrapolation weight
      const double theta = t.base_inv_freq[i];
      t.inv_freq[i] = (theta / s.factor) * (1.0 - w) + theta * w;
    } else {
      const float extrapolation = torch_cpu::rdiv(1.0f, pos_freqs[i]);
      const float interpolation =
          torch_cpu::rdiv(1.0f, static_cast<float>(s.factor) * pos_freqs[i]);
      const float r = (static_cast<float>(i) - static_cast<float>(low)) /
                      static_cast<float>(high - low);
      const float rf = std::clamp(r, 0.0f, 1.0f);
      const float w = 1.0f - rf;
      t.inv_freq[i] = interpolation * (1.0f - w) + extrapolation * w;
      ramp = rf;
    }
    t.bands[i] = ramp == 0.0 ? band_kind::kept : ramp == 1.0 ? band_kind::interpolated
                                                              : band_kind::blended;
  }
  if (s.attention_factor) {
    t.attention_factor = *s.attention_factor;
  } else if (s.mscale && s.mscale_all_dim) {
    t.attention_factor =
        yarn_get_mscale(s.factor, *s.mscale) / yarn_get_mscale(s.factor, *s.mscale_all_dim);
  } else {
    t.attention_factor = yarn_get_mscale(s.factor);
  }
  t.scaled = true;
}

void fill_llama3(const rope_schedule& s, frequency_precision p, schedule_table& t) {
  const double l_orig = static_cast<double>(s.original_max_position_embeddings);
  const double low_freq_wavelen = l_orig / s.low_freq_factor;
  const double high_freq_wavelen = l_orig / s.high_freq_factor;
  const int n = s.rotary_dim / 2;
  size_table(s, t);
  for (int i = 0; i < n; ++i) {
    const double theta = t.base_inv_freq[i];
    if (p == frequency_precision::float64) {
      const double wavelen = two_pi / theta;
      if (wavelen < high_freq_wavelen) {
        t.inv_freq[i] = theta;
        t.bands[i] = band_kind::kept;
      } else if (wavelen > low_freq_wavelen) {
        t.inv_freq[i] = theta / s.factor;
        t.bands[i] = band_kind::interpolated;
      } else {
        const double sm = (l_orig / wavelen - s.low_freq_factor) /
                          (s.high_freq_factor - s.low_freq_factor);
        t.inv_freq[i] = (1.0 - sm) * theta / s.factor + sm * theta;
        t.bands[i] = band_kind::blended;
      }
    } else {
      const float th = static_cast<float>(theta);
      const float wavelen = torch_cpu::rdiv(static_cast<float>(two_pi), th);
      const float factor = static_cast<float>(s.factor);
      if (wavelen < static_cast<float>(high_freq_wavelen)) {
        t.inv_freq[i] = th;
        t.bands[i] = band_kind::kept;
      } else if (wavelen > static_cast<float>(low_freq_wavelen)) {
        t.inv_freq[i] = th / factor;
        t.bands[i] = band_kind::interpolated;
      } else {
        const float sm = (torch_cpu::rdiv(static_cast<float>(l_orig), wavelen) -
                          static_cast<float>(s.low_freq_factor)) /
                         static_cast<float>(s.high_freq_factor - s.low_freq_factor);
        t.inv_freq[i] = (1.0f - sm) * th / factor + sm * th;
        t.bands[i] = band_kind::blended;
      }
    }
  }
  t.scaled = true;
}

void fill_longrope(const rope_schedule& s, std::int64_t seq_len, frequency_precision p,
                   schedule_table& t) {
  t.long_factors = seq_len > s.original_max_position_embeddings;
  const auto& ext = t.long_factors ? s.long_factor : s.short_factor;
  const int d = s.rotary_dim;
  const int n = d / 2;
  size_table(s, t);
  const auto pos_freqs = reference_pos_freqs(s, p);
  for (int i = 0; i < n; ++i) {
    if (p == frequency_precision::float64) {
      t.inv_freq[i] = 1.0 / (ext[i] * std::pow(s.base, (2.0 * i) / d));
    } else {
      t.inv_freq[i] = torch_cpu::rdiv(1.0f, static_cast<float>(ext[i]) * pos_freqs[i]);
    }
    t.bands[i] = ext[i] == 1.0 ? band_kind::kept : band_kind::interpolated;
  }
  if (s.attention_factor) {
    t.attention_factor = *s.attention_factor;
  } else if (s.factor <= 1.0) {
    t.attention_factor = 1.0;
  } else {
    t.attention_factor = std::sqrt(
        1.0 + std::log(s.factor) / std::log(static_cast<double>(s.original_max_position_embeddings)));
  }
  t.scaled = true;
}

// Plane 0 keeps its frequency under a base change, the last plane is divided by the full
// factor, the planes between are scaled progressively.
std::vector<band_kind> ntk_bands(int n) {
  std::vector<band_kind> b(n, band_kind::blended);
  b.front() = band_kind::kept;
  if (n > 1) b.back() = band_kind::interpolated;
  return b;
}

}  // namespace

double yarn_get_mscale(double scale, double m) {
  return scale <= 1.0 ? 1.0 : 0.1 * m * std::log(scale) + 1.0;
}

void validate(const rope_schedule& s, std::string_view where) {
  const auto name = to_string(s.type);
  if (s.rotary_dim <= 0 || s.rotary_dim % 2 != 0)
    throw input_error(fmt::format("{}: rotary dim must be even and positive (got {})", where,
                                  s.rotary_dim));
  if (!std::isfinite(s.base) || s.base <= 1.0)
    throw input_error(fmt::format("{}: rope_theta must be a finite number > 1 (got {})", where, s.base));
  check_finite(s.factor, where, "factor");
  if (s.type != rope_type::default_rope && s.type != rope_type::longrope && s.factor < 1.0)
    throw input_error(fmt::format("{}.factor: must be >= 1 for {} (got {})", where, name, s.factor));
  if (s.type == rope_type::longrope && s.factor <= 0.0)
    throw input_error(fmt::format("{}.factor: must be > 0 for longrope (got {})", where, s.factor));
  if (s.type == rope_type::ntk && s.rotary_dim <= 2)
    throw input_error(fmt::format("{}: ntk needs a rotary dim > 2 (got {})", where, s.rotary_dim));
  if (s.type == rope_type::dynamic) {
    if (s.rotary_dim <= 2)
      throw input_error(fmt::format("{}: dynamic needs a rotary dim > 2 (got {})", where, s.rotary_dim));
    if (s.max_position_embeddings <= 0)
      throw input_error(fmt::format("{}: dynamic needs max_position_embeddings > 0", where));
  }
  const bool needs_orig = s.type == rope_type::yarn || s.type == rope_type::llama3 ||
                          s.type == rope_type::longrope;
  if (needs_orig) {
    if (s.original_max_position_embeddings <= 0)
      throw input_error(fmt::format("{}.original_max_position_embeddings: must be > 0 for {} (got {})",
                                    where, name, s.original_max_position_embeddings));
    if (s.max_position_embeddings > 0 &&
        s.original_max_position_embeddings > s.max_position_embeddings)
      throw input_error(fmt::format(
          "{}.original_max_position_embeddings: must be <= max_position_embeddings ({}) for {} (got {})",
          where, s.max_position_embeddings, name, s.original_max_position_embeddings));
  }
  if (s.type == rope_type::yarn) {
    check_finite(s.beta_fast, where, "beta_fast");
    check_finite(s.beta_slow, where, "beta_slow");
    if (s.beta_fast <= 0.0)
      throw input_error(fmt::format("{}.beta_fast: must be > 0 (got {})", where, s.beta_fast));
    if (s.beta_slow <= 0.0)
      throw input_error(fmt::format("{}.beta_slow: must be > 0 (got {})", where, s.beta_slow));
    if (s.mscale) check_finite(*s.mscale, where, "mscale");
    if (s.mscale_all_dim) check_finite(*s.mscale_all_dim, where, "mscale_all_dim");
    if (s.mscale && s.mscale_all_dim && yarn_get_mscale(s.factor, *s.mscale_all_dim) == 0.0)
      throw input_error(fmt::format("{}.mscale_all_dim: makes the attention factor divide by zero",
                                    where));
  }
  if ((s.type == rope_type::yarn || s.type == rope_type::longrope) && s.attention_factor) {
    check_finite(*s.attention_factor, where, "attention_factor");
    if (*s.attention_factor <= 0.0)
      throw input_error(fmt::format("{}.attention_factor: must be > 0 (got {})", where,
                                    *s.attention_factor));
  }
  if (s.type == rope_type::llama3) {
    check_finite(s.low_freq_factor, where, "low_freq_factor");
    check_finite(s.high_freq_factor, where, "high_freq_factor");
    if (s.low_freq_factor <= 0.0)
      throw input_error(fmt::format("{}.low_freq_factor: must be > 0 (got {})", where, s.low_freq_factor));
    if (s.high_freq_factor <= s.low_freq_factor)
      throw input_error(fmt::format("{}.high_freq_factor: must be > low_freq_factor ({}) (got {})",
                                    where, s.low_freq_factor, s.high_freq_factor));
  }
  if (s.type == rope_type::longrope) {
    const std::size_t n = static_cast<std::size_t>(s.rotary_dim / 2);
    for (auto [field, list] : {std::pair{"short_factor", &s.short_factor},
                               std::pair{"long_factor", &s.long_factor}}) {
      if (list->size() != n)
        throw input_error(fmt::format("{}.{}: must have rotary_dim/2 = {} values (got {})", where,
                                      field, n, list->size()));
      for (std::size_t i = 0; i < n; ++i)
        if (!std::isfinite((*list)[i]) || (*list)[i] <= 0.0)
          throw input_error(fmt::format("{}.{}[{}]: must be a finite number > 0 (got {})", where,
                                        field, i, (*list)[i]));
    }
  }
}

schedule_table evaluate(const rope_schedule& s, std::int64_t seq_len, frequency_precision p) {
  validate(s, "rope schedule");
  if (p == frequency_precision::float32_reference) check_float32_range(s);
  schedule_table t;
  t.precision = p;
  t.seq_len = seq_len;
  t.effective_base = s.base;
  const int d = s.rotary_dim;
  const int n = d / 2;
  t.base_inv_freq = base_table(s.base, d, p);
  switch (s.type) {
    case rope_type::default_rope:
      t.inv_freq = t.base_inv_freq;
      t.bands.assign(n, band_kind::kept);
      break;
    case rope_type::linear:
      t.inv_freq.resize(n);
      for (int i = 0; i < n; ++i)
        t.inv_freq[i] = p == frequency_precision::float64
                            ? t.base_inv_freq[i] / s.factor
                            : static_cast<float>(t.base_inv_freq[i]) / static_cast<float>(s.factor);
      t.bands.assign(n, s.factor == 1.0 ? band_kind::kept : band_kind::interpolated);
      t.scaled = s.factor != 1.0;
      break;
    case rope_type::ntk:
      t.effective_base = ntk_base(s.base, s.factor, d);
      t.inv_freq = base_table(t.effective_base, d, p);
      t.bands = s.factor == 1.0 ? std::vector<band_kind>(n, band_kind::kept) : ntk_bands(n);
      t.scaled = s.factor != 1.0;
      break;
    case rope_type::dynamic:
      if (seq_len <= s.max_position_embeddings) {
        t.inv_freq = t.base_inv_freq;
        t.bands.assign(n, band_kind::kept);
      } else {
        if (p == frequency_precision::float64) {
          const double x = s.factor * static_cast<double>(seq_len) /
                               static_cast<double>(s.max_position_embeddings) - (s.factor - 1.0);
          t.effective_base = ntk_base(s.base, x, d);
          t.inv_freq = base_table(t.effective_base, d, p);
        } else {
          const float base32 = dynamic_base_float32(s, seq_len);
          t.effective_base = base32;
          t.inv_freq = float32_base_table(base32, d);
        }
        t.bands = ntk_bands(n);
        t.scaled = true;
      }
      break;
    case rope_type::yarn:
      fill_yarn(s, p, t);
      break;
    case rope_type::llama3:
      fill_llama3(s, p, t);
      break;
    case rope_type::longrope:
      fill_longrope(s, seq_len, p, t);
      break;
  }
  return t;
}

rotary_spec make_rotary_spec(const schedule_table& table, int head_dim, int rotary_dim,
                             layout_kind layout) {
  rotary_spec spec;
  spec.head_dim = head_dim;
  spec.rotary_dim = rotary_dim;
  spec.layout = layout;
  spec.inv_freq = table.inv_freq;
  spec.attention_factor = table.attention_factor;
  return spec;
}

namespace {
// "su": LongRoPE's earlier name in configs.
constexpr detail::enum_names<rope_type, 8> rope_type_names{
    {{rope_type::default_rope, "default"}, {rope_type::linear, "linear"}, {rope_type::ntk, "ntk"},
     {rope_type::dynamic, "dynamic"}, {rope_type::yarn, "yarn"}, {rope_type::llama3, "llama3"},
     {rope_type::longrope, "longrope"}, {rope_type::longrope, "su"}}};
constexpr detail::enum_names<band_kind, 3> band_kind_names{
    {{band_kind::kept, "kept"}, {band_kind::interpolated, "interpolated"}, {band_kind::blended, "blended"}}};
}  // namespace

std::string_view to_string(rope_type t) { return detail::name_of(rope_type_names, t); }

std::string_view to_string(band_kind b) { return detail::name_of(band_kind_names, b); }

std::string_view to_string(frequency_precision p) {
  return p == frequency_precision::float64 ? "float64" : "float32_reference";
}

std::optional<rope_type> rope_type_from_string(std::string_view name) {
  return detail::value_named(rope_type_names, name);
}

}  // namespace grape
