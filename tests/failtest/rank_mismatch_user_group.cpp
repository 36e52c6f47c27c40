// Expected: "grape: the representation's rank (R::rank) differs from the group's (G::rank)"
// Not expected: "translation"
// The message names no built-in group when the group is the user's own (here of rank 2).
#include <array>
#include <cstdint>
#include <string_view>

#include "grape/encoding.hpp"
#include "grape/inject/rotate_qk.hpp"
#include "grape/rep/rotation_planes.hpp"

struct torus {  // a 24 × 60 grid of hours and minutes that wraps on both axes
  using element = std::array<std::int64_t, 2>;
  static constexpr int rank = 2;
  static element identity() { return {0, 0}; }
  static element compose(element a, element b) { return {(a[0] + b[0]) % 24, (a[1] + b[1]) % 60}; }
  static element inverse(element a) { return {(24 - a[0]) % 24, (60 - a[1]) % 60}; }
  static std::array<std::int64_t, 2> coordinates(element a) { return a; }
  static element from_coordinates(std::array<std::int64_t, 2> c) {
    return {((c[0] % 24) + 24) % 24, ((c[1] % 60) + 60) % 60};
  }
  static constexpr std::string_view name() { return "torus"; }
};
struct bad : grape::encoding<torus, grape::rotation_planes<1>, grape::rotate_qk<grape::layout_kind::half_split>> {};
bad::instance x;
