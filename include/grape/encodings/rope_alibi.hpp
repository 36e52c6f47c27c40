#pragma once
// rope_alibi: composition of two injections in one encoding: q and k are rotated (RoPE) and the
// ALiBi bias is added to the score. Both parts are relative, so the sum is.
#include <boost/hana/define_struct.hpp>
#include <random>

#include "grape/detail/random.hpp"
#include "grape/encoding.hpp"
#include "grape/encodings/alibi.hpp"
#include "grape/encodings/rope.hpp"
#include "grape/inject/compose.hpp"

namespace grape {

struct rope_alibi final
    : encoding<translation<1>, rotation_planes<1>,
               compose<rotate_qk<layout_kind::half_split>, score_bias<alibi_bias>>> {
  static constexpr std::string_view name = "rope_alibi";
  static constexpr std::string_view summary = "composition: RoPE on Q/K plus the ALiBi score bias";
  static constexpr law_set claims = rotary_laws;

  struct params {
    BOOST_HANA_DEFINE_STRUCT(params, (rope_params, rotary), (int, heads));
  };
  static params default_params() { return {rope::default_params(), 12}; }
  static params random_params(std::mt19937_64& rng) {
    return {rope::random_params(rng), std::uniform_int_distribution<int>(1, 16)(rng)};
  }
  static instance make(const params& p) {
    return {rope::make(p.rotary), {{alibi_slopes(p.heads)}, p.rotary.head_dim}};
  }
};

}  // namespace grape
