#pragma once
// grape_ap_relative: the GRAPE paper's path-integral bias (GRAPE-AP v1) with both sides rotated,
//   b_h(m, n) = Σ_{ℓ=n+1..m} slope_h·log σ(⟨R(m)p_m, R(ℓ)p̂_ℓ⟩/P) = Σ slope_h·log σ(⟨p_m, R(ℓ − m)p̂_ℓ⟩/P)
// for n <= m (causal; n > m is masked, −∞): p is a per-token projection [heads, length, P],
// p̂ = p/√(mean(p²) + eps), R(φ) the authors' half-split rotation by φ radians on every plane (their
// rotary with base 1) and slope_h ALiBi's. Each term depends on the content and on ℓ − m only, so
// the bias is translation invariant when the content moves with the positions. The authors' code
// rotates only p̂_ℓ, by its absolute index ℓ; that transcription (examples/grape_ap_reference.hpp)
// fails the law, with the counterexample in docs/grape-paper.md.
// Memory is O(T·P): the terms are summed on demand, never held as a T×T matrix.
#include <boost/hana/define_struct.hpp>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
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
#include "grape/math/log_sigmoid_packets.hpp"

namespace grape {

/// The path-integral bias's data and its term; the phase of each term is the caller's choice
/// (ℓ − m here; the reference's ℓ in the example).
struct path_integral_bias {
  int num_heads = 0;
  std::int64_t length = 0;
  int dim = 0;                  // P, even
  std::vector<double> slopes;   // [heads]
  std::vector<double> rows;     // [heads, length, P]: p, the row side, as given
  std::vector<double> keys;     // [heads, length, P]: p̂, RMS-normalised
  std::vector<double> offset_cos, offset_sin;  // [length]: cos and sin of φ = ℓ − m = −d, d = m − ℓ
  double norm_eps = 0;                         // the RMS normalisation's eps

  int heads() const { return num_heads; }
  double bias(int h, const std::array<std::int64_t, 1>& m, const std::array<std::int64_t, 1>& n) const {
    return bias_with_content(h, m[0], n[0], 0);
  }
  /// The bias with the content moved so that position origin + ℓ carries token ℓ.
  double bias_with_content(int h, std::int64_t m, std::int64_t n, std::int64_t origin) const {
    if (n > m) return -std::numeric_limits<double>::infinity();
    require_in_sequence(m, n, origin);
    double sum = 0;
    for (std::int64_t l = n + 1; l <= m; ++l) sum += term_at_offset(h, m - origin, l - origin);
    return sum;
  }
  /// A whole tile for the fused attention (inject/offset_tile.hpp). With consecutive keys inside
  /// the sequence, each row is one suffix sum from its query down to the tile's first key — the
  /// path sum of every logit of the row in O(m − n₀) terms, not O((m − n₀)·cols) — equal to
  /// bias() up to the order of the float64 sum and a few ulps per term (terms_of_row); otherwise
  /// logit by logit through bias().
  void add_tile(int h, const std::int64_t* m, std::int64_t rows, const std::int64_t* n, std::int64_t cols, float* S,
                std::int64_t ld) const {
    bool suffix_sums = cols > 0 && n[0] >= 0 && n[0] + cols <= length && consecutive_positions(n, cols);
    for (std::int64_t r = 0; r < rows; ++r) suffix_sums &= m[r] < length;
    for (std::int64_t r = 0; r < rows; ++r) {
      float* row = S + r * ld;
      const std::int64_t i = m[r];
      if (!suffix_sums) {
        for (std::int64_t c = 0; c < cols; ++c) row[c] += static_cast<float>(bias_with_content(h, i, n[c], 0));
        continue;
      }
      const std::int64_t n0 = n[0], n_end = n0 + cols;
      for (std::int64_t j = n0 > i + 1 ? n0 : i + 1; j < n_end; ++j)
        row[j - n0] += -std::numeric_limits<float>::infinity();  // keys after the query
      if (n0 > i) continue;
      const Eigen::ArrayXd& t = terms_of_row(h, i, n0 + 1);  // t[ℓ − n0 − 1], ℓ = n0 + 1 .. i
      double sum = 0;  // Σ_{j<ℓ≤i} term(ℓ) for the current j
      for (std::int64_t j = i; j >= n0; --j) {
        if (j < i) sum += t[j - n0];
        if (j < n_end) row[j - n0] += static_cast<float>(sum);
      }
    }
  }
  // dL/dp inside the fused backward (BiasWithRowGradient): a term's gradient needs every key
  // before it on the row, dL/dt(m, ℓ) = Σ_{n<ℓ} dL/db(m, n), so the kernel hands over whole rows.
  // Accumulators: dL/dp on the row side, then dL/dp̂ on the key side, each [heads, length, P].
  std::size_t parameter_count() const { return static_cast<std::size_t>(num_heads * length * dim); }
  std::size_t grad_accumulator_size() const { return 2 * parameter_count(); }
  /// Row m (a position) of head h: keys at positions n[c] with logit gradients ds[c] (0 where masked).
  void accumulate_row_grad(int h, std::int64_t m, const std::int64_t* n, const float* ds, std::int64_t count,
                           double* acc) const {
    thread_local std::vector<double> at_position;  // Σ ds of the keys at each position 0..m
    at_position.assign(static_cast<std::size_t>(m + 1), 0.0);
    for (std::int64_t c = 0; c < count; ++c)
      if (ds[c] != 0.0f && n[c] >= 0 && n[c] <= m) at_position[n[c]] += ds[c];
    double dt = 0;
    for (std::int64_t l = 1; l <= m; ++l) {
      dt += at_position[l - 1];
      add_term_grad(h, m, l, dt, acc, acc + parameter_count());
    }
  }
  /// dL/dp [heads, length, P] from the summed accumulators: the row side plus the RMS
  /// normalisation's backward of the key side.
  void gradient(const double* acc, double* out) const {
    for (std::int64_t t = 0; t < num_heads * length; ++t)
      normalisation_grad(t, acc + t * dim, acc + parameter_count() + t * dim, out + t * dim);
  }
  /// The projections p [heads, length, P] as given (the gradient's layout), and set from others
  /// (BiasWithParameters): p̂ follows, the slopes and phases stay.
  void parameters(double* out) const { std::copy(rows.begin(), rows.end(), out); }
  void set_parameters(const double* p);
  /// Adds dt·dt(m, ℓ)/dp_m into d_rows and dt·dt(m, ℓ)/dp̂_ℓ into d_keys (both [heads, length, P]):
  /// dt/dz = s_h·σ(−z), dz/dp_m = R(ℓ − m)p̂_ℓ/P, dz/dp̂_ℓ = R(ℓ − m)ᵀp_m/P.
  void add_term_grad(int h, std::int64_t m, std::int64_t l, double dt, double* d_rows, double* d_keys) const {
    if (dt == 0) return;
    const int half = dim / 2;
    const double* x = rows.data() + (h * length + m) * dim;
    const double* y = keys.data() + (h * length + l) * dim;
    const double c = offset_cos[m - l], s = offset_sin[m - l];  // of φ = ℓ − m
    double dot = 0;  // the authors' sign, as term(): R(φ)y = (y1 c + y2 s, −y1 s + y2 c)
    for (int k = 0; k < half; ++k)
      dot += x[k] * (y[k] * c + y[k + half] * s) + x[k + half] * (-y[k] * s + y[k + half] * c);
    const double dz = dt * slopes[h] / (1.0 + std::exp(dot / dim)) / dim;  // σ(−z) = 1/(1 + e^z)
    double* dx = d_rows + (h * length + m) * dim;
    double* dy = d_keys + (h * length + l) * dim;
    for (int k = 0; k < half; ++k) {
      dx[k] += dz * (y[k] * c + y[k + half] * s);
      dx[k + half] += dz * (-y[k] * s + y[k + half] * c);
      dy[k] += dz * (x[k] * c - x[k + half] * s);  // R(φ)ᵀx
      dy[k + half] += dz * (x[k] * s + x[k + half] * c);
    }
  }
  /// dL/dp of token row t (head·length + token): d_row + the backward of p̂ = p·r,
  /// r = (mean(p²) + eps)^(−1/2), for g = dL/dp̂: r·g − r³·(p·g)/P·p.
  void normalisation_grad(std::int64_t t, const double* d_row, const double* d_key, double* out) const {
    const double* p = rows.data() + t * dim;
    double mean_square = 0, pg = 0;
    for (int k = 0; k < dim; ++k) mean_square += p[k] * p[k], pg += p[k] * d_key[k];
    const double r = 1.0 / std::sqrt(mean_square / dim + norm_eps);
    for (int k = 0; k < dim; ++k) out[k] = d_row[k] + r * d_key[k] - r * r * r * pg / dim * p[k];
  }
  /// The rows of a block of queries at positions m[0..rows) for the fused forward, which visits
  /// every key tile of the block in turn: each row's suffix sums Σ_{n<ℓ≤m} t(m, ℓ) for every n ≤ m,
  /// computed once (O(m·P) terms, m + 1 doubles) in the order add_tile sums them, then read per key
  /// position — instead of O(m − n₀) terms per tile.
  struct row_block {
    const path_integral_bias* bias = nullptr;
    std::vector<std::vector<double>> suffix;  // [rows][n], n = 0..m
    void add_tile(std::int64_t r0, std::int64_t rows, const std::int64_t* n, std::int64_t cols, float* S,
                  std::int64_t ld) const {
      for (std::int64_t r = 0; r < rows; ++r) {
        const std::vector<double>& row = suffix[r0 + r];
        const std::int64_t m = static_cast<std::int64_t>(row.size()) - 1;
        for (std::int64_t c = 0; c < cols; ++c) {
          if (n[c] > m) {
            S[r * ld + c] += -std::numeric_limits<float>::infinity();
            continue;
          }
          bias->require_in_sequence(m, n[c], 0);
          S[r * ld + c] += static_cast<float>(row[n[c]]);
        }
      }
    }
  };
  row_block rows_at(int h, const std::int64_t* m, std::int64_t rows) const {
    row_block b{this, std::vector<std::vector<double>>(static_cast<std::size_t>(rows))};
    for (std::int64_t r = 0; r < rows; ++r) {
      if (m[r] < 0) throw input_error(fmt::format("position: {} is outside the token sequence [0, {})", m[r], length));
      require_in_sequence(m[r], 0, 0);
      std::vector<double>& row = b.suffix[r];
      row.assign(static_cast<std::size_t>(m[r] + 1), 0.0);  // m[r] >= 0: checked above
      const Eigen::ArrayXd& t = terms_of_row(h, m[r], 1);  // t[ℓ − 1], ℓ = 1 .. m
      double sum = 0;
      for (std::int64_t j = m[r] - 1; j >= 0; --j) row[j] = sum += t[j];
    }
    return b;
  }
  void require_in_sequence(std::int64_t m, std::int64_t n, std::int64_t origin) const {
    if (n < origin || m >= origin + length)
      throw input_error(fmt::format("position: ({}, {}) is outside the token sequence [{}, {})", m, n, origin, origin + length));
  }
  /// slope_h·log σ(⟨p_i, R(φ)p̂_ℓ⟩/P) for the tokens i (row) and ℓ (key) of the sequence.
  double term(int h, std::int64_t i, std::int64_t l, double phi) const {
    return math::path_integral_term(rows.data() + (h * length + i) * dim, keys.data() + (h * length + l) * dim, dim,
                                    std::cos(phi), std::sin(phi), slopes[h]);
  }
  /// The same at this type's phase φ = ℓ − i (ℓ <= i), its cos and sin from the offset tables.
  double term_at_offset(int h, std::int64_t i, std::int64_t l) const {
    return math::path_integral_term(rows.data() + (h * length + i) * dim, keys.data() + (h * length + l) * dim, dim,
                                    offset_cos[i - l], offset_sin[i - l], slopes[h]);
  }
  /// term_at_offset(h, i, ℓ) for ℓ = first .. i, as an array from ℓ = first, with log σ on Eigen's
  /// packets (math/log_sigmoid_packets.hpp: the tile paths' terms; bias() keeps the scalar form,
  /// equal to a few ulps). The array is the calling thread's, valid until its next call.
  const Eigen::ArrayXd& terms_of_row(int h, std::int64_t i, std::int64_t first) const {
    thread_local Eigen::ArrayXd t;
    t.resize(i - first + 1);
    const double* x = rows.data() + (h * length + i) * dim;
    for (std::int64_t l = first; l <= i; ++l)
      t[l - first] = math::path_integral_argument(x, keys.data() + (h * length + l) * dim, dim, offset_cos[i - l],
                                                  offset_sin[i - l]);
    math::log_sigmoid_in_place(t, slopes[h]);
    return t;
  }
};

namespace detail {

/// p as given on the row side, p̂ = p/√(mean(p²) + eps) on the key side; validated.
inline path_integral_bias make_path_integral_bias(int heads, int p_dim, double norm_eps,
                                                  const std::vector<double>& projections) {
  require_count("heads", heads);
  require_even("p_dim", p_dim);
  require_finite("norm_eps", norm_eps);
  if (norm_eps < 0) throw input_error(fmt::format("norm_eps: must be >= 0 (got {})", norm_eps));
  const std::size_t per_token = static_cast<std::size_t>(heads) * p_dim;
  if (projections.empty() || projections.size() % per_token != 0)
    throw input_error(fmt::format("projections: must hold heads x length x p_dim values (got {})", projections.size()));
  path_integral_bias b{heads, static_cast<std::int64_t>(projections.size() / per_token), p_dim,
                       alibi_slopes(heads), projections, projections, {}, {}, norm_eps};
  b.offset_cos.resize(static_cast<std::size_t>(b.length));
  b.offset_sin.resize(static_cast<std::size_t>(b.length));
  for (std::int64_t d = 0; d < b.length; ++d) {
    b.offset_cos[d] = std::cos(static_cast<double>(-d));
    b.offset_sin[d] = std::sin(static_cast<double>(-d));
  }
  for (std::size_t t = 0; t < projections.size(); t += p_dim) {
    double mean_square = 0;
    for (int k = 0; k < p_dim; ++k) {
      require_finite_at("projections", t + k, projections[t + k]);
      mean_square += projections[t + k] * projections[t + k];
    }
    const double scale = 1.0 / std::sqrt(mean_square / p_dim + norm_eps);
    if (!std::isfinite(scale))
      throw input_error(fmt::format("projections: token {} is zero and norm_eps is 0", t / p_dim));
    for (int k = 0; k < p_dim; ++k) b.keys[t + k] *= scale;
  }
  return b;
}

}  // namespace detail

inline void path_integral_bias::set_parameters(const double* p) {
  const path_integral_bias b =
      detail::make_path_integral_bias(num_heads, dim, norm_eps, std::vector<double>(p, p + rows.size()));
  rows = b.rows;
  keys = b.keys;
}

struct grape_ap_relative final : encoding<translation<1>, no_representation, score_bias<path_integral_bias>> {
  static constexpr std::string_view name = "grape_ap_relative";
  static constexpr std::string_view summary =
      "GRAPE-AP path integral, both sides rotated: sum_{n<l<=m} slope_h*log sigmoid(<p_m, R(l-m) p^_l>/P) (causal)";
  static constexpr law_set claims = law::group | law::content_shift_invariance | law::reference_agreement;
  using extra_laws = law_list<causal_mask_law, nonpositive_bias_law, monotone_path_law>;
  static constexpr std::int64_t position_limit = 256;
  static constexpr std::string_view position_limit_reason =
      "the token sequence random_params draws covers positions 0..511 (shifts included)";
  static constexpr bool signed_positions = false;  // token ℓ sits at position ℓ >= 0

  struct params {
    /// projections: [heads, length, p_dim] p per token; norm_eps: the RMS normalisation's eps.
    BOOST_HANA_DEFINE_STRUCT(params, (int, heads), (int, head_dim), (int, p_dim), (double, norm_eps),
                             (std::vector<double>, projections));
  };
  static params default_params() {
    std::mt19937_64 rng(1);
    return {8, 128, 8, 1e-6, detail::normal_vector(rng, 8 * 2 * position_limit * 8)};
  }
  static params random_params(std::mt19937_64& rng) {
    const int heads = std::uniform_int_distribution<int>(1, 4)(rng);
    const int p_dim = detail::pick(rng, {2, 4, 8});
    return {heads, 4, p_dim, 1e-6, detail::normal_vector(rng, heads * 2 * position_limit * p_dim)};
  }
  static instance make(const params& p) {
    detail::require_count("head_dim", p.head_dim);
    return {detail::make_path_integral_bias(p.heads, p.p_dim, p.norm_eps, p.projections), p.head_dim};
  }
  static double reference_bias(const params& p, int h, std::int64_t m, std::int64_t n) {
    const std::int64_t length = static_cast<std::int64_t>(p.projections.size()) / (p.heads * p.p_dim);
    return reference::grape_ap_bias(p.projections, length, p.p_dim, p.norm_eps, reference::alibi_slopes(p.heads)[h],
                                    h, m, n, /*rotate_rows=*/true);
  }
};

}  // namespace grape
