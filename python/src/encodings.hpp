#pragma once
// What the Python module holds as an encoding: a rotary table (a built-in RoPE, a model config's
// schedule or an explicit frequency table), or a model config's ALiBi slopes / T5 buckets.
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
};

void bind_encodings(nanobind::module_& m);

}  // namespace grape::python
