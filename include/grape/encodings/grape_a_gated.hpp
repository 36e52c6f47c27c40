#pragma once
// grape_a_key_gated, grape_a_qk_gated: the GRAPE paper's content-gated linear biases,
//   b_h(m, n) = −(m − n)·ω_h·g_k(n)              (key-gated)
//   b_h(m, n) = −(m − n)·ω_h·(g_q(m) + g_k(n))   (query+key-gated)
// for n <= m (causal; n > m is masked, −∞), with ω_h = softplus(ω̃_h)·slope_h (ALiBi's slope) and
// per-token gates g = softplus(z) of logits z = uᵀk/√d (vᵀq/√d) the model computes from content.
// The gates travel with their tokens: translation invariance holds when the content moves with
// the positions (content_shift_invariance), not for fixed content.
#include <boost/hana/define_struct.hpp>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <vector>

#include "grape/check/causal_bias_laws.hpp"
#include "grape/check/gated_path_reference.hpp"
#include "grape/detail/random.hpp"
#include "grape/detail/validate.hpp"
#include "grape/encoding.hpp"
#include "grape/encodings/alibi.hpp"
#include "grape/group/translation.hpp"
#include "grape/inject/offset_tile.hpp"
#include "grape/inject/score_bias.hpp"
#include "grape/math/gated_path_bias.hpp"

namespace grape {

struct gated_linear_bias {
  int num_heads = 0;
  std::int64_t length = 0;
  std::vector<double> omega;       // [heads]: softplus(ω̃_h)·slope_h
  std::vector<double> key_gate;    // [heads, length]: softplus(z_k)
  std::vector<double> query_gate;  // [heads, length], or empty (key-gated)

  int heads() const { return num_heads; }
  double bias(int h, const std::array<std::int64_t, 1>& m, const std::array<std::int64_t, 1>& n) const {
    return bias_with_content(h, m[0], n[0], 0);
  }
  /// The bias with the gate sequence moved so that position origin + ℓ carries gate ℓ.
  double bias_with_content(int h, std::int64_t m, std::int64_t n, std::int64_t origin) const {
    if (n > m) return -std::numeric_limits<double>::infinity();
    const std::int64_t i = m - origin, j = n - origin;
    if (j < 0 || i >= length)
      throw input_error(fmt::format("position: ({}, {}) is outside the gate sequence [{}, {})", m, n, origin, origin + length));
    double rate = key_gate[h * length + j];
    if (!query_gate.empty()) rate += query_gate[h * length + i];
    return math::gated_linear_value(m - n, omega[h], rate);
  }

  /// The tile of queries m[0..rows) × keys n[0..cols) added to S (row r at S + r·ld), equal to
  /// bias() element by element as float (TileBias: the fused attention asks for whole tiles): the
  /// positions checked once per row and column, −∞ above the diagonal (a key-gated bias adds a
  /// query gate of 0, exactly). A tile that reaches outside the gate sequence goes logit by logit,
  /// so it throws as bias() does.
  void add_tile(int h, const std::int64_t* m, std::int64_t rows, const std::int64_t* n, std::int64_t cols, float* S,
                std::int64_t ld) const {
    constexpr float minus_inf = -std::numeric_limits<float>::infinity();
    if (rows <= 0 || cols <= 0) return;
    bool in_range = true;
    for (std::int64_t r = 0; r < rows; ++r) in_range &= m[r] >= 0 && m[r] < length;
    for (std::int64_t c = 0; c < cols; ++c) in_range &= n[c] >= 0 && n[c] < length;
    if (!in_range) {
      for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t c = 0; c < cols; ++c) S[r * ld + c] += static_cast<float>(bias_with_content(h, m[r], n[c], 0));
      return;
    }
    const double* key = key_gate.data() + h * length;
    const double w = omega[h];
    // Keys at consecutive positions (a tile of one sequence, the usual case): the gates are one
    // contiguous run and the distance falls by one a column, so the row vectorizes; the values are
    // gated_linear_value's, operation for operation.
    const bool consecutive = consecutive_positions(n, cols);
    for (std::int64_t r = 0; r < rows; ++r) {
      float* row = S + r * ld;
      const std::int64_t mr = m[r];
      const double query = query_gate.empty() ? 0.0 : query_gate[h * length + mr];
      if (consecutive) {  // the columns up to the diagonal, then the masked ones: no test per logit
        const double* gate = key + n[0];
        const std::int64_t diagonal = mr - n[0];  // the column at distance 0
        const std::int64_t seen = std::clamp<std::int64_t>(diagonal + 1, 0, cols);
        for (std::int64_t c = 0; c < seen; ++c)
          row[c] += static_cast<float>(-static_cast<double>(diagonal - c) * w * (gate[c] + query));
        for (std::int64_t c = seen; c < cols; ++c) row[c] += minus_inf;
      } else {
        for (std::int64_t c = 0; c < cols; ++c)
          row[c] += n[c] > mr ? minus_inf
                              : static_cast<float>(math::gated_linear_value(mr - n[c], w, key[n[c]] + query));
      }
    }
  }

  // Gradient with respect to the values the bias holds (BiasWithGradient, for the fused
  // attention's backward), as FoX's is with respect to its log forget gates: [heads] ω_h, then
  // [heads, length] key gates g_k, then (query+key-gated) [heads, length] query gates g_q; the
  // chain through softplus and the slopes to the logits is the caller's (its autograd).
  std::size_t parameter_count() const {
    return static_cast<std::size_t>(num_heads) * (1 + length * (query_gate.empty() ? 1 : 2));
  }
  std::size_t grad_accumulator_size() const { return parameter_count(); }
  void accumulate_grad(int h, const std::array<std::int64_t, 1>& m, const std::array<std::int64_t, 1>& n, double g,
                       double* acc) const {
    if (n[0] >= m[0]) return;  // the diagonal's bias is 0 whatever the gates; above it the logit is masked
    const double distance = -static_cast<double>(m[0] - n[0]);  // ∂b/∂(ω·rate)
    double rate = key_gate[h * length + n[0]];
    if (!query_gate.empty()) {
      rate += query_gate[h * length + m[0]];
      acc[num_heads * (1 + length) + h * length + m[0]] += g * distance * omega[h];
    }
    acc[h] += g * distance * rate;
    acc[num_heads + h * length + n[0]] += g * distance * omega[h];
  }
  /// accumulate_grad over a whole tile (queries m[0..rows) × keys n[0..cols), g at dS[r·ld + c]),
  /// each key's gate gradient summed over the tile's rows first. A masked logit's g is 0, and the
  /// diagonal's distance is 0, so no test per logit is needed.
  void accumulate_tile_grad(int h, const std::int64_t* m, std::int64_t rows, const std::int64_t* n, std::int64_t cols,
                            const float* dS, std::int64_t ld, double* acc) const {
    const double w = omega[h];
    double d_omega = 0;
    // Σ_r g·∂b/∂(ω·rate) = Σ_r g·(n − m) per column, over the rows in order: row by row across a
    // chunk of columns, so the inner loop runs along dS's rows.
    constexpr std::int64_t chunk = 64;
    double column[chunk], key_position[chunk];
    for (std::int64_t c0 = 0; c0 < cols; c0 += chunk) {
      const std::int64_t width = std::min(chunk, cols - c0);
      for (std::int64_t c = 0; c < width; ++c) column[c] = 0, key_position[c] = static_cast<double>(n[c0 + c]);
      for (std::int64_t r = 0; r < rows; ++r) {
        const float* g = dS + r * ld + c0;
        const double query_position = static_cast<double>(m[r]);
        for (std::int64_t c = 0; c < width; ++c) column[c] += g[c] * (key_position[c] - query_position);
      }
      for (std::int64_t c = 0; c < width; ++c) {
        acc[num_heads + h * length + n[c0 + c]] += column[c] * w;
        d_omega += column[c] * key_gate[h * length + n[c0 + c]];
      }
    }
    if (!query_gate.empty())
      for (std::int64_t r = 0; r < rows; ++r) {
        double row = 0;
        for (std::int64_t c = 0; c < cols; ++c) row += dS[r * ld + c] * static_cast<double>(n[c] - m[r]);
        acc[num_heads * (1 + length) + h * length + m[r]] += row * w;
        d_omega += row * query_gate[h * length + m[r]];
      }
    acc[h] += d_omega;
  }
  void gradient(const double* acc, double* grad) const { std::copy_n(acc, parameter_count(), grad); }
  void parameters(double* out) const {
    out = std::copy(omega.begin(), omega.end(), out);
    out = std::copy(key_gate.begin(), key_gate.end(), out);
    std::copy(query_gate.begin(), query_gate.end(), out);
  }
  void set_parameters(const double* p) {
    for (auto* values : {&omega, &key_gate, &query_gate}) {
      std::copy_n(p, values->size(), values->begin());
      p += values->size();
    }
  }
};

namespace detail {

/// softplus(x) = log(1 + eˣ), without overflow for large x.
inline double softplus(double x) { return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x)); }

/// ω̃ whose softplus is 1: the reference's initial value.
inline double unit_softplus_logit() { return std::log(std::expm1(1.0)); }

/// softplus of each logit, validated: [heads, length] with the length the first one set.
inline std::vector<double> gate_values(std::string_view field, const std::vector<double>& logits, int heads,
                                       std::int64_t& length) {
  if (logits.empty() || logits.size() % heads != 0 || (length && static_cast<std::int64_t>(logits.size()) != heads * length))
    throw input_error(fmt::format("{}: must hold heads x length values (got {})", field, logits.size()));
  length = static_cast<std::int64_t>(logits.size()) / heads;
  std::vector<double> g(logits.size());
  for (std::size_t k = 0; k < logits.size(); ++k) {
    require_finite_at(field, k, logits[k]);
    g[k] = softplus(logits[k]);
  }
  return g;
}

inline gated_linear_bias make_gated_linear_bias(int heads, const std::vector<double>& omega_logits,
                                                const std::vector<double>& key_gate_logits,
                                                const std::vector<double>* query_gate_logits) {
  require_count("heads", heads);
  if (!omega_logits.empty() && static_cast<int>(omega_logits.size()) != heads)
    throw input_error(fmt::format("omega_logits: must hold heads = {} values or none (got {})", heads, omega_logits.size()));
  gated_linear_bias b{heads, 0, alibi_slopes(heads), {}, {}};
  for (int h = 0; h < heads; ++h) {
    const double w = omega_logits.empty() ? unit_softplus_logit() : omega_logits[h];
    require_finite_at("omega_logits", h, w);
    b.omega[h] *= softplus(w);
  }
  b.key_gate = gate_values("key_gate_logits", key_gate_logits, heads, b.length);
  if (query_gate_logits) b.query_gate = gate_values("query_gate_logits", *query_gate_logits, heads, b.length);
  return b;
}

/// What both gated encodings share: the causal, content-dependent bias over a gate sequence.
struct gated_grape_a : encoding<translation<1>, no_representation, score_bias<gated_linear_bias>> {
  static constexpr law_set claims = law::group | law::content_shift_invariance | law::reference_agreement;
  using extra_laws = law_list<causal_mask_law, nonpositive_bias_law>;
  static constexpr std::int64_t position_limit = 256;
  static constexpr std::string_view position_limit_reason =
      "the gate sequence random_params draws covers positions 0..511 (shifts included)";
  static constexpr bool signed_positions = false;  // gate ℓ belongs to token ℓ >= 0
};

}  // namespace detail

struct grape_a_key_gated final : detail::gated_grape_a {
  static constexpr std::string_view name = "grape_a_key_gated";
  static constexpr std::string_view summary =
      "GRAPE-A key-gated: bias -(m-n)*softplus(w_h)*slope_h*softplus(z_k(n)), per-token key gates (causal)";

  struct params {
    /// omega_logits: [heads] ω̃ (empty: softplus(ω̃) = 1, the reference's init);
    /// key_gate_logits: [heads, length] z_k = uᵀk/√d per token.
    BOOST_HANA_DEFINE_STRUCT(params, (int, heads), (int, head_dim), (std::vector<double>, omega_logits),
                             (std::vector<double>, key_gate_logits));
  };
  static params default_params() {
    std::mt19937_64 rng(1);
    return {8, 64, {}, detail::normal_vector(rng, 8 * 2 * position_limit)};
  }
  static params random_params(std::mt19937_64& rng) {
    const int heads = std::uniform_int_distribution<int>(1, 8)(rng);
    return {heads, 4, detail::normal_vector(rng, heads), detail::normal_vector(rng, heads * 2 * position_limit, 2.0)};
  }
  static instance make(const params& p) {
    detail::require_count("head_dim", p.head_dim);
    return {detail::make_gated_linear_bias(p.heads, p.omega_logits, p.key_gate_logits, nullptr), p.head_dim};
  }
  static double reference_bias(const params& p, int h, std::int64_t m, std::int64_t n) {
    const std::int64_t length = static_cast<std::int64_t>(p.key_gate_logits.size()) / p.heads;
    const double w = p.omega_logits.empty() ? std::log(std::exp(1.0) - 1.0) : p.omega_logits[h];
    return reference::grape_a_gated_bias(reference::alibi_slopes(p.heads)[h], w, p.key_gate_logits[h * length + n],
                                         std::nullopt, m, n);
  }
};

struct grape_a_qk_gated final : detail::gated_grape_a {
  static constexpr std::string_view name = "grape_a_qk_gated";
  static constexpr std::string_view summary =
      "GRAPE-A query+key-gated: bias -(m-n)*softplus(w_h)*slope_h*(softplus(z_q(m)) + softplus(z_k(n))) (causal)";

  struct params {
    /// As grape_a_key_gated, plus query_gate_logits: [heads, length] z_q = vᵀq/√d per token.
    BOOST_HANA_DEFINE_STRUCT(params, (int, heads), (int, head_dim), (std::vector<double>, omega_logits),
                             (std::vector<double>, key_gate_logits), (std::vector<double>, query_gate_logits));
  };
  static params default_params() {
    std::mt19937_64 rng(1);
    auto k = detail::normal_vector(rng, 8 * 2 * position_limit);
    return {8, 64, {}, std::move(k), detail::normal_vector(rng, 8 * 2 * position_limit)};
  }
  static params random_params(std::mt19937_64& rng) {
    const int heads = std::uniform_int_distribution<int>(1, 8)(rng);
    auto w = detail::normal_vector(rng, heads);
    auto k = detail::normal_vector(rng, heads * 2 * position_limit, 2.0);
    return {heads, 4, std::move(w), std::move(k), detail::normal_vector(rng, heads * 2 * position_limit, 2.0)};
  }
  static instance make(const params& p) {
    detail::require_count("head_dim", p.head_dim);
    return {detail::make_gated_linear_bias(p.heads, p.omega_logits, p.key_gate_logits, &p.query_gate_logits),
            p.head_dim};
  }
  static double reference_bias(const params& p, int h, std::int64_t m, std::int64_t n) {
    const std::int64_t length = static_cast<std::int64_t>(p.key_gate_logits.size()) / p.heads;
    const double w = p.omega_logits.empty() ? std::log(std::exp(1.0) - 1.0) : p.omega_logits[h];
    return reference::grape_a_gated_bias(reference::alibi_slopes(p.heads)[h], w, p.key_gate_logits[h * length + n],
                                         p.query_gate_logits[h * length + m], m, n);
  }
};

}  // namespace grape
