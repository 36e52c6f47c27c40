#pragma once
// learned_absolute: a trained table T[m] added to the input (BERT, GPT-2). No group structure:
// neither the score law nor shift-linearity holds, and the checker shows why.
#include <boost/hana/define_struct.hpp>
#include <cstdint>
#include <random>
#include <vector>

#include "grape/detail/random.hpp"
#include "grape/detail/validate.hpp"
#include "grape/encoding.hpp"
#include "grape/group/translation.hpp"
#include "grape/inject/add_embedding.hpp"

namespace grape {

struct learned_table {
  int width = 0;
  std::int64_t rows = 0;
  std::vector<double> values;  // rows × width
  int dim() const { return width; }
  void embed(const std::array<std::int64_t, 1>& c, double* out) const {
    if (c[0] < 0 || c[0] >= rows)
      throw input_error(fmt::format("position: {} is outside the learned table [0, {})", c[0], rows));
    for (int i = 0; i < width; ++i) out[i] = values[c[0] * width + i];
  }
};

struct learned_absolute final : encoding<translation<1>, no_representation, add_embedding<learned_table>> {
  static constexpr std::string_view name = "learned_absolute";
  static constexpr std::string_view summary = "learned absolute position table added to the input";
  static constexpr law_set claims = law::group;
  static constexpr std::int64_t position_limit = 1024;
  static constexpr std::string_view position_limit_reason =
      "the table random_params draws has 2048 rows (shifts included)";
  static constexpr bool signed_positions = false;       // row p is position p >= 0

  struct params {
    BOOST_HANA_DEFINE_STRUCT(params, (int, dim), (std::uint64_t, seed));
  };
  static params default_params() { return {16, 1}; }
  static params random_params(std::mt19937_64& rng) { return {detail::pick(rng, {4, 8, 16}), rng()}; }
  static instance make(const params& p) {
    detail::require_count("dim", p.dim);
    std::mt19937_64 rng(p.seed);
    return {{p.dim, 2 * position_limit, detail::normal_vector(rng, static_cast<int>(2 * position_limit * p.dim), 0.5)}};
  }
};

}  // namespace grape
