#pragma once
// string_rope: RoPE in a learned orthogonal basis, ρ(m) = B·R(m)·Bᵀ (STRING; every commuting skew
// family is RoPE in some basis). Written through the general skew-generator representation.
#include <boost/hana/define_struct.hpp>
#include <cstdint>
#include <random>

#include "grape/detail/random.hpp"
#include "grape/detail/validate.hpp"
#include "grape/encoding.hpp"
#include "grape/group/translation.hpp"
#include "grape/inject/rotate_qk.hpp"
#include "grape/rep/rotation_planes.hpp"
#include "grape/rep/skew_generators.hpp"

namespace grape {

struct string_rope final : encoding<translation<1>, skew_generators<1>, rotate_qk<layout_kind::interleaved>> {
  static constexpr std::string_view name = "string_rope";
  static constexpr std::string_view summary = "RoPE in a learned orthogonal basis: B R(m) B^T (STRING)";
  static constexpr law_set claims = rotary_laws;

  struct params {
    BOOST_HANA_DEFINE_STRUCT(params, (int, head_dim), (double, base), (std::uint64_t, basis_seed));
  };
  static params default_params() { return {32, 10000.0, 1}; }
  static params random_params(std::mt19937_64& rng) {
    return {detail::pick(rng, {2, 4, 8, 16}), detail::log_uniform(rng, 10.0, 1e4), rng()};
  }
  static instance make(const params& p) {
    detail::require_even("head_dim", p.head_dim);
    detail::require_positive("base", p.base);
    std::mt19937_64 rng(p.basis_seed);
    return {skew_generators<1>::from_basis(detail::random_orthogonal(rng, p.head_dim), rope_inv_freq(p.head_dim, p.base)),
            p.head_dim, 1.0};
  }
};

}  // namespace grape
