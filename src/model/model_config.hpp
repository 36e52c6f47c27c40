#pragma once
// A Hugging Face style config.json read into the position encoding the model uses: rotary (with
// its schedule), ALiBi slopes, or T5 relative buckets, plus the sizes the KV-cache estimate needs.
// Field spellings handled: docs/models.md. Bad input: grape::input_error naming file and field.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/rope_schedule.hpp"

namespace grape::model {

enum class encoding_kind { rotary, alibi, t5 };

struct rotary_model {
  rope_schedule schedule;
  layout_kind layout = layout_kind::half_split;
  int head_dim = 0;     // channels of the tensor the rotation is applied to
  int rotary_dim = 0;   // rotated channels (schedule.rotary_dim)
  std::string source;   // "rope_scaling", "rope_parameters" or "" (no schedule dict)
  std::string rotary_dim_from;  // which field set the rotary dim, for the report
};

struct alibi_model {
  double max_bias = 8.0;
  std::vector<double> slopes;  // one per head
};

struct t5_model {
  int num_buckets = 32;
  int max_distance = 128;
  bool is_decoder = false;  // the config's own flag; an encoder-decoder has both directions
  bool encoder_decoder = true;
};

struct model_description {
  std::string file;
  std::string model_type;
  encoding_kind kind = encoding_kind::rotary;
  int num_layers = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;                        // attention head dim (K), for the KV-cache estimate
  std::int64_t max_position_embeddings = 0;  // 0: the config states no maximum
  std::int64_t kv_elements_per_token = 0;  // K and V over all layers
  std::string kv_formula;                  // how kv_elements_per_token was computed
  std::vector<std::string> notes;          // position-relevant remarks (sliding window, MLA, ...)
  rotary_model rotary;
  alibi_model alibi;
  t5_model t5;
};

/// Parses config.json text. `file` names it in error messages.
model_description parse_model_config(std::string_view text, const std::string& file);

/// Reads and parses a file; an unreadable file is an input_error too.
model_description load_model_config(const std::string& path);

std::string_view to_string(encoding_kind k);

/// evaluate(desc.rotary.schedule, seq_len, precision); a bad schedule's error names desc.file.
schedule_table evaluate_schedule(const model_description& desc, std::int64_t seq_len,
                                 frequency_precision precision);

/// A rotary model's table and kernel parameters at `seq_len` (default: max_position_embeddings, or
/// the original context if that is all the config states). What inspect, apply, plot and the
/// Python module's from_config evaluate.
struct evaluated_rotary {
  schedule_table table;
  rotary_spec spec;
};
evaluated_rotary evaluate_rotary(const model_description& desc, std::optional<std::int64_t> seq_len,
                                 frequency_precision precision);

}  // namespace grape::model
