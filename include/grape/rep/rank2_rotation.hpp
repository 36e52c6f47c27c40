#pragma once
// rank2_rotation: multiplicative GRAPE (GRAPE-M) with a rank-2 generator L = ω(a bᵀ − b aᵀ),
// ρ(t) = exp(t·L), applied in O(d) with the closed form of math/rank2.hpp. ω is folded into a.
#include <Eigen/Core>
#include <array>
#include <cmath>
#include <cstdint>
#include <vector>

#include "grape/math/phase.hpp"
#include "grape/math/rank2.hpp"
#include "grape/rep/concepts.hpp"

namespace grape {

class rank2_rotation {
 public:
  static constexpr int rank = 1;
  static constexpr key_pairing pairing = key_pairing::same;

  rank2_rotation() = default;
  rank2_rotation(std::vector<double> a, std::vector<double> b, double omega = 1.0)
      : a_(std::move(a)), b_(std::move(b)) {
    for (double& v : a_) v *= omega;
    double alpha = 0, beta = 0, gamma = 0;
    for (std::size_t i = 0; i < a_.size(); ++i) {
      alpha += a_[i] * a_[i];
      beta += b_[i] * b_[i];
      gamma += a_[i] * b_[i];
    }
    inv_ = {alpha, beta, gamma, std::sqrt(std::max(0.0, alpha * beta - gamma * gamma))};
    half_turn_ = math::turn_fraction_of(inv_.s / 2);
    af_.assign(a_.begin(), a_.end());
    bf_.assign(b_.begin(), b_.end());
  }

  int dim() const { return static_cast<int>(a_.size()); }
  const math::rank2_invariants& invariants() const { return inv_; }

  void apply(const std::array<std::int64_t, 1>& c, const double* x, double* y) const {
    const double h = math::phase_to_radians(math::phase_at(c[0], half_turn_));
    math::rank2_apply<double>(a_.data(), b_.data(), inv_, std::sin(h), std::cos(h), x, y, dim());
  }
  void apply(const std::array<std::int64_t, 1>& c, const float* x, float* y) const {
    const auto sc = math::sincos_of_phase(math::phase_at(c[0], half_turn_));
    math::rank2_apply<float>(af_.data(), bf_.data(), inv_, sc.sin, sc.cos, x, y, dim());
  }
  template <class T>
  void apply_key(const std::array<std::int64_t, 1>& c, const T* x, T* y) const {
    apply(c, x, y);
  }

  Eigen::MatrixXd generator(int) const {
    const Eigen::Map<const Eigen::VectorXd> a(a_.data(), dim()), b(b_.data(), dim());
    return a * b.transpose() - b * a.transpose();
  }

 private:
  std::vector<double> a_, b_;
  std::vector<float> af_, bf_;
  math::rank2_invariants inv_{};
  math::phase_t half_turn_ = 0;
};

}  // namespace grape
