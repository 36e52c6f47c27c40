#pragma once
// rotary_table<Layout>: a rotary encoding given by its run-time table (grape::rotary_spec): what a
// model's config produces (any schedule, partial rotary, attention factor). Not a registry
// built-in; grape::check_rotary checks one.
#include <boost/hana/adapt_struct.hpp>
#include <random>

#include "grape/detail/random.hpp"
#include "grape/detail/validate.hpp"
#include "grape/encoding.hpp"
#include "grape/group/translation.hpp"
#include "grape/inject/rotate_qk.hpp"
#include "grape/rep/rotation_planes.hpp"
#include "grape/schedule/rotary_spec.hpp"

BOOST_HANA_ADAPT_STRUCT(grape::rotary_spec, head_dim, rotary_dim, layout, inv_freq, attention_factor, num_axes);

namespace grape {

template <layout_kind Layout>
struct rotary_table final : encoding<translation<1>, rotation_planes<1>, rotate_qk<Layout>> {
  using instance = typename encoding<translation<1>, rotation_planes<1>, rotate_qk<Layout>>::instance;
  using params = rotary_spec;
  static constexpr std::string_view name = Layout == layout_kind::half_split ? "rotary (half-split)" : "rotary (interleaved)";
  static constexpr std::string_view summary = "a model's rotary table: planes turn by m*inv_freq[i]";
  // The attention factor scales q and k, so norms are not preserved unless it is 1; that law is
  // then reported, not claimed.
  static constexpr law_set claims = law::group | law::homomorphism | law::relative | law::score_invariance |
                                    law::reference_agreement | law::float32_agreement;

  static params random_params(std::mt19937_64& rng) {
    rotary_spec s;
    s.head_dim = detail::pick(rng, {8, 16, 64});
    s.rotary_dim = 2 * std::uniform_int_distribution<int>(1, s.head_dim / 2)(rng);
    s.layout = Layout;
    s.inv_freq = rope_inv_freq(s.rotary_dim, detail::log_uniform(rng, 10.0, 1e6));
    s.attention_factor = detail::log_uniform(rng, 0.5, 2.0);
    return s;
  }
  static instance make(const params& s) {
    detail::require_count("head_dim", s.head_dim);
    detail::require_even("rotary_dim", s.rotary_dim);
    detail::require_at_most("rotary_dim", s.rotary_dim, "head_dim", s.head_dim);
    detail::require_positive("attention_factor", s.attention_factor);
    if (s.layout != Layout) throw input_error("layout: does not match the encoding's layout");
    if (s.num_axes != 1) throw input_error("num_axes: rotary_table takes token positions (1 axis)");
    if (static_cast<int>(s.inv_freq.size()) != s.rotary_dim / 2)
      throw input_error(fmt::format("inv_freq: must hold rotary_dim/2 = {} values (got {})", s.rotary_dim / 2, s.inv_freq.size()));
    for (std::size_t i = 0; i < s.inv_freq.size(); ++i) detail::require_finite_at("inv_freq", i, s.inv_freq[i]);
    return {rotation_planes<1>::from_inv_freq(s.inv_freq), s.head_dim, s.attention_factor};
  }
};

}  // namespace grape
