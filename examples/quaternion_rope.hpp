#pragma once
// The encoding of part 2 of the tutorial (docs/tutorial.md): quaternion_turns on token positions,
// entering attention by rotating Q and K. A class template over the representation, so that the
// tutorial can check a broken representation with the same parameters.
#include <cmath>
#include <cstdint>
#include <random>
#include <string_view>
#include <vector>

#include "grape/check/laws.hpp"
#include "grape/detail/error.hpp"
#include "grape/encoding.hpp"
#include "grape/group/translation.hpp"
#include "grape/inject/rotate_qk.hpp"
#include "quaternion_turns.hpp"

template <class R = quaternion_turns>
struct quaternion_rope : grape::encoding<grape::translation<1>, R, grape::rotate_qk<grape::layout_kind::interleaved>> {
  // The base depends on R, so its names are not found by unqualified lookup here: restate them.
  using base_encoding = grape::encoding<grape::translation<1>, R, grape::rotate_qk<grape::layout_kind::interleaved>>;
  using instance = typename base_encoding::instance;  // rotate_instance<R, interleaved, interleaved>

  static constexpr std::string_view name = "quaternion_rope";
  static constexpr std::string_view summary = "blocks of 4 channels turned by unit quaternions";
  static constexpr grape::law_set claims = grape::rotary_laws;

  struct params {
    int head_dim;             // a multiple of 4
    double base;              // block b turns by base^(−4b/head_dim) per position
    std::uint64_t axis_seed;  // draws the blocks' axes
  };
  static params random_params(std::mt19937_64& rng) {
    return {4 * std::uniform_int_distribution<int>(1, 8)(rng), rng() % 2 ? 10000.0 : 100.0, rng()};
  }
  static instance make(const params& p) {
    if (p.head_dim <= 0 || p.head_dim % 4 != 0)
      throw grape::input_error("head_dim: must be a positive multiple of 4");
    std::mt19937_64 rng(p.axis_seed);
    std::normal_distribution<double> normal(0.0, 1.0);
    std::vector<quaternion_turns::block> blocks(p.head_dim / 4);
    for (std::size_t b = 0; b < blocks.size(); ++b)
      blocks[b] = {std::pow(p.base, -4.0 * b / p.head_dim), {normal(rng), normal(rng), normal(rng)}};
    return {R(blocks), p.head_dim, /*attention_factor=*/1.0};  // the rotate_instance's fields
  }
};
