#pragma once
// The tutorial's broken variants (examples/tutorial_representation.cpp, tutorial_score_bias.cpp) in a
// header, for grape.load_encoding: keys turned the wrong way, and slopes of the wrong sign.
#include "log_distance.hpp"
#include "quaternion_rope.hpp"

// κ(n) = ρ(−n): (ρ(m)x)ᵀ(ρ(−n)y) depends on m + n, not on n − m.
struct wrong_key_turns : quaternion_turns {
  using quaternion_turns::quaternion_turns;
  template <class T>
  void apply_key(const std::array<std::int64_t, 1>& c, const T* x, T* y) const {
    apply({-c[0]}, x, y);
  }
};

// A bonus for distance instead of a penalty: still a function of m − n, so only the reference sees it.
struct log_distance_flipped : log_distance {
  static constexpr std::string_view name = "log_distance_flipped";
  static instance make(const params& p) {
    instance i = log_distance::make(p);
    for (double& s : i.bias.slopes) s = -s;
    return i;
  }
};

// Not an encoding: grape.load_encoding names what is missing with a `grape:` sentence.
struct not_an_encoding {
  struct params {
    int head_dim;
  };
};
