#pragma once
// Random parameters for the checker: drawn from a seeded engine so every report is reproducible.
#include <Eigen/Core>
#include <random>

#include "grape/detail/random_draws.hpp"

namespace grape::detail {

/// A random orthogonal matrix (QR of a Gaussian matrix; src/header_bodies/random_orthogonal.cpp, so that
/// no translation unit including this header compiles Eigen's QR).
Eigen::MatrixXd random_orthogonal(std::mt19937_64& rng, int n);

}  // namespace grape::detail
