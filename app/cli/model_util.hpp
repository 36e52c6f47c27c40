#pragma once
// What inspect, apply and plot share: a config (or a built-in name) read and evaluated into the
// encoding at one sequence length and frequency precision.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/rope_schedule.hpp"
#include "model/model_config.hpp"

namespace grape::cli {

struct evaluated_model {
  model::model_description desc;
  schedule_table table;   // rotary models only
  rotary_spec spec;       // rotary models only
  std::string label;      // the file or the built-in name
};

/// Names `plot` accepts instead of a config: "rope" (default RoPE, d = 128, base 10000).
std::optional<model::model_description> builtin_model(const std::string& name);

/// Reads `path` (or a built-in name when `allow_builtin`) and evaluates its rotary table at
/// `seq_len` (default: max_position_embeddings, or the original context if that is all there is).
evaluated_model evaluate_model(const std::string& path, std::optional<std::int64_t> seq_len,
                               frequency_precision precision, bool allow_builtin = false);

/// An int32/int64 .npy of shape [tokens], widened to int64; anything else is an input_error naming `path`.
std::vector<std::int64_t> read_positions(const std::string& path, std::int64_t tokens);

/// "--precision" values.
frequency_precision parse_precision(const std::string& s);

/// Writes `bytes` to a temp file next to `path` and renames it over `path`, so an error never
/// leaves a partial file.
void write_file_atomically(const std::string& path, const std::string& bytes);

/// The KV-cache dtype the estimates assume.
inline constexpr const char* kv_dtype = "bf16";
inline constexpr int kv_bytes_per_element = 2;

}  // namespace grape::cli
