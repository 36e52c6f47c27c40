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
#include "grape/view/concepts.hpp"
#include "grape/view/rank2.hpp"

namespace grape {

class rank2_rotation {
 public:
  static constexpr int rank = 1;
  static constexpr key_pairing pairing = key_pairing::same;

  rank2_rotation() = default;
  rank2_rotation(std::vector<double> a, std::vector<double> b, double omega = 1.0)
      : a_(std::move(a)), b_(std::move(b)), e1_(a_.size()), e2_(a_.size()) {
    for (double& v : a_) v *= omega;
    // s = sqrt(‖a‖²‖b‖² − (aᵀb)²): radians per position in the plane span{a, b} (ω folded in a).
    const double speed = math::rank2_plane(a_.data(), b_.data(), dim(), e1_.data(), e2_.data());
    half_turn_ = math::turn_fraction_of(speed / 2);
    e1f_.assign(e1_.begin(), e1_.end());
    e2f_.assign(e2_.begin(), e2_.end());
  }

  int dim() const { return static_cast<int>(a_.size()); }
  void apply(const std::array<std::int64_t, 1>& c, const double* x, double* y) const {
    const double h = math::phase_to_radians(math::phase_at(c[0], half_turn_));
    math::rank2_apply<double>(e1_.data(), e2_.data(), std::sin(h), std::cos(h), x, y, dim());
  }
  /// The kernels' element path.
  void apply(const std::array<std::int64_t, 1>& c, const float* x, float* y) const {
    apply_view(view(), c.data(), false, x, y);
  }
  rank2_view view() const { return {e1f_.data(), e2f_.data(), half_turn_, dim()}; }
  template <class T>
  void apply_key(const std::array<std::int64_t, 1>& c, const T* x, T* y) const {
    apply(c, x, y);
  }

  Eigen::MatrixXd generator(int) const {
    const Eigen::Map<const Eigen::VectorXd> a(a_.data(), dim()), b(b_.data(), dim());
    return a * b.transpose() - b * a.transpose();
  }

 private:
  std::vector<double> a_, b_;      // a with ω folded in
  std::vector<double> e1_, e2_;    // orthonormal basis of span{a, b} (math::rank2_plane)
  std::vector<float> e1f_, e2f_;   // the kernels' copy
  math::phase_t half_turn_ = 0;
};

}  // namespace grape
