#pragma once
// One-line checks for run-time parameters: each names the field it checks.
#include <cmath>
#include <fmt/format.h>
#include <string_view>

#include "grape/detail/error.hpp"

namespace grape::detail {

inline void require_positive(std::string_view field, double value) {
  if (!std::isfinite(value) || !(value > 0))
    throw input_error(fmt::format("{}: must be a finite number > 0 (got {})", field, value));
}
inline void require_finite(std::string_view field, double value) {
  if (!std::isfinite(value)) throw input_error(fmt::format("{}: must be finite (got {})", field, value));
}
/// require_finite for element `index` of the array `array`: the field's name is formatted only when
/// the value fails (a check per element of a per-token array runs on every call).
inline void require_finite_at(std::string_view array, long long index, double value) {
  if (!std::isfinite(value)) throw input_error(fmt::format("{}[{}]: must be finite (got {})", array, index, value));
}
inline void require_count(std::string_view field, long long value, long long at_least = 1) {
  if (value < at_least) throw input_error(fmt::format("{}: must be >= {} (got {})", field, at_least, value));
}
inline void require_even(std::string_view field, long long value) {
  if (value <= 0 || value % 2 != 0)
    throw input_error(fmt::format("{}: must be even and > 0 (got {})", field, value));
}
inline void require_at_most(std::string_view field, long long value, std::string_view limit_name, long long limit) {
  if (value > limit)
    throw input_error(fmt::format("{}: must be <= {} ({}) (got {})", field, limit_name, limit, value));
}

}  // namespace grape::detail
