#pragma once
// Backward of the generic rotate_qk kernel (encoding_kernel.hpp) for any encoding: with κ the key
// action (ρ, or ρ^-T for lifts and scalings) and a homomorphism ρ,
//   ρ(c)ᵀ = κ(c⁻¹)   and   κ(c)ᵀ = ρ(c⁻¹),
// so dL/dq = af·ρ(c)ᵀ·dL/dy is the forward key transform at the inverse position, and dL/dk the
// forward query transform there. Channels past the rotary window pass the gradient through.
#include <array>
#include <cstdint>
#include <vector>

#include "cpu/encoding_kernel.hpp"

namespace grape::cpu {

template <class E, class Storage>
void apply_encoding_backward(const typename E::instance& inst, bool is_key, const Storage* grad_y, Storage* grad_x,
                             std::int64_t tokens, std::int64_t heads,
                             const std::array<std::int64_t, E::group::rank>* coords) {
  using G = typename E::group;
  std::vector<std::array<std::int64_t, G::rank>> inverse(tokens > 0 ? tokens : 0);
  for (std::int64_t t = 0; t < tokens; ++t) inverse[t] = G::coordinates(G::inverse(G::from_coordinates(coords[t])));
  apply_encoding<E, Storage>(inst, !is_key, grad_y, grad_x, tokens, heads, inverse.data());
}

}  // namespace grape::cpu
