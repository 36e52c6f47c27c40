#pragma once
// Internal to grape_detect: fitting one plane's frequency from its per-token phases, and the
// schedule search that names the fitted frequencies.
#include <cstdint>
#include <optional>
#include <vector>

#include "detect/detect.hpp"

namespace grape::detect::internal {

/// Per token: the phase of Σ_h (y_a + i·y_b)·conj(x_a + i·x_b) and its weight Σ_h |x_a + i·x_b|².
struct plane_phases {
  std::vector<double> phase;
  std::vector<double> weight;
};

/// θ from phase differences against the token at the smallest position (independent of the
/// offset), unwrapped progressively from small to large position differences. Signed; nullopt
/// when no two usable tokens sit at different positions.
std::optional<double> theta_from_differences(const plane_phases& p, const std::vector<std::int64_t>& pos);

/// θ refitted from absolute angles (p + k)·θ, unwrapped around `theta`, and the residuals.
struct absolute_fit {
  double theta = 0.0;
  double standard_error = 0.0;
  double max_residual = 0.0;
  std::int64_t max_residual_position = 0;
  double rms_residual = 0.0;
};
absolute_fit refit_absolute(const plane_phases& p, const std::vector<std::int64_t>& pos, std::int64_t offset,
                            double theta);

double wrap_angle(double a);  // to (−π, π]

/// The simplest schedule grape knows that reproduces d.theta within d.theta_tolerance.
std::optional<schedule_match> identify_schedule(const detection& d, std::int64_t seq_len);

/// How far a table is from the fit: max over planes of |θ_fit − θ| / tolerance (≤ 1 is a match).
double worst_sigma(const detection& d, const std::vector<double>& inv_freq);

/// `s` with `field` fitted to d.theta (a log-grid scan over [lo, hi], then golden-section), or
/// nullopt when no value matches.
std::optional<rope_schedule> fit_field(const detection& d, rope_schedule s, double rope_schedule::*field,
                                       double lo, double hi, std::int64_t seq_len);

/// The table of `s` at `seq_len`, or nullopt when its parameters are out of range.
std::optional<schedule_table> table_of(const rope_schedule& s, std::int64_t seq_len);

/// One-line parameters of a schedule: "llama3: base 500000, factor 8, ...".
std::string describe_schedule(const rope_schedule& s);

}  // namespace grape::detect::internal
