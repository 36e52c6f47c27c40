#pragma once
// fox: the Forgetting Transformer's bias, a path sum of per-token log forget gates:
// b_h(m, n) = Σ_{ℓ=n+1..m} log f_h(ℓ) = F_h(m) − F_h(n) for n <= m (causal; n > m is masked, −∞).
// It depends on the content between the two positions, so translation invariance holds only when
// the content moves with the positions (content_shift_invariance), not for fixed content.
#include <boost/hana/define_struct.hpp>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "grape/check/bias_reference.hpp"
#include "grape/detail/random.hpp"
#include "grape/detail/validate.hpp"
#include "grape/encoding.hpp"
#include "grape/group/translation.hpp"
#include "grape/inject/score_bias.hpp"
#include "grape/math/gated_path_bias.hpp"

namespace grape {

struct forget_gate_bias {
  int num_heads = 0;
  std::int64_t length = 0;
  std::vector<double> prefix;  // [heads, length + 1]: F_h(ℓ) = Σ_{j<=ℓ} log f_h(j), F_h(−1) = 0

  int heads() const { return num_heads; }
  double bias(int h, const std::array<std::int64_t, 1>& m, const std::array<std::int64_t, 1>& n) const {
    return bias_with_content(h, m[0], n[0], 0);
  }
  /// The bias with the gate sequence moved so that position origin + ℓ carries gate ℓ.
  double bias_with_content(int h, std::int64_t m, std::int64_t n, std::int64_t origin) const {
    if (n > m) return -std::numeric_limits<double>::infinity();
    const std::int64_t i = m - origin, j = n - origin;
    if (j < -1 || i >= length)
      throw input_error(fmt::format("position: {} is outside the gate sequence [{}, {})", i >= length ? m : n, origin,
                                    origin + length));
    const double* F = prefix.data() + h * (length + 1) + 1;  // F[-1] == 0
    return F[i] - F[j];
  }
  // A whole tile for the fused attention (inject/offset_tile.hpp): the same float per logit as
  // bias(), the positions checked once per row and column instead of once per logit. A tile with a
  // position outside the gate sequence takes bias() logit by logit, which names it.
  void add_tile(int h, const std::int64_t* m, std::int64_t rows, const std::int64_t* n, std::int64_t cols, float* S,
                std::int64_t ld) const {
    constexpr float minus_inf = -std::numeric_limits<float>::infinity();
    bool in_range = true;
    for (std::int64_t r = 0; r < rows; ++r) in_range &= m[r] < length;
    for (std::int64_t c = 0; c < cols; ++c) in_range &= n[c] >= -1 && n[c] < length;
    const double* F = prefix.data() + h * (length + 1) + 1;
    for (std::int64_t r = 0; r < rows; ++r) {
      float* row = S + r * ld;
      const std::int64_t mr = m[r];
      if (!in_range) {
        for (std::int64_t c = 0; c < cols; ++c) row[c] += static_cast<float>(bias_with_content(h, mr, n[c], 0));
        continue;
      }
      const double Fm = mr >= -1 ? F[mr] : 0.0;  // below −1 every key is after the query
      for (std::int64_t c = 0; c < cols; ++c) row[c] += n[c] > mr ? minus_inf : static_cast<float>(Fm - F[n[c]]);
    }
  }
  // Gradient with respect to the log forget gates log f_h(ℓ), [heads, length]: a logit (m, n)
  // counts for every ℓ in (n, m], recorded as +g at n + 1 and −g at m + 1 of the head's
  // length + 1 accumulators and summed along the sequence by gradient().
  std::size_t parameter_count() const { return static_cast<std::size_t>(num_heads * length); }
  std::size_t grad_accumulator_size() const { return static_cast<std::size_t>(num_heads * (length + 1)); }
  void accumulate_grad(int h, const std::array<std::int64_t, 1>& m, const std::array<std::int64_t, 1>& n, double g,
                       double* acc) const {
    if (n[0] >= m[0]) return;  // the diagonal has an empty path; above it the logit is masked
    acc[h * (length + 1) + n[0] + 1] += g;
    acc[h * (length + 1) + m[0] + 1] -= g;
  }
  void gradient(const double* acc, double* grad) const {
    for (int h = 0; h < num_heads; ++h) {
      double running = 0;
      for (std::int64_t l = 0; l < length; ++l) grad[h * length + l] = running += acc[h * (length + 1) + l];
    }
  }
  /// The log forget gates [heads, length], the differences of the prefix sums.
  void parameters(double* out) const {
    for (int h = 0; h < num_heads; ++h)
      for (std::int64_t l = 0; l < length; ++l)
        out[h * length + l] = prefix[h * (length + 1) + l + 1] - prefix[h * (length + 1) + l];
  }
  void set_parameters(const double* log_gates) {
    for (int h = 0; h < num_heads; ++h) {
      double sum = 0;
      for (std::int64_t l = 0; l < length; ++l) prefix[h * (length + 1) + l + 1] = sum += log_gates[h * length + l];
    }
  }
};

struct fox final : encoding<translation<1>, no_representation, score_bias<forget_gate_bias>> {
  static constexpr std::string_view name = "fox";
  static constexpr std::string_view summary =
      "Forgetting Transformer: bias = sum of log forget gates between key and query (causal)";
  static constexpr law_set claims = law::group | law::content_shift_invariance | law::reference_agreement;
  static constexpr std::int64_t position_limit = 256;
  static constexpr std::string_view position_limit_reason =
      "the gate sequence random_params draws covers positions 0..511 (shifts included)";
  static constexpr bool signed_positions = false;      // gate ℓ belongs to position ℓ >= 0

  struct params {
    BOOST_HANA_DEFINE_STRUCT(params, (int, heads), (int, head_dim), (std::vector<double>, gate_logits));
  };
  static params default_params() {
    std::mt19937_64 rng(1);
    return {4, 64, detail::normal_vector(rng, 4 * 2 * position_limit, 2.0)};
  }
  static params random_params(std::mt19937_64& rng) {
    const int heads = std::uniform_int_distribution<int>(1, 4)(rng);
    return {heads, 4, detail::normal_vector(rng, heads * 2 * position_limit, 2.0)};
  }
  /// gate_logits: [heads, length] pre-sigmoid gate values z, f = σ(z).
  static instance make(const params& p) {
    detail::require_count("heads", p.heads);
    detail::require_count("head_dim", p.head_dim);
    if (p.gate_logits.empty() || p.gate_logits.size() % p.heads != 0)
      throw input_error(fmt::format("gate_logits: must hold heads x length values (got {})", p.gate_logits.size()));
    forget_gate_bias b{p.heads, static_cast<std::int64_t>(p.gate_logits.size() / p.heads), {}};
    b.prefix.resize(static_cast<std::size_t>(p.heads) * (b.length + 1));
    for (int h = 0; h < p.heads; ++h) {
      double sum = 0;
      b.prefix[h * (b.length + 1)] = 0;
      for (std::int64_t l = 0; l < b.length; ++l) {
        const double z = p.gate_logits[h * b.length + l];
        detail::require_finite_at("gate_logits", h * b.length + l, z);
        sum += math::log_sigmoid(z);
        b.prefix[h * (b.length + 1) + l + 1] = sum;
      }
    }
    return {std::move(b), p.head_dim};
  }
  static double reference_bias(const params& p, int h, std::int64_t m, std::int64_t n) {
    return reference::fox_bias(p.gate_logits, static_cast<std::int64_t>(p.gate_logits.size() / p.heads), h, m, n);
  }
};

}  // namespace grape
