#pragma once
// rope: rotary position embedding (Su et al.), plane i turns by m·θ_i, θ_i = base^(-2i/d), in the
// half-split layout (Llama, Mistral, Qwen, GPT-NeoX); rope_interleaved pairs (2i, 2i+1) (GPT-J,
// RoFormer). A model's schedule (YaRN, llama3, ...) is a different inv_freq table: make_rotary.
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

struct rope_params {
  BOOST_HANA_DEFINE_STRUCT(rope_params, (int, head_dim), (int, rotary_dim), (double, base),
                           (double, attention_factor));
};

template <layout_kind Layout>
struct rope_family : encoding<translation<1>, rotation_planes<1>, rotate_qk<Layout>> {
  using base_type = encoding<translation<1>, rotation_planes<1>, rotate_qk<Layout>>;
  using instance = typename base_type::instance;
  using params = rope_params;
  static constexpr law_set claims = rotary_laws;

  static params default_params() { return {128, 128, 10000.0, 1.0}; }
  static params random_params(std::mt19937_64& rng) {
    const int head_dim = detail::pick(rng, {4, 8, 16, 32, 64});
    const int rotary_dim = 2 * std::uniform_int_distribution<int>(1, head_dim / 2)(rng);
    return {head_dim, rotary_dim, detail::log_uniform(rng, 10.0, 1e6), 1.0};
  }
  static instance make(const params& p) {
    detail::require_count("head_dim", p.head_dim);
    detail::require_even("rotary_dim", p.rotary_dim);
    detail::require_at_most("rotary_dim", p.rotary_dim, "head_dim", p.head_dim);
    detail::require_positive("base", p.base);
    detail::require_positive("attention_factor", p.attention_factor);
    return {rotation_planes<1>::from_inv_freq(rope_inv_freq(p.rotary_dim, p.base)), p.head_dim,
            p.attention_factor};
  }
};

struct rope final : rope_family<layout_kind::half_split> {
  static constexpr std::string_view name = "rope";
  static constexpr std::string_view summary =
      "RoPE, half-split layout: plane i = channels (i, i+d/2) turns by m*base^(-2i/d)";
};

struct rope_interleaved final : rope_family<layout_kind::interleaved> {
  static constexpr std::string_view name = "rope_interleaved";
  static constexpr std::string_view summary =
      "RoPE, interleaved layout (GPT-J, RoFormer): plane i = channels (2i, 2i+1)";
};

}  // namespace grape
