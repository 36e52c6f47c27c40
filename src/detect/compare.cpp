// compare(): what the tensors show against the encoding a config builds, one finding per field.
// The frequencies are explained by the smallest change to the config's schedule that reproduces
// them (scaling not applied, another base, another factor), else by any schedule grape knows.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "detect/phase_fit.hpp"

namespace grape::detect {

namespace {

using internal::describe_schedule;
using internal::fit_field;
using internal::table_of;

std::string config_layout_text(layout_kind l) { return l == layout_kind::half_split ? "half-split" : "interleaved"; }

std::string found_layout_text(const detection& d) {
  if (d.layout == layout_found::permutation) return "channel permutation " + describe_planes(d.planes);
  return d.layout == layout_found::half_split ? "half-split" : "interleaved";
}

std::string config_schedule_text(const rope_schedule& s) {
  if (s.type == rope_type::default_rope) return fmt::format("default RoPE, base {}", s.base);
  return fmt::format("{} factor {}", to_string(s.type), s.factor);
}

struct frequency_verdict {
  bool as_config = false;
  bool scaling_dropped = false;
  std::optional<finding> text;
  double schedule_attention_factor = 1.0;  // the attention factor of the schedule the engine used
};

frequency_verdict frequencies(const detection& d, const expected_encoding& e, const std::vector<std::int64_t>& lens) {
  frequency_verdict v;
  rope_schedule s = e.schedule;
  s.rotary_dim = d.rotary_dim;
  for (auto len : lens) {
    const auto t = table_of(s, len);
    if (t && internal::worst_sigma(d, t->inv_freq) <= 1) {
      v.as_config = true;
      v.schedule_attention_factor = t->attention_factor;
      return v;
    }
  }
  const std::int64_t len = lens.front();
  if (s.type != rope_type::default_rope) {
    rope_schedule plain;
    plain.rotary_dim = s.rotary_dim;
    plain.base = s.base;
    if (const auto t = table_of(plain, len); t && internal::worst_sigma(d, t->inv_freq) <= 1) {
      v.scaling_dropped = true;
      v.text = finding{"scaling", fmt::format("scaling: none (θ is the unscaled table with base {}), the config says {}",
                                              s.base, config_schedule_text(s))};
      return v;
    }
  }
  if (auto fit = fit_field(d, s, &rope_schedule::base, 2.0, 1e12, len)) {
    v.schedule_attention_factor = table_of(*fit, len)->attention_factor;
    v.text = finding{"theta", fmt::format("theta: {}, the config says {}", fit->base, s.base)};
    return v;
  }
  if (s.type != rope_type::default_rope && s.type != rope_type::longrope)
    if (auto fit = fit_field(d, s, &rope_schedule::factor, 1.0, 1e4, len)) {
      v.schedule_attention_factor = table_of(*fit, len)->attention_factor;
      v.text = finding{"factor", fmt::format("factor: {}, the config says {}", fit->factor, s.factor)};
      return v;
    }
  if (d.schedule) {
    v.schedule_attention_factor = d.schedule->attention_factor;
    v.text = finding{"schedule", fmt::format("schedule: {}, the config says {}", d.schedule->description,
                                             describe_schedule(s))};
    return v;
  }
  const auto t = table_of(s, len);
  std::size_t worst = 0;
  double w = 0;
  for (std::size_t j = 0; t && j < d.theta.size(); ++j)
    if (const double z = std::abs(d.theta[j] - t->inv_freq[j]) / d.theta_tolerance[j]; z > w) w = z, worst = j;
  v.text = finding{"frequencies",
                   fmt::format("frequencies: no schedule grape knows matches; plane {} turns by {:.9g} rad per position, "
                               "the config's by {:.9g}",
                               worst, d.theta[worst], t ? t->inv_freq[worst] : 0.0)};
  return v;
}

std::optional<finding> attention(const detection& d, const frequency_verdict& v, double roundoff) {
  const double measured = d.attention_factor, want = v.schedule_attention_factor;
  const double tol = std::max(8 * d.attention_factor_spread, 16 * std::max(roundoff, 0x1p-24));
  auto near = [&](double a, double b) { return std::abs(a - b) <= tol * std::max(std::abs(b), 1.0); };
  if (near(measured, want)) return std::nullopt;
  std::string text;
  if (want == 1.0) text = fmt::format("attention_factor: {:.6g} applied, the config's schedule has none", measured);
  else if (near(measured, want * want))
    text = fmt::format("attention_factor: {:.6g}, the config's is {:.6g} (applied twice: its square)", measured, want);
  else if (near(measured, 1.0)) text = fmt::format("attention_factor: not applied, the config's is {:.6g}", want);
  else text = fmt::format("attention_factor: {:.6g}, the config's is {:.6g}", measured, want);
  return finding{"attention_factor", text};
}

std::string evidence_for(const std::string& field, const detection& d, double config_sigma) {
  if (field == "layout" || field == "rotary_dim" || field == "head_dim")
    return fmt::format("the planes found fit with residual {:.2g} (unrelated channels: 0.1 and more)", d.pairing_residual);
  if (field == "scaling" || field == "theta" || field == "factor" || field == "schedule" || field == "frequencies")
    return fmt::format("the config's table is {:.3g} tolerances off at its worst plane", config_sigma);
  if (field == "attention_factor")
    return fmt::format("measured {:.6g}; the planes agree within {:.2g}", d.attention_factor, d.attention_factor_spread);
  if (field == "positions") return fmt::format("phase residual {:.3g} rad with this offset", d.phase_residual);
  if (field == "precision")
    return fmt::format("rounding explains {:.3g} rad, float32 angles {:.3g}", d.noise_floor, 4 * d.float32_angle_scale);
  return "";
}

// An interleaved head whose last planes turn too little for the output type to show leaves
// channels R..rotary_dim-1 unchanged, as if passed through. When the config's planes there turn
// less than the rounding explains, the detection is extended with them: θ_j = 0 within
// noise / (largest position), which is all the tensors say.
detection with_invisible_planes(const detection& d, const detect_input& in, const expected_encoding& e) {
  std::vector<int> rotated;
  for (const auto& [a, b] : d.planes) rotated.push_back(a), rotated.push_back(b);
  std::sort(rotated.begin(), rotated.end());
  const int r = static_cast<int>(rotated.size());
  if (r >= e.rotary_dim || d.layout != layout_found::interleaved || rotated.back() != r - 1) return d;
  std::int64_t pmax = in.before.tokens;
  if (in.positions)
    for (auto p : *in.positions) pmax = std::max(pmax, std::abs(p + d.offset));
  rope_schedule s = e.schedule;
  const auto t = table_of(s, pmax + 1);
  if (!t) return d;
  const double tol = d.noise_floor / static_cast<double>(pmax);
  for (int j = r / 2; j < e.rotary_dim / 2; ++j)
    if (t->inv_freq[j] > tol) return d;
  detection x = d;
  for (int j = r / 2; j < e.rotary_dim / 2; ++j) {
    x.planes.push_back({2 * j, 2 * j + 1});
    x.theta.push_back(0.0);
    x.theta_tolerance.push_back(tol);
  }
  x.rotary_dim = e.rotary_dim;
  return x;
}

}  // namespace

std::vector<finding> compare(const detection& found, const detect_input& in, const expected_encoding& e) {
  std::vector<finding> out;
  if (!found.found) return {{"structure", found.reason}};
  const detection d = with_invisible_planes(found, in, e);
  std::vector<int> want_rotated(static_cast<std::size_t>(e.rotary_dim));
  for (int c = 0; c < e.rotary_dim; ++c) want_rotated[c] = c;
  std::vector<int> rotated;
  for (const auto& [a, b] : d.planes) rotated.push_back(a), rotated.push_back(b);
  std::sort(rotated.begin(), rotated.end());
  if (d.head_dim != e.head_dim)
    out.push_back({"head_dim", fmt::format("head_dim: {}, the config says {}", d.head_dim, e.head_dim)});
  if (rotated != want_rotated) {
    out.push_back({"rotary_dim", rotated.size() == want_rotated.size()
                                     ? fmt::format("rotary_dim: channels {}..{} turn, the config turns 0..{}",
                                                   rotated.front(), rotated.back(), e.rotary_dim - 1)
                                     : fmt::format("rotary_dim: {}, the config says {}", d.rotary_dim, e.rotary_dim)});
    for (auto& f : out) f.evidence = evidence_for(f.field, d, INFINITY);
    return out;  // the planes cannot be compared one to one
  }
  const bool same_layout = d.rotary_dim == 2 || (d.layout == layout_found::half_split && e.layout == layout_kind::half_split) ||
                           (d.layout == layout_found::interleaved && e.layout == layout_kind::interleaved);
  if (!same_layout)
    out.push_back({"layout", fmt::format("layout: {}, the config's model is {}", found_layout_text(d), config_layout_text(e.layout))});

  std::vector<std::int64_t> lens;
  std::int64_t longest = in.before.tokens;
  if (in.positions)
    for (auto p : *in.positions) longest = std::max(longest, p + 1);
  lens.push_back(longest);
  // Dynamic NTK follows the current length; LongRoPE's long factors are also what some servers use
  // whenever the configured context exceeds the original one.
  if (e.schedule.type == rope_type::longrope && e.max_position_embeddings > 0) lens.push_back(e.max_position_embeddings);
  const frequency_verdict v = frequencies(d, e, lens);
  if (v.text) out.push_back(*v.text);
  if (!(v.scaling_dropped && std::abs(d.attention_factor - 1) <= 16 * std::max(in.output_roundoff, 0x1p-24)))
    if (auto f = attention(d, v, in.output_roundoff)) out.push_back(*f);
  if (d.positions_given && d.offset != 0)
    out.push_back({"positions", fmt::format("positions: offset {:+} (angles are (p {} {})·θ){}", d.offset,
                                            d.offset > 0 ? '+' : '-', std::abs(d.offset),
                                            d.offset_resolved ? "" : "; the slowest plane wraps over it, so the offset is the nearest fit")});
  if (d.precision == precision_found::float32_angles)
    out.push_back({"precision", fmt::format("precision: float32 angles (phase error {:.3g} rad at position {}, as a float32 "
                                            "product m·θ has), the config's encoding is exact",
                                            d.phase_residual, d.phase_residual_position)});
  else if (d.precision == precision_found::worse)
    out.push_back({"precision", fmt::format("precision: phase error {:.3g} rad at position {}, more than float32 angles "
                                            "explain ({:.3g}), the config's encoding is exact",
                                            d.phase_residual, d.phase_residual_position, 4 * d.float32_angle_scale)});
  double config_sigma = INFINITY;
  rope_schedule s = e.schedule;
  s.rotary_dim = d.rotary_dim;
  for (auto len : lens)
    if (const auto t = table_of(s, len)) config_sigma = std::min(config_sigma, internal::worst_sigma(d, t->inv_freq));
  for (auto& f : out) f.evidence = evidence_for(f.field, d, config_sigma);
  return out;
}

}  // namespace grape::detect
