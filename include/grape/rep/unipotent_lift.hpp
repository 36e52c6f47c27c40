#pragma once
// unipotent_lift: additive GRAPE (GRAPE-A). ρ(t) = exp(t·A) = I + t·A with A = u vᵀ nilpotent
// (vᵀu = 0, so A² = 0), acting on an augmented vector; keys get the paired inverse transpose
// ρ(t)^-T = I − t·v uᵀ, so q̃ᵀk̃ depends only on the offset although ρ is not orthogonal.
// ALiBi with slope β on augmented q̂ = [q; 1; 0], k̂ = [k; 0; 1]: u = −β e_{d+1}, v = e_d.
#include <Eigen/Core>
#include <array>
#include <cstdint>
#include <vector>

#include "grape/rep/concepts.hpp"
#include "grape/view/concepts.hpp"
#include "grape/view/lift.hpp"

namespace grape {

class unipotent_lift {
 public:
  static constexpr int rank = 1;
  static constexpr key_pairing pairing = key_pairing::inverse_transpose;

  unipotent_lift() = default;
  unipotent_lift(std::vector<double> u, std::vector<double> v) : u_(std::move(u)), v_(std::move(v)) {}
  /// The ALiBi lift of a d-dimensional head with slope β (dim() = d + 2).
  static unipotent_lift alibi(int head_dim, double slope) {
    std::vector<double> u(head_dim + 2, 0.0), v(head_dim + 2, 0.0);
    u[head_dim + 1] = -slope;
    v[head_dim] = 1.0;
    return {std::move(u), std::move(v)};
  }

  int dim() const { return static_cast<int>(u_.size()); }

  lift_view view() const { return {u_.data(), v_.data(), dim()}; }

  void apply(const std::array<std::int64_t, 1>& c, const double* x, double* y) const {
    lift(static_cast<double>(c[0]), u_, v_, x, y);
  }
  void apply_key(const std::array<std::int64_t, 1>& c, const double* x, double* y) const {
    lift(-static_cast<double>(c[0]), v_, u_, x, y);  // (I + tA)^-T = I − t v uᵀ
  }
  /// The kernels' element path (the same lift in float, products t·u_i rounded once).
  void apply(const std::array<std::int64_t, 1>& c, const float* x, float* y) const {
    apply_view(view(), c.data(), false, x, y);
  }
  void apply_key(const std::array<std::int64_t, 1>& c, const float* x, float* y) const {
    apply_view(view(), c.data(), true, x, y);
  }
  Eigen::MatrixXd generator(int) const {
    const Eigen::Map<const Eigen::VectorXd> u(u_.data(), dim()), v(v_.data(), dim());
    return u * v.transpose();
  }

 private:
  // y = x + t·p·(rᵀx), in double.
  void lift(double t, const std::vector<double>& p, const std::vector<double>& r, const double* x, double* y) const {
    double dot = 0;
    for (int i = 0; i < dim(); ++i) dot += r[i] * x[i];
    for (int i = 0; i < dim(); ++i) y[i] = x[i] + t * p[i] * dot;
  }

  std::vector<double> u_, v_;
};

}  // namespace grape
