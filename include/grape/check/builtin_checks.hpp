#pragma once
// The checker, instantiated once per built-in in src/check/ (compile time stays split per
// encoding); code that includes this header links grape_check instead of re-instantiating.
#include <string_view>

#include "grape/builtins.hpp"
#include "grape/check/builtin_list.hpp"
#include "grape/check/checker.hpp"
#include "grape/encodings/rotary_table.hpp"

#define GRAPE_DECLARE_CHECK(E) \
  extern template check_report check<E>(const std::optional<E::params>&, const check_options&);

namespace grape {
GRAPE_DECLARE_CHECK(rope)
GRAPE_DECLARE_CHECK(rope_interleaved)
GRAPE_DECLARE_CHECK(sinusoidal)
GRAPE_DECLARE_CHECK(learned_absolute)
GRAPE_DECLARE_CHECK(alibi)
GRAPE_DECLARE_CHECK(t5_buckets)
GRAPE_DECLARE_CHECK(xpos)
GRAPE_DECLARE_CHECK(grape_m)
GRAPE_DECLARE_CHECK(grape_a)
GRAPE_DECLARE_CHECK(mrope)
GRAPE_DECLARE_CHECK(axial_2d)
GRAPE_DECLARE_CHECK(fox)
GRAPE_DECLARE_CHECK(string_rope)
GRAPE_DECLARE_CHECK(liere_2d)
GRAPE_DECLARE_CHECK(rope_alibi)
GRAPE_DECLARE_CHECK(grape_a_key_gated)
GRAPE_DECLARE_CHECK(grape_a_qk_gated)
GRAPE_DECLARE_CHECK(grape_ap_relative)
GRAPE_DECLARE_CHECK(grape_m_contextual)
GRAPE_DECLARE_CHECK(rotary_table<layout_kind::half_split>)
GRAPE_DECLARE_CHECK(rotary_table<layout_kind::interleaved>)
}  // namespace grape
