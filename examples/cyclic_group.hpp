#pragma once
// A user-defined group: positions on a cycle of P steps (Z/P), e.g. the hour of a day or a
// periodic sensor slot. It models grape::Group with nothing but static functions.
#include <array>
#include <cstdint>
#include <string_view>

#include "grape/group/concepts.hpp"

template <std::int64_t P>
struct cyclic {
  using element = std::int64_t;  // 0 .. P-1
  static constexpr int rank = 1;

  static element identity() { return 0; }
  static element compose(element a, element b) { return (a + b) % P; }
  static element inverse(element a) { return (P - a) % P; }
  static std::array<std::int64_t, 1> coordinates(element a) { return {a}; }
  static element from_coordinates(std::array<std::int64_t, 1> c) { return ((c[0] % P) + P) % P; }
  static constexpr std::string_view name() { return "cyclic<P>"; }
};

static_assert(grape::Group<cyclic<24>>);
