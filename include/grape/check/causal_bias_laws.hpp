#pragma once
// Laws of a causal score bias b_h(m, n) (FoX-like path sums, the GRAPE paper's gated and
// path-integral biases), as law testers an encoding lists in its extra_laws: the key side past the
// query is masked; the bias is a penalty; and, for a path sum of non-positive terms, it does not
// grow as the key moves away from the query. They read the instance's bias only, so this header
// stays light (no rapidcheck, no Eigen) for the encoding headers that name them.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <fmt/format.h>
#include <limits>
#include <optional>
#include <string_view>
#include <utility>

#include "grape/check/report.hpp"

namespace grape {
namespace detail {
template <class E>
double causal_bias_at(const trial_inputs<E>& t, std::int64_t m, std::int64_t n) {
  return t.instance.bias.bias(t.head, std::array<std::int64_t, 1>{m}, std::array<std::int64_t, 1>{n});
}
/// Two drawn positions as a causal pair: the key n at or before the query m.
template <class E>
std::pair<std::int64_t, std::int64_t> draw_causal_pair(const trial_inputs<E>& t) {
  const std::int64_t a = t.draw_position(), b = t.draw_position();
  return {std::max(a, b), std::min(a, b)};
}
}  // namespace detail

/// n > m is masked (−∞); n <= m is finite.
struct causal_mask_law {
  static constexpr std::string_view name = "causal_mask";
  static constexpr std::string_view formula = "b(m,n) = -inf for n > m, finite for n <= m";
  static constexpr std::string_view tolerance = "exact";

  template <class E>
  static std::optional<counterexample> trial(detail::trial_inputs<E>& t) {
    const std::int64_t m = t.draw_position(), n = t.draw_position();
    const double b = detail::causal_bias_at(t, m, n);
    const bool masked = b == -std::numeric_limits<double>::infinity();
    if (n > m ? masked : std::isfinite(b)) return std::nullopt;
    return counterexample{fmt::format("m=({}) n=({}) head={}", m, n, t.head), b, n > m ? -INFINITY : 0.0, INFINITY,
                          0, n > m ? "b(m,n) for a key after the query, not masked" : "b(m,n) not finite for n <= m"};
  }
};

/// b(m, n) <= 0 for n <= m: the bias only penalises.
struct nonpositive_bias_law {
  static constexpr std::string_view name = "nonpositive_bias";
  static constexpr std::string_view formula = "b(m,n) <= 0 for n <= m";
  static constexpr std::string_view tolerance = "exact";

  template <class E>
  static std::optional<counterexample> trial(detail::trial_inputs<E>& t) {
    const auto [m, n] = detail::draw_causal_pair(t);
    const double b = detail::causal_bias_at(t, m, n);
    if (b <= 0) return std::nullopt;
    return counterexample{fmt::format("m=({}) n=({}) head={}", m, n, t.head), b, 0.0, b, 0, "b(m,n) vs 0"};
  }
};

/// b(m, n − 1) <= b(m, n) for 0 < n <= m: a path sum of terms <= 0 does not grow with the path.
struct monotone_path_law {
  static constexpr std::string_view name = "monotone_path";
  static constexpr std::string_view formula = "b(m,n-1) <= b(m,n) for 0 < n <= m (each path term <= 0)";
  static constexpr std::string_view tolerance = "exact";

  template <class E>
  static std::optional<counterexample> trial(detail::trial_inputs<E>& t) {
    const auto [m, n] = detail::draw_causal_pair(t);
    if (n == 0) return std::nullopt;
    const double nearer = detail::causal_bias_at(t, m, n), farther = detail::causal_bias_at(t, m, n - 1);
    if (farther <= nearer) return std::nullopt;
    return counterexample{fmt::format("m=({}) n=({}) head={}", m, n, t.head), farther, nearer, farther - nearer, 0,
                          "b(m,n-1) vs b(m,n)"};
  }
};

}  // namespace grape
