#pragma once
// scaled_planes: rotation planes times a diagonal GL factor, ρ(t) = diag(e^{t·λ_i})·R(t), keys
// paired by the inverse transpose diag(e^{−t·λ_i})·R(t). xPos: λ_i = ln ζ_i / scale_base, so
// queries grow as ζ^{m/γ} and keys shrink as ζ^{−n/γ}; scores depend on n − m only, but ρ is not
// norm-preserving (the checker reports that law as not holding).
#include <Eigen/Core>
#include <array>
#include <cmath>
#include <cstdint>
#include <vector>

#include "grape/rep/rotation_planes.hpp"
#include "grape/view/scaled_planes.hpp"

namespace grape {

class scaled_planes {
 public:
  static constexpr int rank = 1;
  static constexpr key_pairing pairing = key_pairing::inverse_transpose;

  scaled_planes() = default;
  scaled_planes(const std::vector<double>& inv_freq, std::vector<double> log_scale)
      : planes_(rotation_planes<1>::from_inv_freq(inv_freq)), log_scale_(std::move(log_scale)) {}

  int dim() const { return planes_.dim(); }
  scaled_planes_view view() const { return {planes_.view(), log_scale_.data()}; }

  void apply(const std::array<std::int64_t, 1>& c, const double* x, double* y) const {
    planes_.apply(c, x, y);
    scale(static_cast<double>(c[0]), y);
  }
  void apply_key(const std::array<std::int64_t, 1>& c, const double* x, double* y) const {
    planes_.apply(c, x, y);
    scale(-static_cast<double>(c[0]), y);
  }
  void apply(const std::array<std::int64_t, 1>& c, const float* x, float* y) const {
    apply_view(view(), c.data(), false, x, y);
  }
  void apply_key(const std::array<std::int64_t, 1>& c, const float* x, float* y) const {
    apply_view(view(), c.data(), true, x, y);
  }
  Eigen::MatrixXd generator(int axis) const {
    Eigen::MatrixXd L = planes_.generator(axis);
    for (int i = 0; i < planes_.planes(); ++i) {
      L(2 * i, 2 * i) = log_scale_[i];
      L(2 * i + 1, 2 * i + 1) = log_scale_[i];
    }
    return L;
  }

 private:
  void scale(double t, double* y) const {
    for (int i = 0; i < planes_.planes(); ++i) {
      const double f = std::exp(t * log_scale_[i]);
      y[2 * i] *= f;
      y[2 * i + 1] *= f;
    }
  }

  rotation_planes<1> planes_;
  std::vector<double> log_scale_;
};

}  // namespace grape
