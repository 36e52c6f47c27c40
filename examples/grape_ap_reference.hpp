#pragma once
// GRAPE-AP v1 as the authors' code computes it, written as a user's encoding: the key-side p̂_ℓ
// is rotated by its absolute token index ℓ, the row side p_m is used raw,
//   b_h(m, n) = Σ_{ℓ=n+1..m} slope_h·log σ(⟨p_m, R(ℓ)p̂_ℓ⟩/P).
// It claims what the paper claims — the bias is relative (translation invariant with the content
// moved along), causal, a penalty that grows along the path — and grape::check tests each claim.
#include <array>
#include <cmath>
#include <cstdint>
#include <random>
#include <string_view>

#include "grape/check/causal_bias_laws.hpp"
#include "grape/check/gated_path_reference.hpp"
#include "grape/encodings/grape_ap.hpp"

/// grape's path-integral data and term, with the reference's phase: ℓ, the key's absolute index.
struct absolute_phase_path_bias {
  grape::path_integral_bias path;

  int heads() const { return path.heads(); }
  double bias(int h, const std::array<std::int64_t, 1>& m, const std::array<std::int64_t, 1>& n) const {
    return bias_with_content(h, m[0], n[0], 0);
  }
  double bias_with_content(int h, std::int64_t m, std::int64_t n, std::int64_t origin) const {
    if (n > m) return -INFINITY;
    path.require_in_sequence(m, n, origin);
    double sum = 0;
    for (std::int64_t l = n + 1; l <= m; ++l) sum += path.term(h, m - origin, l - origin, static_cast<double>(l));
    return sum;
  }
};

struct grape_ap_reference
    : grape::encoding<grape::translation<1>, grape::no_representation, grape::score_bias<absolute_phase_path_bias>> {
  static constexpr std::string_view name = "grape_ap_reference";
  static constexpr std::string_view summary =
      "GRAPE-AP v1 as in the authors' code: sum_{n<l<=m} slope_h*log sigmoid(<p_m, R(l) p^_l>/P)";
  static constexpr grape::law_set claims =
      grape::law::group | grape::law::content_shift_invariance | grape::law::reference_agreement;
  using extra_laws = grape::law_list<grape::causal_mask_law, grape::nonpositive_bias_law, grape::monotone_path_law>;
  static constexpr std::int64_t position_limit = grape::grape_ap_relative::position_limit;
  static constexpr std::string_view position_limit_reason = grape::grape_ap_relative::position_limit_reason;
  static constexpr bool signed_positions = false;

  using params = grape::grape_ap_relative::params;
  static params random_params(std::mt19937_64& rng) { return grape::grape_ap_relative::random_params(rng); }
  static instance make(const params& p) {
    return {{grape::grape_ap_relative::make(p).bias}, p.head_dim};
  }
  /// The reference formula term by term (grape/check/gated_path_reference.hpp), row side unrotated.
  static double reference_bias(const params& p, int h, std::int64_t m, std::int64_t n) {
    const std::int64_t length = static_cast<std::int64_t>(p.projections.size()) / (p.heads * p.p_dim);
    return grape::reference::grape_ap_bias(p.projections, length, p.p_dim, p.norm_eps,
                                           grape::reference::alibi_slopes(p.heads)[h], h, m, n, /*rotate_rows=*/false);
  }
};
