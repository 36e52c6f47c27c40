#pragma once
// grape_m_contextual: the GRAPE paper's contextual GRAPE-M. Each token t carries a real phase
// Φ_t = Σ_{τ<t} ω_τ, with ω_τ >= 0 computed by the model from token τ (the authors: sigmoid(wᵀx + b)/16),
// one sequence shared by the heads or one per head; plane j of a head turns by Φ_t·θ_j. Positions
// are token indices into the phase sequence; the relative law lives on the phases, a real line:
// scores depend on Φ_n − Φ_m only (phase_shift_invariance, phase_difference). For fixed content the
// scores are not translation invariant in the token index (a different token's phase sits at the
// shifted index), and the checker reports that, unclaimed. Kernels: kernels/cpu/grape_m.hpp.
#include <boost/hana/define_struct.hpp>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "grape/check/phase_laws.hpp"
#include "grape/detail/random.hpp"
#include "grape/detail/validate.hpp"
#include "grape/encoding.hpp"
#include "grape/group/translation.hpp"
#include "grape/inject/rotate_by_phase.hpp"
#include "grape/schedule/rotary_spec.hpp"

namespace grape {

struct grape_m_contextual final : encoding<translation<1>, no_representation, rotate_by_phase> {
  static constexpr std::string_view name = "grape_m_contextual";
  static constexpr std::string_view summary =
      "GRAPE-M contextual: q, k turned by Phi_t*theta_j, Phi_t = sum_{tau<t} omega_tau (real per-token phases)";
  static constexpr law_set claims = law::group;
  using extra_laws = law_list<phase_shift_invariance_law, phase_difference_law>;
  static constexpr std::int64_t position_limit = 256;
  static constexpr std::string_view position_limit_reason =
      "the phase sequence random_params draws covers tokens 0..511 (shifts included)";
  static constexpr bool signed_positions = false;  // phase t belongs to token t >= 0

  struct params {
    /// freqs: θ, [heads, head_dim/2] or [head_dim/2] (shared), empty: RoPE's 1/10000^(2j/d);
    /// phases: Φ, [phase_rows, length], phase_rows = 1 (shared) or heads.
    BOOST_HANA_DEFINE_STRUCT(params, (int, heads), (int, head_dim), (int, phase_rows), (std::vector<double>, freqs),
                             (std::vector<double>, phases));
  };

  /// Φ as the authors' model makes it: an exclusive cumulative sum of ω = sigmoid(z)/16 per row,
  /// from `start`, z ~ N(mean, 1).
  static std::vector<double> cumulative_phases(std::mt19937_64& rng, int rows, std::int64_t length, double start,
                                               double mean) {
    std::normal_distribution<double> z(mean, 1.0);
    std::vector<double> phases(static_cast<std::size_t>(rows * length));
    for (int r = 0; r < rows; ++r) {
      double phi = start;
      for (std::int64_t t = 0; t < length; ++t) {
        phases[r * length + t] = phi;
        phi += 1.0 / (1.0 + std::exp(-z(rng))) / 16.0;
      }
    }
    return phases;
  }

  static params default_params() {
    std::mt19937_64 rng(1);
    return {8, 64, 8, {}, cumulative_phases(rng, 8, 2 * position_limit, 0.0, -4.0)};
  }
  static params random_params(std::mt19937_64& rng) {
    const int heads = std::uniform_int_distribution<int>(1, 4)(rng);
    const int d = detail::pick(rng, {2, 4, 8, 16});
    const int rows = (rng() & 1) ? heads : 1;
    const int freq_rows = (rng() & 1) ? heads : 1;
    std::vector<double> freqs(static_cast<std::size_t>(freq_rows * d / 2));
    for (auto& f : freqs) f = detail::log_uniform(rng, 1e-4, 2.0);
    // A long context's phases start far from 0 now and then: the laws must hold there too.
    const double start = (rng() & 1) ? detail::log_uniform(rng, 1.0, 1e6) : 0.0;
    return {heads, d, rows, std::move(freqs), cumulative_phases(rng, rows, 2 * position_limit, start, 0.0)};
  }

  static instance make(const params& p) {
    detail::require_count("heads", p.heads);
    detail::require_count("head_dim", p.head_dim, 2);
    detail::require_even("head_dim", p.head_dim);
    if (p.phase_rows != 1 && p.phase_rows != p.heads)
      throw input_error(fmt::format("phase_rows: must be 1 or heads = {} (got {})", p.heads, p.phase_rows));
    const int planes = p.head_dim / 2;
    phase_rotation r;
    r.num_heads = p.heads;
    r.head_dim = p.head_dim;
    r.phase_rows = p.phase_rows;
    if (p.freqs.empty()) {
      r.freqs = rope_inv_freq(p.head_dim, 10000.0);
    } else if (static_cast<int>(p.freqs.size()) == planes || static_cast<int>(p.freqs.size()) == p.heads * planes) {
      r.freqs = p.freqs;
    } else {
      throw input_error(fmt::format("freqs: must hold head_dim/2 = {} or heads x head_dim/2 = {} values (got {})",
                                    planes, p.heads * planes, p.freqs.size()));
    }
    r.freq_rows = static_cast<int>(r.freqs.size()) / planes;
    for (std::size_t i = 0; i < r.freqs.size(); ++i) detail::require_finite_at("freqs", i, r.freqs[i]);
    if (p.phases.empty() || p.phases.size() % p.phase_rows != 0)
      throw input_error(fmt::format("phases: must hold phase_rows x length values, length >= 1 (got {})",
                                    p.phases.size()));
    r.length = static_cast<std::int64_t>(p.phases.size()) / p.phase_rows;
    for (std::size_t i = 0; i < p.phases.size(); ++i) detail::require_finite_at("phases", i, p.phases[i]);
    r.phases = p.phases;
    return r;
  }
};

}  // namespace grape
