#pragma once
// The generic CPU kernel: applies any rotate_qk encoding (rank-2 GRAPE-M, learned bases, LieRE,
// xPos, M-RoPE, RoPE, ...) to Q or K through the encoding's own float32 element path, one token
// per OpenMP iteration. Rotation-plane encodings have the specialised, vectorized kernel in
// rotate_qk.hpp; this one is what a new encoding type gets for free.
//
// x and y: contiguous [tokens, heads, head_dim] of Storage (float, Eigen::half, Eigen::bfloat16),
// y may equal x. coords: one group coordinate array per token.
#include <Eigen/Core>
#include <array>
#include <cstdint>
#include <fmt/format.h>
#include <vector>

#include "grape/detail/error.hpp"
#include "grape/inject/concepts.hpp"

namespace grape::cpu {

template <class E, class Storage>
void apply_encoding(const typename E::instance& inst, bool is_key, const Storage* x, Storage* y,
                    std::int64_t tokens, std::int64_t heads,
                    const std::array<std::int64_t, E::group::rank>* coords) {
  static_assert(E::injection::kind == injection_kind::rotate_qk,
                "grape: apply_encoding takes an encoding whose injection is rotate_qk");
  if (tokens < 0 || heads < 0) throw input_error(fmt::format("tokens, heads: must be >= 0 (got {}, {})", tokens, heads));
  if (tokens > 0 && heads > 0 && (x == nullptr || y == nullptr || coords == nullptr))
    throw input_error("x, y, coords: must not be null");
  const int d = inst.content_dim();
#pragma omp parallel
  {
    std::vector<float> in(d), out(d);
#pragma omp for schedule(static)
    for (std::int64_t t = 0; t < tokens; ++t) {
      for (std::int64_t h = 0; h < heads; ++h) {
        const std::int64_t base = (t * heads + h) * d;
        for (int c = 0; c < d; ++c) in[c] = static_cast<float>(x[base + c]);
        inst.encode(is_key, coords[t], in.data(), out.data());
        for (int c = 0; c < d; ++c) y[base + c] = static_cast<Storage>(out[c]);
      }
    }
  }
}

}  // namespace grape::cpu
