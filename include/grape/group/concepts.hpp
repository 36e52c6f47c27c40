#pragma once
// Group: the positions of an encoding and their law.
//
// Minimal definition (a type G with static members):
//   using element = ...;                          a position
//   static constexpr int rank;                    integer coordinates per position
//   static element identity();
//   static element compose(element a, element b); a∘b
//   static element inverse(element a);
//   static std::array<std::int64_t, rank> coordinates(element a);  the exponent that the
//       representation multiplies its generators by: ρ(a) = exp(Σ_k coordinates(a)_k · L_k)
//   static element from_coordinates(std::array<std::int64_t, rank> c);  the inverse map (reduced
//       into the group as needed), so the checker can draw positions
//   static std::string_view name();
// Laws (checked by grape::check): identity, associativity, inverse.
// Models: translation<N> (Z^N), examples/cyclic_group.hpp (Z/P).
#include <array>
#include <concepts>
#include <cstdint>
#include <string_view>

namespace grape {

template <class G>
concept Group = requires(const typename G::element& a, const typename G::element& b) {
  typename G::element;
  { G::rank } -> std::convertible_to<int>;
  { G::identity() } -> std::same_as<typename G::element>;
  { G::compose(a, b) } -> std::same_as<typename G::element>;
  { G::inverse(a) } -> std::same_as<typename G::element>;
  { G::coordinates(a) } -> std::same_as<std::array<std::int64_t, G::rank>>;
  { G::from_coordinates(G::coordinates(a)) } -> std::same_as<typename G::element>;
  { G::name() } -> std::convertible_to<std::string_view>;
} && std::equality_comparable<typename G::element>;

template <class G>
using coordinates_t = std::array<std::int64_t, G::rank>;

}  // namespace grape
