#pragma once
// encoding<G, R, I>: an encoding is a group of positions, a representation of it, and the point
// where it enters attention. A built-in or user encoding derives from it and adds:
//   static constexpr std::string_view name, summary;
//   static constexpr law_set claims;                  the laws it promises (check/laws.hpp)
//   struct params { ... };                            run-time parameters (Hana-reflected)
//   static instance make(const params&);              validates, throws grape::input_error
//   static params random_params(std::mt19937_64&);    what the checker draws
//   static constexpr std::int64_t position_limit;     optional: the documented range, |m| < limit
//   static constexpr std::string_view position_limit_reason;  why, when it is below the default
//   static constexpr bool signed_positions;           optional: false when positions start at 0
#include <cstdint>
#include <random>
#include <string_view>
#include <type_traits>

#include "grape/check/laws.hpp"
#include "grape/group/concepts.hpp"
#include "grape/inject/concepts.hpp"
#include "grape/rep/concepts.hpp"

namespace grape {

namespace detail {
/// The instance of an encoding whose static_asserts failed: built from anything, scores 0.
struct ill_formed_instance {
  template <class... A>
  ill_formed_instance(A&&...) {}
  int content_dim() const { return 0; }
  int heads() const { return 1; }
  template <class... A>
  double score(A&&...) const { return 0; }
};
}  // namespace detail

template <class G, class R, class I>
struct encoding {
  static_assert(Group<G>,
                "grape: the first argument of encoding<G, R, I> is not a Group: give it element, rank, "
                "identity(), compose(a, b), inverse(a), coordinates(a), from_coordinates(c) and name()");
  static constexpr bool ranks_agree = std::is_same_v<R, no_representation> || R::rank == G::rank;
  // Spelled out rather than `ranks_agree`, so that the compiler's note prints both ranks.
  static_assert(std::is_same_v<R, no_representation> || R::rank == G::rank,
                "grape: the representation's rank (R::rank) differs from the group's (G::rank): a "
                "representation of a rank-N group takes N position coordinates (static constexpr int rank = N)");
  static_assert(std::is_same_v<R, no_representation> || RepresentationOfRank<R, R::rank>,
                "grape: the second argument of encoding<G, R, I> is not a RepresentationOf<R, G>: give it "
                "rank, pairing, dim(), apply and apply_key for double and float, and generator(axis)");
  static_assert(Injection<I>,
                "grape: the third argument of encoding<G, R, I> is not an Injection: use rotate_qk, "
                "lift_qk, score_bias, add_embedding, compose, or a tag type of your own with a "
                "`description` and `template <class R> using instance`");

  using group = G;
  // When the ranks differ, the static_assert above is the error: the representation and the
  // instance become stand-ins that every later use accepts, so no cascade follows it.
  using representation = std::conditional_t<ranks_agree, R, no_representation>;
  using injection = I;
  using instance = std::conditional_t<ranks_agree, typename I::template instance<R>, detail::ill_formed_instance>;
  /// The documented position range: every coordinate |m| < position_limit. The checker draws a
  /// fixed share of its positions log-uniformly up to it, so a defect that appears only past 2^20
  /// or 2^24 (a float32 position, an int32 product, a table read past its end) fails by default.
  /// The default is the kernels' range (int32 position ids); an encoding that needs less restates
  /// it and says why in position_limit_reason.
  static constexpr std::int64_t position_limit = std::int64_t{1} << 31;
  static constexpr std::string_view position_limit_reason = "";
  /// The checker draws positions of both signs (the group is Z^N: a defect that holds only for
  /// m >= 0 — an |m|, a clamp — must be caught), except for an encoding defined on a sequence that
  /// starts at 0 (a learned table, FoX's gates), which says false.
  static constexpr bool signed_positions = true;
};

template <class E>
concept Encoding = requires(const typename E::params& p, std::mt19937_64& rng) {
  typename E::group;
  typename E::representation;
  typename E::injection;
  { E::name } -> std::convertible_to<std::string_view>;
  { E::summary } -> std::convertible_to<std::string_view>;
  { E::claims } -> std::convertible_to<law_set>;
  { E::make(p) } -> std::same_as<typename E::instance>;
  { E::random_params(rng) } -> std::same_as<typename E::params>;
  { E::position_limit } -> std::convertible_to<std::int64_t>;
};

}  // namespace grape
