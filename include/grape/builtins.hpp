#pragma once
// The registry of built-in encodings: one Hana tuple of types that the CLI, the checker and the
// tests iterate (name -> type), made from the one list GRAPE_BUILTINS.
#include <boost/hana/tuple.hpp>
#include <boost/hana/type.hpp>

#include "grape/encodings/alibi.hpp"
#include "grape/encodings/axial_2d.hpp"
#include "grape/encodings/fox.hpp"
#include "grape/encodings/grape_a.hpp"
#include "grape/encodings/grape_a_gated.hpp"
#include "grape/encodings/grape_ap.hpp"
#include "grape/encodings/grape_m.hpp"
#include "grape/encodings/grape_m_contextual.hpp"
#include "grape/encodings/learned_absolute.hpp"
#include "grape/encodings/liere_2d.hpp"
#include "grape/encodings/mrope.hpp"
#include "grape/encodings/rope.hpp"
#include "grape/encodings/rope_alibi.hpp"
#include "grape/encodings/sinusoidal.hpp"
#include "grape/encodings/string_rope.hpp"
#include "grape/encodings/t5_buckets.hpp"
#include "grape/encodings/xpos.hpp"

// The one list of built-ins, in the registry's order. A new built-in is its header (above) and
// one line here: the CMake build reads this list (cmake/builtin_list.cmake) and generates the
// checker's unit per built-in (src/check) and the Python module's kernel unit per built-in
// (python/src); the registry below, the checker's declarations and the CLI iterate it.
#define GRAPE_BUILTINS(X)                                                                                 \
  X(rope) X(rope_interleaved) X(sinusoidal) X(learned_absolute) X(alibi) X(t5_buckets) X(xpos) X(grape_m) \
  X(grape_a) X(mrope) X(axial_2d) X(fox) X(string_rope) X(liere_2d) X(rope_alibi) X(grape_a_key_gated)    \
  X(grape_a_qk_gated) X(grape_ap_relative) X(grape_m_contextual)

namespace grape {

namespace detail {
#define GRAPE_BUILTIN_TYPE(E) , E
template <class Ignored, class... E>
inline constexpr auto builtin_tuple = boost::hana::tuple_t<E...>;
}  // namespace detail

inline constexpr auto builtin_encodings = detail::builtin_tuple<void GRAPE_BUILTINS(GRAPE_BUILTIN_TYPE)>;
#undef GRAPE_BUILTIN_TYPE

}  // namespace grape
