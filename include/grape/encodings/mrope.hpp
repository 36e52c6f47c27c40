#pragma once
// mrope: multimodal RoPE (Qwen2-VL). Positions are (t, h, w); the d/2 planes are split into three
// sections, each turning with one axis's position, all sharing the θ_i table. Commuting
// rotations, so the relative law holds exactly for offsets in Z^3.
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

struct mrope final : encoding<translation<3>, rotation_planes<3>, rotate_qk<layout_kind::half_split>> {
  static constexpr std::string_view name = "mrope";
  static constexpr std::string_view summary =
      "M-RoPE (Qwen2-VL): planes split into (t, h, w) sections, e.g. 16/24/24 of 64";
  static constexpr law_set claims = rotary_laws;

  struct params {
    BOOST_HANA_DEFINE_STRUCT(params, (int, head_dim), (double, base), (std::vector<int>, sections));
  };
  static params default_params() { return {128, 1000000.0, {16, 24, 24}}; }
  static params random_params(std::mt19937_64& rng) {
    std::uniform_int_distribution<int> s(1, 4);
    std::vector<int> sections = {s(rng), s(rng), s(rng)};
    const int planes = sections[0] + sections[1] + sections[2];
    return {2 * planes, detail::log_uniform(rng, 10.0, 1e6), sections};
  }
  static instance make(const params& p) {
    detail::require_even("head_dim", p.head_dim);
    detail::require_positive("base", p.base);
    if (p.sections.size() != 3) throw input_error("sections: must list 3 plane counts (t, h, w)");
    std::vector<int> axis;
    for (int k = 0; k < 3; ++k) {
      detail::require_count("sections", p.sections[k], 0);
      axis.insert(axis.end(), p.sections[k], k);
    }
    if (2 * static_cast<int>(axis.size()) != p.head_dim)
      throw input_error(fmt::format("sections: must add up to head_dim/2 = {} planes (got {})",
                                    p.head_dim / 2, axis.size()));
    return {rotation_planes<3>::from_sections(rope_inv_freq(p.head_dim, p.base), axis), p.head_dim, 1.0};
  }
};

}  // namespace grape
