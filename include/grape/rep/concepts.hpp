#pragma once
// RepresentationOf<R, G>: maps a position of G to a linear action on vectors of dim() numbers.
//
// Minimal definition (an object r of type R, c = G::coordinates(position)):
//   static constexpr int rank;                 position axes it expects (== G::rank)
//   static constexpr key_pairing pairing;      how keys are transformed: the same ρ (orthogonal
//                                              families) or ρ^-T (unipotent lifts, scalings)
//   int dim() const;
//   void apply(c, const T* x, T* y) const;     y = ρ(c)x, for T = double and T = float; the float
//                                              path is the element code that kernels run
//   void apply_key(c, const T* x, T* y) const; y = κ(c)x, κ = ρ or ρ^-T by pairing
//   Eigen::MatrixXd generator(int axis) const; L_k with ρ(c) = exp(Σ_k c_k L_k): the independent
//                                              dense reference the checker compares against
// Laws: homomorphism ρ(a∘b) = ρ(a)ρ(b); relative ρ(m)ᵀκ(n) = ρ(e)ᵀκ(m⁻¹∘n); agreement of apply
// with exp(Σ c_k L_k); norm preservation for orthogonal families.
// Models: rotation_planes<N>, rank2_rotation, skew_generators<N> (learned bases, LieRE),
// unipotent_lift, scaled_planes (xPos).
#include <Eigen/Core>
#include <array>
#include <concepts>
#include <cstdint>

#include "grape/group/concepts.hpp"

namespace grape {

enum class key_pairing { same, inverse_transpose };

template <class R, int Rank>
concept RepresentationOfRank = requires(const R& r, const std::array<std::int64_t, Rank>& c,
                                        const double* x, double* y, const float* xf, float* yf) {
  { R::rank } -> std::convertible_to<int>;
  { R::pairing } -> std::convertible_to<key_pairing>;
  { r.dim() } -> std::convertible_to<int>;
  r.apply(c, x, y);
  r.apply(c, xf, yf);
  r.apply_key(c, x, y);
  r.apply_key(c, xf, yf);
  { r.generator(0) } -> std::same_as<Eigen::MatrixXd>;
} && R::rank == Rank;

template <class R, class G>
concept RepresentationOf = Group<G> && RepresentationOfRank<R, G::rank>;

/// Encodings whose injection needs no representation (pure score biases, learned tables).
struct no_representation {
  static constexpr int rank = 0;
};

}  // namespace grape
