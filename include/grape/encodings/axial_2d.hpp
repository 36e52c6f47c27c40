#pragma once
// axial_2d: 2-D RoPE for image patches. The first half of the planes turns with the row, the second
// half with the column, each half with its own RoPE table of d/2 channels.
#include <boost/hana/define_struct.hpp>
#include <random>
#include <vector>

#include "grape/detail/random.hpp"
#include "grape/detail/validate.hpp"
#include "grape/encoding.hpp"
#include "grape/group/translation.hpp"
#include "grape/inject/rotate_qk.hpp"
#include "grape/rep/rotation_planes.hpp"

namespace grape {

struct axial_2d final : encoding<translation<2>, rotation_planes<2>, rotate_qk<layout_kind::interleaved>> {
  static constexpr std::string_view name = "axial_2d";
  static constexpr std::string_view summary =
      "axial 2-D RoPE: half the planes follow the row, half the column";
  static constexpr law_set claims = rotary_laws;

  struct params {
    BOOST_HANA_DEFINE_STRUCT(params, (int, head_dim), (double, base));
  };
  static params default_params() { return {64, 100.0}; }
  static params random_params(std::mt19937_64& rng) {
    return {4 * detail::pick(rng, {1, 2, 4, 8}), detail::log_uniform(rng, 10.0, 1e4)};
  }
  static instance make(const params& p) {
    detail::require_positive("base", p.base);
    if (p.head_dim <= 0 || p.head_dim % 4 != 0)
      throw input_error(fmt::format("head_dim: must be a positive multiple of 4 (got {})", p.head_dim));
    const auto half = rope_inv_freq(p.head_dim / 2, p.base);
    std::vector<double> inv_freq(half);
    inv_freq.insert(inv_freq.end(), half.begin(), half.end());
    std::vector<int> axis(half.size(), 0);
    axis.insert(axis.end(), half.size(), 1);
    return {rotation_planes<2>::from_sections(inv_freq, axis), p.head_dim, 1.0};
  }
};

}  // namespace grape
