#pragma once
// The tutorial's encoding (docs/tutorial.md): rotary positions on a 24-step cycle. Periodic =
// false builds it with RoPE's usual frequencies, which are not periodic: the checker's example.
#include <cmath>
#include <cstdint>
#include <random>
#include <string_view>
#include <vector>

#include "cyclic_group.hpp"
#include "grape/encoding.hpp"
#include "grape/inject/rotate_qk.hpp"
#include "grape/rep/rotation_planes.hpp"

// 1. The encoding: group x representation x injection, plus its claims and parameters.
template <bool Periodic>
struct hour_of_day_rope : grape::encoding<cyclic<24>, grape::rotation_planes<1>,
                                          grape::rotate_qk<grape::layout_kind::half_split>> {
  static constexpr std::string_view name = Periodic ? "hour_of_day_rope" : "hour_of_day_rope_broken";
  static constexpr std::string_view summary = "RoPE on a 24-step cycle";
  static constexpr grape::law_set claims = grape::rotary_laws;
  static constexpr std::int64_t position_limit = 24;

  struct params {
    int head_dim;
  };
  static params random_params(std::mt19937_64& rng) { return {2 * std::uniform_int_distribution<int>(1, 8)(rng)}; }
  static instance make(const params& p) {
    std::vector<double> inv_freq(p.head_dim / 2);
    for (int i = 0; i < p.head_dim / 2; ++i)
      inv_freq[i] = Periodic ? 2 * M_PI * (i + 1) / 24.0 : std::pow(10000.0, -2.0 * i / p.head_dim);
    return {grape::rotation_planes<1>::from_inv_freq(inv_freq), p.head_dim, 1.0};
  }
};

