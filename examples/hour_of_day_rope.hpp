#pragma once
// The tutorial's encoding (docs/tutorial.md): rotary positions on a 24-step cycle. Periodic =
// false builds it with RoPE's usual frequencies, which are not periodic: the checker's example.
#include <fmt/format.h>
#include <rapidcheck.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <random>
#include <string_view>
#include <vector>

#include "cyclic_group.hpp"
#include "grape/check/report.hpp"
#include "grape/encoding.hpp"
#include "grape/inject/rotate_qk.hpp"
#include "grape/rep/rotation_planes.hpp"

// A law of the encoding's own, which grape does not ship: a day later is the same hour.
struct same_hour_a_day_later {
  static constexpr std::string_view name = "same_hour_a_day_later";
  static constexpr std::string_view formula = "ρ(m + 24)x = ρ(m)x";
  static constexpr std::string_view tolerance = "|error| <= 1e-9 (1 + |x|)";

  template <class E>
  static std::optional<grape::counterexample> trial(grape::detail::trial_inputs<E>& t) {
    const auto& rep = t.instance.representation(t.head);
    const std::int64_t m = *rc::gen::inRange<std::int64_t>(0, 24);  // shrinks toward 0
    std::vector<double> x(rep.dim()), now(rep.dim()), later(rep.dim());
    std::normal_distribution<double> normal(0.0, 1.0);
    double norm = 0, error = 0;
    for (double& v : x) v = normal(t.rng), norm += v * v;
    rep.apply({m}, x.data(), now.data());
    rep.apply({m + 24}, x.data(), later.data());
    for (int i = 0; i < rep.dim(); ++i) error = std::max(error, std::abs(now[i] - later[i]));
    const double tolerance = 1e-9 * (1 + std::sqrt(norm));
    if (error <= tolerance) return std::nullopt;
    return grape::counterexample{fmt::format("m=({}) head={}", m, t.head), now[0], later[0], error, tolerance,
                                 "ρ(m)x vs ρ(m + 24)x, first entries; error = max |entry difference|"};
  }
};

// The encoding: group x representation x injection, plus its claims and parameters.
template <bool Periodic>
struct hour_of_day_rope : grape::encoding<cyclic<24>, grape::rotation_planes<1>,
                                          grape::rotate_qk<grape::layout_kind::half_split>> {
  static constexpr std::string_view name = Periodic ? "hour_of_day_rope" : "hour_of_day_rope_broken";
  static constexpr std::string_view summary = "RoPE on a 24-step cycle";
  static constexpr grape::law_set claims = grape::rotary_laws;
  using extra_laws = grape::law_list<same_hour_a_day_later>;  // claimed too
  static constexpr std::int64_t position_limit = 24;  // the checker draws |position| < 24
  static constexpr std::string_view position_limit_reason = "an hour is 0..23: a longer range only repeats it";

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

