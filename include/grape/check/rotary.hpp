#pragma once
// Checks the laws of a model's rotary table (what grape inspect reports for a config).
#include "grape/check/report.hpp"
#include "grape/schedule/rotary_spec.hpp"

namespace grape {

check_report check_rotary(const rotary_spec& spec, const check_options& options = {});

}  // namespace grape
