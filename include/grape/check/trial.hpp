#pragma once
// One trial's inputs (what every law tester's `trial` receives) and what the built-in laws'
// trials share: the questions they ask of an encoding's types, position and content draws, and
// the tolerance rules.
#include <Eigen/Core>
#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <rapidcheck.h>
#include <string>
#include <string_view>
#include <type_traits>

#include "grape/check/report.hpp"
#include "grape/detail/random.hpp"
#include "grape/encoding.hpp"
#include "grape/inject/instance_kind.hpp"
#include "grape/inject/score_bias.hpp"

namespace grape::detail {

inline constexpr double eps64 = std::numeric_limits<double>::epsilon();
inline constexpr double eps32 = std::numeric_limits<float>::epsilon();

template <class E>
constexpr bool has_representation = !std::is_same_v<typename E::representation, no_representation>;

/// What the laws need, read from the instance and the injection rather than from a closed list
/// of injection kinds: an embedding table (shift_linear), a content-dependent bias.
template <class E>
constexpr bool is_embedding = adds_embedding<typename E::instance>;

template <class E>
constexpr bool has_content_bias = [] {
  if constexpr (requires { typename E::injection::bias_type; })
    return ContentDependentBias<typename E::injection::bias_type>;
  else
    return false;
}();

template <class E>
constexpr bool has_reference_bias = requires(const typename E::params& p) {
  { E::reference_bias(p, 0, std::int64_t{0}, std::int64_t{0}) } -> std::convertible_to<double>;
};

using vec = Eigen::VectorXd;

inline vec random_vec(std::mt19937_64& rng, int n) {
  const auto v = normal_vector(rng, n);
  return Eigen::Map<const vec>(v.data(), n);
}

template <std::size_t N>
std::string show(const std::array<std::int64_t, N>& c) {
  std::string s = "(";
  for (std::size_t k = 0; k < N; ++k) s += (k ? ", " : "") + std::to_string(c[k]);
  return s + ")";
}

/// The range a check draws positions from: |m| < limit, the encoding's position_limit unless
/// check_options::max_position narrows it.
template <class E>
std::int64_t position_range(const check_options& options) {
  const std::int64_t limit = E::position_limit;
  return options.max_position > 0 ? std::min(limit, options.max_position) : limit;
}

/// A draw at rapidcheck's full size. Integer ranges are otherwise scaled by a size that grows over
/// the trials, which keeps the first trials' draws near the bottom of every range.
template <class Gen>
auto full_size(Gen gen) {
  return *rc::gen::resize(rc::kNominalSize, std::move(gen));
}

/// Positions below this are "small": most draws stay below it, so that small positions and offsets
/// are well represented and shrinking reaches small counterexamples.
inline constexpr std::int64_t small_positions = 1024;

/// One draw in edge_case_share (rapidcheck's habit of trying the special values) is an edge case:
/// the previous position drawn again (a query's own key, m = n; a shift of 0), 0, ±1, or an end of
/// the range. Uniform draws almost never land there, and a defect on the diagonal or at the
/// range's end would pass every trial.
inline constexpr int edge_case_share = 8;

/// What the report's header says about the draws (check_report::position_draws).
inline constexpr std::string_view position_draws_note =
    "1 draw in 8 an edge case (the previous position again, so m = n; 0, ±1, an end of the range)";

/// One trial's draws: parameters (fixed or from a shrinkable seed), content seed, positions.
template <class E>
struct trial_inputs {
  using G = typename E::group;
  typename E::params params;
  typename E::instance instance;
  std::mt19937_64 rng;
  int head = 0;
  std::int64_t limit = E::position_limit;  // |position| < limit
  mutable std::optional<std::int64_t> previous{};  // the last position drawn, for the m = n edge case

  /// A position with |m| < limit, or in [0, limit) for an encoding whose positions start at 0
  /// (signed_positions = false: a table, a gate sequence). One draw in edge_case_share is an edge
  /// case; of the rest, three in four are below small_positions and the fourth is log-uniform up to
  /// the limit (a bit length, then uniform below it), so a defect that shows only past 2^24 is
  /// found by default. Magnitude and sign are drawn apart, so shrinking moves toward 0, toward
  /// small and toward positive.
  std::int64_t draw_position() const {
    std::int64_t m = 0;
    if (full_size(rc::gen::inRange(0, edge_case_share)) == edge_case_share - 1) m = draw_edge_case();
    else m = draw_regular();
    previous = m;
    return m;
  }

  /// Coordinates on every axis, each a draw_position().
  std::array<std::int64_t, G::rank> draw_positions() const {
    std::array<std::int64_t, G::rank> c{};
    for (auto& x : c) x = draw_position();
    return c;
  }

 private:
  std::int64_t draw_regular() const {
    const std::int64_t small = std::min(limit, small_positions);
    std::int64_t magnitude = 0;
    if (full_size(rc::gen::inRange(0, 4)) < 3 || limit <= small) {
      magnitude = full_size(rc::gen::inRange<std::int64_t>(0, small));
    } else {
      const auto bit_length = [](std::int64_t v) { return static_cast<int>(std::bit_width(static_cast<std::uint64_t>(v))); };
      const int bits = full_size(rc::gen::inRange(bit_length(small), bit_length(limit - 1) + 1));
      magnitude = full_size(rc::gen::inRange<std::int64_t>(0, std::min(limit, std::int64_t{1} << bits)));
    }
    if constexpr (!E::signed_positions) return magnitude;
    return *rc::gen::arbitrary<bool>() ? -magnitude : magnitude;
  }

  /// 0, the previous draw, 1, the top of the range, then (signed) −1 and the bottom; shrinking
  /// moves toward 0.
  std::int64_t draw_edge_case() const {
    const std::int64_t top = limit - 1;
    const std::array<std::int64_t, 6> edges{0, previous.value_or(0), std::min<std::int64_t>(1, top), top, -1, -top};
    const int count = E::signed_positions ? 6 : 4;
    return edges[static_cast<std::size_t>(full_size(rc::gen::inRange(0, count)))];
  }
};

template <class E>
trial_inputs<E> draw_trial(const std::optional<typename E::params>& fixed, const check_options& options) {
  const auto param_seed = *rc::gen::arbitrary<std::uint64_t>();
  const auto content_seed = *rc::gen::arbitrary<std::uint64_t>();
  std::mt19937_64 prng(param_seed);
  auto params = fixed ? *fixed : E::random_params(prng);
  auto inst = E::make(params);
  const int head = *rc::gen::inRange(0, inst.heads());
  return {std::move(params), std::move(inst), std::mt19937_64(content_seed), head, position_range<E>(options)};
}

/// Σ_k |c_k|·‖L_k‖: the size of the exponent, which bounds the reference's own rounding error.
template <class R, std::size_t N>
double angle_size(const R& rep, const std::array<std::int64_t, N>& c) {
  double a = 0;
  for (std::size_t k = 0; k < N; ++k) a += std::abs(static_cast<double>(c[k])) * rep.generator(static_cast<int>(k)).norm();
  return a;
}

inline double double_tolerance(int d, double angle) { return 64.0 * d * eps64 + 1024.0 * eps64 * angle; }
inline double float_tolerance(int d, double angle) { return 16.0 * std::sqrt(static_cast<double>(d)) * eps32 + 1024.0 * eps64 * angle; }

inline constexpr std::string_view double_rule = "|error| <= scale * (64 d eps64 + 1024 eps64 |angle|)";
inline constexpr std::string_view float_rule = "|error| <= scale * (16 sqrt(d) eps32 + 1024 eps64 |angle|)";

}  // namespace grape::detail
