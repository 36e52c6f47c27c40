#pragma once
// What the Python module holds as an encoding: a rotary table (a built-in RoPE, a model config's
// schedule or an explicit frequency table), ALiBi slopes, or T5 buckets (with a table when the
// fused attention is to apply them).
#include <nanobind/nanobind.h>

#include <string>
#include <vector>

#include "grape/schedule/rotary_spec.hpp"

namespace grape::python {

struct rotary_encoding {
  rotary_spec spec;
  std::string label;      // where it came from: "rope(...)", a config file, "<dict>"
  std::string schedule;   // the schedule and how its table was evaluated, for describe()
};

struct alibi_encoding {
  std::vector<double> slopes;
  std::string label;
};

struct t5_encoding {
  int num_buckets = 32;
  int max_distance = 128;
  bool bidirectional = true;
  std::string label;
  int heads = 0;               // 0 until a table is given (a config holds none)
  std::vector<double> table;   // [num_buckets, heads], the learned bias per bucket and head
};

/// "half_split" or "interleaved"; anything else is an input_error naming `layout`.
layout_kind layout_from(const std::string& name);

void bind_encodings(nanobind::module_& m);

}  // namespace grape::python
