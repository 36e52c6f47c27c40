#pragma once
// The checker, instantiated once per name of GRAPE_BUILTINS (src/check/check_one_builtin.cpp,
// compiled once per built-in) and for the rotary tables in src/check/check_rotary.cpp (compile time
// stays split per encoding); code that includes this header links grape_check instead of
// re-instantiating.
#include <string_view>

#include "grape/builtins.hpp"
#include "grape/check/builtin_list.hpp"
#include "grape/check/checker.hpp"
#include "grape/encodings/rotary_table.hpp"

#define GRAPE_DECLARE_CHECK(E) \
  extern template check_report check<E>(const std::optional<E::params>&, const check_options&);

namespace grape {
GRAPE_BUILTINS(GRAPE_DECLARE_CHECK)
GRAPE_DECLARE_CHECK(rotary_table<layout_kind::half_split>)
GRAPE_DECLARE_CHECK(rotary_table<layout_kind::interleaved>)
}  // namespace grape
