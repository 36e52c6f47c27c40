#pragma once
// rotate_by_phase: Q and K turned by a real phase that each token carries (contextual GRAPE-M,
// Φ_t = Σ_{τ<t} ω_τ computed from the tokens' content). Positions are token indices; the logit of
// query token m and key token n is
//   (R(Φ_m·θ_h)q)ᵀ(R(Φ_n·θ_h)k),   R(φ): half-split plane j (j, j + d/2) turned by φ_j,
// computed here as the kernels compute it — each side turned by its own absolute phase — so that
// the checker's phase laws (check/phase_laws.hpp) test that it depends on Φ_n − Φ_m alone. The
// group of the law is the real line: phase_shift_invariance draws real shifts of Φ.
#include <array>
#include <cmath>
#include <cstdint>
#include <fmt/format.h>
#include <string_view>
#include <vector>

#include "grape/detail/error.hpp"
#include "grape/inject/concepts.hpp"

namespace grape {

struct phase_rotation {
  int num_heads = 0;
  int head_dim = 0;                // even; planes = head_dim / 2
  int freq_rows = 1;               // 1 (shared) or num_heads
  int phase_rows = 1;              // 1 (shared) or num_heads
  std::int64_t length = 0;         // tokens that carry a phase
  std::vector<double> freqs;       // [freq_rows, planes] θ
  std::vector<double> phases;      // [phase_rows, length] Φ

  int content_dim() const { return head_dim; }
  int heads() const { return num_heads; }
  int planes() const { return head_dim / 2; }
  double theta(int h, int j) const { return freqs[(freq_rows == 1 ? 0 : h) * planes() + j]; }

  /// Φ of token `token` for head h (input_error outside the phase sequence).
  double phase(int h, std::int64_t token) const {
    if (token < 0 || token >= length)
      throw input_error(fmt::format("position: token {} is outside the phase sequence [0, {})", token, length));
    return phases[(phase_rows == 1 ? 0 : h) * length + token];
  }

  /// Whether Q and K heads must pair one to one: a row of θ or Φ per head turns each head its
  /// own way, so a K head cannot serve a group of query heads (no GQA).
  bool per_head() const { return freq_rows > 1 || phase_rows > 1; }

  /// x turned by phase φ with head h's frequencies, in float64 (half-split planes).
  void encode(int h, double phi, const double* x, double* y) const {
    const int half = planes();
    for (int j = 0; j < half; ++j) {
      const double a = phi * theta(h, j);
      y[j] = x[j] * std::cos(a) - x[j + half] * std::sin(a);
      y[j + half] = x[j + half] * std::cos(a) + x[j] * std::sin(a);
    }
  }

  /// The logit with explicit phases: each side turned by its own phase, in float64.
  double score_at_phases(int h, const double* q, const double* k, double phi_m, double phi_n) const {
    std::vector<double> qr(head_dim), kr(head_dim);
    encode(h, phi_m, q, qr.data());
    encode(h, phi_n, k, kr.data());
    double s = 0;
    for (int c = 0; c < head_dim; ++c) s += qr[c] * kr[c];
    return s;
  }

  template <std::size_t N>
  double score(int h, const double* q, const double* k, const std::array<std::int64_t, N>& m,
               const std::array<std::int64_t, N>& n) const {
    static_assert(N == 1, "grape: rotate_by_phase takes token indices (translation<1>)");
    return score_at_phases(h, q, k, phase(h, m[0]), phase(h, n[0]));
  }
};

struct rotate_by_phase {
  static constexpr std::string_view description = "rotate Q and K by per-token real phases";
  template <class R>
  using instance = phase_rotation;
};

}  // namespace grape
