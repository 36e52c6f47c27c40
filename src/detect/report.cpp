// The detect report: text for people, JSON for programs (the same fields).
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "detect/detect.hpp"
#include "grape/detail/enum_names.hpp"

namespace grape::detect {

namespace {
using grape::detail::enum_names;
constexpr enum_names<layout_found, 3> layout_names{{{layout_found::half_split, "half-split"},
                                                    {layout_found::interleaved, "interleaved"},
                                                    {layout_found::permutation, "permutation"}}};
constexpr enum_names<precision_found, 3> precision_names{
    {{precision_found::exact, "exact"}, {precision_found::float32_angles, "float32_angles"},
     {precision_found::worse, "worse"}}};
}  // namespace

std::string to_string(layout_found l) { return std::string(grape::detail::name_of(layout_names, l)); }

std::string to_string(precision_found p) { return std::string(grape::detail::name_of(precision_names, p)); }

std::string describe_planes(const std::vector<std::pair<int, int>>& planes) {
  std::string s = "[";
  for (std::size_t j = 0; j < planes.size(); ++j)
    s += fmt::format("{}({}, {})", j ? " " : "", planes[j].first, planes[j].second);
  return s + "]";
}

std::string report_text(const detection& d) {
  if (!d.found) return d.reason + "\n";
  std::string s;
  s += fmt::format("rotary: {} of {} channels turn in {} planes", d.rotary_dim, d.head_dim, d.planes.size());
  s += d.passthrough.empty() ? "\n"
                             : fmt::format("; {} pass through\n", d.passthrough.size());
  s += fmt::format("layout: {}", to_string(d.layout));
  if (d.layout == layout_found::permutation) s += " " + describe_planes(d.planes);
  s += fmt::format(" (pairing residual {:.3g})\n", d.pairing_residual);
  s += "schedule: " + (d.schedule ? fmt::format("{} (worst plane {:.1e} of its tolerance)", d.schedule->description,
                                                d.schedule->worst_sigma)
                                  : std::string("no schedule grape knows matches")) + "\n";
  s += fmt::format("theta: plane 0 {:.9g}, plane {} {:.9g} rad per position\n", d.theta.front(), d.theta.size() - 1,
                   d.theta.back());
  s += fmt::format("attention_factor: {:.6g} (planes agree within {:.2g})\n", d.attention_factor,
                   d.attention_factor_spread);
  if (d.positions_given) s += fmt::format("positions: offset {:+}\n", d.offset);
  else s += fmt::format("positions: not given, assumed consecutive; the first token is at {}\n", d.offset);
  s += fmt::format("precision: {} (phase error {:.3g} rad at position {}; rounding explains {:.3g}, float32 angles {:.3g})\n",
                   to_string(d.precision), d.phase_residual, d.phase_residual_position, d.noise_floor,
                   4 * d.float32_angle_scale);
  s += "confidence: " + d.confidence + "\n";
  return s;
}

std::string report_json(const detection& d, const std::vector<finding>* findings) {
  nlohmann::json j;
  j["found"] = d.found;
  if (!d.found) j["reason"] = d.reason;
  if (d.found) {
    j["head_dim"] = d.head_dim;
    j["rotary_dim"] = d.rotary_dim;
    j["passthrough"] = d.passthrough;
    j["layout"] = to_string(d.layout);
    j["planes"] = nlohmann::json::array();
    for (const auto& [a, b] : d.planes) j["planes"].push_back({a, b});
    j["pairing_residual"] = d.pairing_residual;
    j["theta"] = d.theta;
    j["theta_tolerance"] = d.theta_tolerance;
    j["schedule"] = d.schedule ? nlohmann::json(d.schedule->description) : nlohmann::json(nullptr);
    j["attention_factor"] = d.attention_factor;
    j["positions_given"] = d.positions_given;
    j["offset"] = d.offset;
    j["precision"] = {{"kind", to_string(d.precision)},
                      {"phase_error", d.phase_residual},
                      {"at_position", d.phase_residual_position},
                      {"rounding_explains", d.noise_floor},
                      {"float32_angles_explain", 4 * d.float32_angle_scale}};
    j["confidence"] = d.confidence;
  }
  if (findings) {
    j["differences"] = nlohmann::json::array();
    for (const auto& f : *findings)
      j["differences"].push_back({{"field", f.field}, {"text", f.text}, {"evidence", f.evidence}});
  }
  return j.dump(2) + "\n";
}

}  // namespace grape::detect
