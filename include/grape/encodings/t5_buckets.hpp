#pragma once
// t5_buckets: T5's relative-position buckets (Raffel et al.): a learned table [buckets, heads]
// indexed by the bucket of n − m (one bucket per offset near 0, logarithmic up to max_distance).
// Not a GRAPE-A
// lift (the bias is not linear in the offset) but translation invariant by construction.
#include <boost/hana/define_struct.hpp>
#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "grape/check/bias_reference.hpp"
#include "grape/detail/random.hpp"
#include "grape/detail/validate.hpp"
#include "grape/encoding.hpp"
#include "grape/group/translation.hpp"
#include "grape/inject/offset_tile.hpp"
#include "grape/inject/score_bias.hpp"
#include "grape/math/bias.hpp"

namespace grape {

struct t5_bias {
  int num_heads = 0;
  int num_buckets = 0;
  int max_distance = 0;
  bool bidirectional = true;
  std::vector<double> table;  // [num_buckets, num_heads]
  int heads() const { return num_heads; }
  double bias(int h, const std::array<std::int64_t, 1>& m, const std::array<std::int64_t, 1>& n) const {
    const int b = math::t5_bucket(n[0] - m[0], bidirectional, num_buckets, max_distance);
    return table[static_cast<std::size_t>(b) * num_heads + h];
  }
  float at_offset(int h, std::int64_t offset) const {
    const int b = math::t5_bucket(offset, bidirectional, num_buckets, max_distance);
    return static_cast<float>(table[static_cast<std::size_t>(b) * num_heads + h]);
  }
  // A whole tile for the fused attention, the bucket found once per offset (offset_tile.hpp).
  void add_tile(int h, const std::int64_t* m, std::int64_t rows, const std::int64_t* n, std::int64_t cols, float* S,
                std::int64_t ld) const {
    add_offset_tile(m, rows, n, cols, S, ld, [&](std::int64_t offset) { return at_offset(h, offset); });
  }
  bool offset_values(int h, const std::int64_t* m, std::int64_t rows, const std::int64_t* n, std::int64_t cols,
                     float* values) const {
    return offset_tile_values(m, rows, n, cols, values, [&](std::int64_t offset) { return at_offset(h, offset); });
  }
  // Gradient: dL/d table[bucket, h] = Σ g over the head's logits in that bucket (table's layout).
  std::size_t parameter_count() const { return table.size(); }
  std::size_t grad_accumulator_size() const { return table.size(); }
  void accumulate_grad(int h, const std::array<std::int64_t, 1>& m, const std::array<std::int64_t, 1>& n, double g,
                       double* acc) const {
    acc[static_cast<std::size_t>(math::t5_bucket(n[0] - m[0], bidirectional, num_buckets, max_distance)) * num_heads +
        h] += g;
  }
  void gradient(const double* acc, double* grad) const { std::copy(acc, acc + table.size(), grad); }
  void parameters(double* out) const { std::copy(table.begin(), table.end(), out); }
  void set_parameters(const double* p) { std::copy_n(p, table.size(), table.begin()); }
};

struct t5_buckets final : encoding<translation<1>, no_representation, score_bias<t5_bias>> {
  static constexpr std::string_view name = "t5_buckets";
  static constexpr std::string_view summary = "T5 relative buckets: learned bias per (bucket(n-m), head)";
  static constexpr law_set claims = law::group | law::score_invariance | law::reference_agreement;

  struct params {
    BOOST_HANA_DEFINE_STRUCT(params, (int, heads), (int, head_dim), (int, num_buckets),
                             (int, max_distance), (bool, bidirectional), (std::uint64_t, seed));
  };
  static params default_params() { return {8, 64, 32, 128, true, 1}; }
  static params random_params(std::mt19937_64& rng) {
    const int buckets = detail::pick(rng, {8, 16, 32});
    return {detail::pick(rng, {1, 2, 8}), 8, buckets, buckets * detail::pick(rng, {1, 4, 16}), (rng() & 1) != 0, rng()};
  }
  static instance make(const params& p) {
    detail::require_count("heads", p.heads);
    detail::require_count("head_dim", p.head_dim);
    detail::require_count("num_buckets", p.num_buckets, p.bidirectional ? 4 : 2);
    detail::require_count("max_distance", p.max_distance, p.num_buckets);
    std::mt19937_64 rng(p.seed);
    return {{p.heads, p.num_buckets, p.max_distance, p.bidirectional,
             detail::normal_vector(rng, p.num_buckets * p.heads)},
            p.head_dim};
  }
  static double reference_bias(const params& p, int h, std::int64_t m, std::int64_t n) {
    const auto inst = make(p);
    const int b = reference::t5_bucket(n - m, p.bidirectional, p.num_buckets, p.max_distance);
    return inst.bias.table[static_cast<std::size_t>(b) * p.heads + h];
  }
};

}  // namespace grape
