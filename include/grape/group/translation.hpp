#pragma once
// translation<N>: positions in Z^N under addition. N = 1 is the token index; N = 2 image rows and
// columns; N = 3 video (t, h, w) as in M-RoPE.
#include <array>
#include <cstdint>
#include <string_view>

#include "grape/group/concepts.hpp"

namespace grape {

template <int N>
struct translation {
  static_assert(N >= 1, "grape: translation<N> needs N >= 1 position axes");
  using element = std::array<std::int64_t, N>;
  static constexpr int rank = N;

  static element identity() { return element{}; }
  static element compose(const element& a, const element& b) {
    element c{};
    for (int k = 0; k < N; ++k) c[k] = a[k] + b[k];
    return c;
  }
  static element inverse(const element& a) {
    element c{};
    for (int k = 0; k < N; ++k) c[k] = -a[k];
    return c;
  }
  static std::array<std::int64_t, N> coordinates(const element& a) { return a; }
  static element from_coordinates(const std::array<std::int64_t, N>& c) { return c; }
  static constexpr std::string_view name() {
    if constexpr (N == 1) return "translation<1>";
    else if constexpr (N == 2) return "translation<2>";
    else if constexpr (N == 3) return "translation<3>";
    else return "translation<N>";
  }
};

}  // namespace grape
