#pragma once
// RoPE frequency schedules as plain parameters (docs/models.md, reference: rope-scaling.md).
// A schedule plus the current sequence length gives one θ table; dynamic NTK and LongRoPE depend on
// that length, the others do not. Evaluation lives in src/model/rope_schedule.cpp (grape_model).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "grape/schedule/rotary_spec.hpp"

namespace grape {

enum class rope_type { default_rope, linear, ntk, dynamic, yarn, llama3, longrope };

/// How a plane's frequency relates to the unscaled base^(-2i/d).
enum class band_kind { kept, interpolated, blended };

/// float64: θ from the formulas in double. float32_reference: the reference's float32 table
/// (float32 exponent, powf, division and blend in float32, in the reference's order), widened.
enum class frequency_precision { float64, float32_reference };

struct rope_schedule {
  rope_type type = rope_type::default_rope;
  double base = 10000.0;
  int rotary_dim = 0;                              // d, even
  double factor = 1.0;                             // linear, ntk, dynamic, yarn, llama3, longrope
  std::int64_t max_position_embeddings = 0;        // L_max (dynamic threshold)
  std::int64_t original_max_position_embeddings = 0;  // L_orig (yarn, llama3, longrope)
  // yarn
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  bool truncate = true;
  std::optional<double> mscale;
  std::optional<double> mscale_all_dim;
  // yarn and longrope: an explicit attention factor overrides the derived one
  std::optional<double> attention_factor;
  // llama3
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  // longrope: d/2 values each
  std::vector<double> short_factor;
  std::vector<double> long_factor;
};

/// One evaluated table, with what the report needs to explain it.
struct schedule_table {
  std::vector<double> inv_freq;        // θ_i, radians per position, d/2 values
  std::vector<double> base_inv_freq;   // base^(-2i/d), the unscaled table, same precision
  std::vector<band_kind> bands;
  double attention_factor = 1.0;
  frequency_precision precision = frequency_precision::float64;
  std::int64_t seq_len = 0;            // the sequence length it was evaluated at
  double effective_base = 0.0;         // ntk / dynamic: base'; otherwise base
  bool scaled = false;                 // false for dynamic at L <= L_max, default, factor 1
  bool long_factors = false;           // longrope: which list was used
  double yarn_low = 0.0, yarn_high = 0.0;  // yarn: correction range after truncate/clamp
};

/// θ table of `s` at sequence length `seq_len` (only dynamic and longrope look at it).
/// Throws grape::input_error if the parameters are out of range (see validate()).
schedule_table evaluate(const rope_schedule& s, std::int64_t seq_len,
                        frequency_precision precision = frequency_precision::float64);

/// Throws grape::input_error naming `where` (e.g. "config.json: rope_scaling") for parameters the
/// formulas cannot take: odd or zero d, base <= 1, factor below 1 where forbidden, wrong list
/// lengths, non-finite numbers.
void validate(const rope_schedule& s, std::string_view where);

/// The kernel parameters for a head of `head_dim` channels, rotating the schedule's rotary_dim.
rotary_spec make_rotary_spec(const schedule_table& table, int head_dim, int rotary_dim,
                             layout_kind layout);

std::string_view to_string(rope_type t);
std::string_view to_string(band_kind b);
std::string_view to_string(frequency_precision p);
/// Accepts the reference's names ("default", "linear", "dynamic", "yarn", "llama3", "longrope"),
/// the legacy "su" for longrope, and "ntk" for the fixed NTK-aware schedule.
std::optional<rope_type> rope_type_from_string(std::string_view name);

/// YaRN's get_mscale: 1 for s <= 1, else 0.1·m·ln(s) + 1.
double yarn_get_mscale(double scale, double m = 1.0);

}  // namespace grape
