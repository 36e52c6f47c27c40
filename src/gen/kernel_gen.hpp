#pragma once
// grape gen: one self-contained source file that applies one model's rotary encoding, for another
// runtime. The per-plane frequencies are baked in as exact 64-bit turn fractions, with the
// attention factor, layout, head_dim and rotary_dim; the element math is the text of the library's
// own headers (embedded_headers.hpp), so the generated kernel computes what grape::cpu::rotate_qk
// computes. docs/generated-kernels.md describes the entry points.
#include <string>
#include <string_view>
#include <vector>

#include "grape/schedule/rotary_spec.hpp"

namespace grape::gen {

enum class target { cpp, cuda };

/// "cpp" or "cuda"; anything else is an input_error naming --target.
target parse_target(std::string_view text);

/// A C identifier fragment from a model name or path: lower case, every run of other characters
/// turned into one '_'. A config.json is named by its folder ("configs/llama-3.1-8b/config.json"
/// gives "llama_3_1_8b"), any other file by its stem. Empty results are an input_error.
std::string model_name_from_path(std::string_view config_path);
std::string sanitize_name(std::string_view name);

/// What one generated file specialises to.
struct kernel_description {
  std::string name;                     // identifier fragment: entry point grape_<name>_rope
  rotary_spec spec;                     // single-axis rotary spec (token positions)
  std::vector<std::string> provenance;  // lines for the header comment: config, schedule, ...
};

/// grape_<name>_rope (cpp) or grape_<name>_rope_cuda (cuda).
std::string entry_point_name(std::string_view name, target t);

/// The whole source file. Bad specs (multi-axis, odd or zero rotary_dim, rotary_dim > head_dim,
/// wrong inv_freq count, non-finite values) are an input_error.
std::string generate_source(const kernel_description& kernel, target t);

}  // namespace grape::gen
