#pragma once
// grape gen: one self-contained source file that applies one model's rotary encoding, for another
// runtime. The per-plane frequencies are baked in as exact 64-bit turn fractions, with the
// attention factor, layout, head_dim and rotary_dim; the element math is the text of the library's
// own headers (embedded_headers.hpp), so the generated kernel computes what grape::cpu::rotate_qk
// computes. docs/generated-kernels.md describes the entry points.
//
// An encoding instance (instance_gen.hpp) takes the same road when it is made of rotation planes on
// one axis (its rotary_spec); any other rotate_qk instance is baked as its representation's view
// (view_kernel_description below): the view's bytes, its arrays and the text of the view headers.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
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

/// The element type of one array a view points into.
enum class element_kind { f32, f64, i32, i64, u64 };

/// One array of a view, its elements' bytes as they are in memory.
struct baked_array {
  element_kind kind = element_kind::f32;
  std::int64_t count = 0;
  std::vector<unsigned char> bytes;  // count elements
};

/// What one generated view kernel specialises to: a rotate_qk instance with its view baked.
struct view_kernel_description {
  std::string name;                     // identifier fragment: entry point grape_<name>_encode
  std::string view_type;                // its C++ name in the embedded headers: grape::skew_view<2>
  std::string view_header;              // the header that defines it: grape/view/skew.hpp
  int rank = 1;                         // position axes
  int dim = 0;                          // the rotary window: view.dim()
  int state_floats = 0;                 // view.state_floats()
  int scratch_floats = 0;               // view.scratch_floats()
  std::vector<unsigned char> view_bytes;  // the view object, its pointers null
  std::size_t view_align = 1;
  std::vector<baked_array> arrays;      // in the order the view's relocate() lists them
  int head_dim = 0;
  layout_kind q_layout = layout_kind::half_split;
  layout_kind k_layout = layout_kind::half_split;
  double attention_factor = 1.0;
  std::vector<std::string> provenance;  // lines for the header comment
  // A view that is not grape's own (a user's type): the headers that define it, embedded after
  // grape's view headers in this order, each including only std headers, grape's embedded ones and
  // earlier ones of this list (path: its spelling in those includes).
  std::vector<std::pair<std::string, std::string>> user_headers;  // (path, text)
};

/// grape_<name>_encode (cpp) or grape_<name>_encode_cuda (cuda).
std::string view_entry_point_name(std::string_view name, target t);

/// The whole source file of a view kernel. A window wider than head_dim, an odd window with a
/// half_split layout, non-finite arrays, or (cuda) a view whose per-thread buffers do not fit the
/// shared memory of one block are an input_error.
std::string generate_view_source(const view_kernel_description& kernel, target t);

}  // namespace grape::gen
