#pragma once
// A random rotate_qk call on an encoding for the kernel-law and emulation tests (the checker's
// kernel_case) and its distance from the dense float64 reference; one rapidcheck property runner.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include "cpu/rotate_qk.hpp"
#include "grape/check/kernel_case.hpp"
#include "dense_reference.hpp"

namespace grape {

/// A random call on E's instance (check/kernel_case.hpp), compared with the dense reference.
template <class E, class T>
struct random_call : kernel_case<typename E::instance, T> {
  /// Positions below min(E::position_limit, 2^20): these tests reach long positions elsewhere.
  random_call(std::mt19937_64& rng, typename E::instance i)
      : kernel_case<typename E::instance, T>(rng, std::move(i),
                                             position_draw{0, std::min<std::int64_t>(E::position_limit, 1 << 20)}) {}

  /// Worst |kernel − dense reference| over every head of Q and K, relative to the largest value.
  double worst_relative_error() const {
    return this->worst_relative_error(this->q_out, this->k_out, [&](bool key, const auto& c, const std::vector<double>& x) {
      return reference_head<E>(this->inst, key, c, x);
    });
  }
  using kernel_case<typename E::instance, T>::worst_relative_error;
};

/// Runs body(seed) for `trials` seeds drawn from a fixed `seed`: reproducible, reported by name.
template <class Body>
void property(const char* what, std::uint64_t seed, int trials, Body body) {
  rc::detail::TestParams params;
  params.seed = seed;
  params.maxSuccess = trials;
  const auto result = rc::detail::checkProperty(
      rc::detail::toProperty([&] { body(*rc::gen::arbitrary<std::uint64_t>()); }), rc::detail::TestMetadata{}, params);
  rc::detail::FailureResult failure;
  if (result.match(failure))
    ADD_FAILURE() << what << ": " << failure.description;
  else
    EXPECT_TRUE(result.template is<rc::detail::SuccessResult>()) << what;
}

}  // namespace grape
