#pragma once
// The registry of built-in encodings: one Hana tuple of types that the CLI, the checker and the
// tests iterate (name -> type).
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

namespace grape {

inline constexpr auto builtin_encodings =
    boost::hana::tuple_t<rope, rope_interleaved, sinusoidal, learned_absolute, alibi, t5_buckets, xpos,
                         grape_m, grape_a, mrope, axial_2d, fox, string_rope, liere_2d, rope_alibi,
                         grape_a_key_gated, grape_a_qk_gated, grape_ap_relative, grape_m_contextual>;

}  // namespace grape
