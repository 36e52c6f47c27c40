#pragma once
// The precision certificate grape inspect prints for a rotary model: at its maximum context and at
// 2x and 4x it, the worst-case output error of grape's CPU kernel for a unit-norm pair (the bound
// of docs/precision.md, plus the output rounding for bfloat16), the largest error measured on
// sampled positions just below, and the error a float32 textbook implementation (angle =
// float32 m times float32 θ) has there.
#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "grape/schedule/rotary_spec.hpp"

namespace grape::cli {

struct certificate_row {
  std::int64_t position = 0;
  double float32_bound = 0, float32_measured = 0;
  double bfloat16_bound = 0, bfloat16_measured = 0;
  double textbook_float32 = 0;
};

/// Rows for `context`, 2·context and 4·context (each at most 2^31 − 1, the kernels' documented
/// range); empty for context <= 0. The attention factor is left out (set to 1): errors are per
/// unit-norm pair before it.
std::vector<certificate_row> precision_certificate(const rotary_spec& spec, std::int64_t context);

std::string certificate_text(const std::vector<certificate_row>& rows);
nlohmann::json certificate_json(const std::vector<certificate_row>& rows);

}  // namespace grape::cli
