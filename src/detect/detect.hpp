#pragma once
// grape detect: which rotary position encoding another engine applied, read from one tensor before
// and after its rotation, and what differs from a model's expected encoding (docs/detect.md).
//
// The model fitted: for each plane (a, b) of rotated channels and each token t,
//   (y_a + i·y_b) = af · e^{i·(p_t + k)·θ_j} · (x_a + i·x_b)   for every head,
// with channels outside the planes passed through. Everything is fitted from the tensors: the
// planes (so the layout or any fixed channel permutation), θ_j per plane, the attention factor af,
// the position offset k, and how the phase error grows with position (the angle precision).
// Implementation: src/detect/ (grape_detect).
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "model/rope_schedule.hpp"

namespace grape::detect {

/// [tokens, heads, head_dim] values, row-major, widened to float64.
struct tensor3 {
  std::int64_t tokens = 0, heads = 0, head_dim = 0;
  std::vector<double> values;
};

struct detect_input {
  tensor3 before;
  tensor3 after;
  std::optional<std::vector<std::int64_t>> positions;  // one per token; absent: consecutive, up to an offset
  /// Unit roundoff of the type `after` was stored in (2^-24 float32, 2^-11 float16, 2^-8 bfloat16):
  /// sets the noise floor below which differences are rounding.
  double output_roundoff = 0x1p-24;
  double input_roundoff = 0x1p-24;  // of `before`'s type: a pass-through copy into a coarser type rounds
};

enum class layout_found { half_split, interleaved, permutation };
enum class precision_found { exact, float32_angles, worse };

/// A schedule that reproduces the fitted θ: its parameters and how close it came.
struct schedule_match {
  rope_schedule schedule;
  std::int64_t seq_len = 0;       // the length it was evaluated at (dynamic NTK, LongRoPE)
  double attention_factor = 1.0;  // the schedule's own
  double worst_sigma = 0.0;       // max over planes of |θ_fit − θ| / (the plane's tolerance)
  std::string description;        // "llama3: base 500000, factor 8, ..."
};

struct detection {
  bool found = false;
  std::string reason;  // why not found ("no rotary structure found: ...")
  std::int64_t head_dim = 0;
  int rotary_dim = 0;
  std::vector<int> passthrough;                // channels equal before and after
  std::vector<std::pair<int, int>> planes;     // (first, second) channels, plane order j
  layout_found layout = layout_found::half_split;
  double pairing_residual = 0.0;  // worst plane: relative residual of the plane model
  double pairing_margin = 0.0;    // smallest ratio (next-best partner / chosen partner) residual
  std::vector<double> theta;      // θ_j, radians per position
  std::vector<double> theta_tolerance;  // what a schedule's θ_j may differ by (noise-scaled)
  double attention_factor = 1.0;
  double attention_factor_spread = 0.0;  // largest relative deviation of a plane's factor
  bool positions_given = false;
  std::int64_t offset = 0;              // angle = (p + offset)·θ; without positions: first token's position
  bool offset_resolved = true;          // false when no plane pins the offset
  double phase_residual = 0.0;          // largest |phase − (p + k)·θ| over planes and tokens, rad
  std::int64_t phase_residual_position = 0;  // the position where it is largest
  double float32_angle_scale = 0.0;     // max |(p + k)·θ|·2^-24: a float32 product's error scale
  double noise_floor = 0.0;             // phase noise the output's rounding explains, rad
  precision_found precision = precision_found::exact;
  std::optional<schedule_match> schedule;  // the simplest known schedule that matches
  std::string confidence;                  // "high" or "low", with the margin it rests on
};

/// Fits the model above. Throws grape::input_error for mismatched shapes or positions; never
/// invents structure: `found` is false with a reason on noise or unrelated arrays.
detection detect(const detect_input& in);

/// The encoding a model's config builds (grape inspect), to compare against.
struct expected_encoding {
  rope_schedule schedule;
  layout_kind layout = layout_kind::half_split;
  int head_dim = 0;
  int rotary_dim = 0;
  std::int64_t max_position_embeddings = 0;
};

/// One difference between what was applied and what was expected.
struct finding {
  std::string field;  // rotary_dim, layout, scaling, theta, factor, schedule, attention_factor, positions, precision
  std::string text;   // "layout: interleaved, the config's model is half-split"
  std::string evidence = {};  // the residual it rests on
};

/// The differences, one per field, in a fixed order; empty when the tensors match `expected`.
std::vector<finding> compare(const detection& d, const detect_input& in, const expected_encoding& expected);

/// The report: the detection, then the findings when a config was compared.
std::string report_text(const detection& d);
std::string report_json(const detection& d, const std::vector<finding>* findings);

std::string to_string(layout_found l);
std::string to_string(precision_found p);
std::string describe_planes(const std::vector<std::pair<int, int>>& planes);

}  // namespace grape::detect
