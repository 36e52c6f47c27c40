#pragma once
// A representation written from scratch (docs/tutorial.md, part 2): the channels in blocks of
// four, each block read as a quaternion and turned by exp(m·θ_b·u_b) — a rotation in two planes at
// once about a fixed unit axis u_b, which mixes all four channels. ρ(m)ρ(n) = ρ(m + n) because each
// block turns about one fixed axis; ρ is orthogonal because the quaternion has norm 1.
#include <Eigen/Core>
#include <array>
#include <cmath>
#include <cstdint>
#include <vector>

#include "grape/math/phase.hpp"
#include "grape/rep/concepts.hpp"
#include "grape/view/concepts.hpp"
#include "quaternion_view.hpp"

class quaternion_turns {
 public:
  static constexpr int rank = 1;                                           // positions on one axis
  static constexpr grape::key_pairing pairing = grape::key_pairing::same;  // orthogonal: κ = ρ

  struct block {
    double theta;                // radians per position
    std::array<double, 3> axis;  // any non-zero vector; normalised here
  };

  quaternion_turns() = default;
  explicit quaternion_turns(const std::vector<block>& blocks) {
    for (const block& b : blocks) {
      const double n = std::sqrt(b.axis[0] * b.axis[0] + b.axis[1] * b.axis[1] + b.axis[2] * b.axis[2]);
      theta_.push_back(b.theta);
      turns_.push_back(grape::math::turn_fraction_of(b.theta));  // exact phase at any position
      for (double a : b.axis) axes_.push_back(a / n), axes_f_.push_back(static_cast<float>(a / n));
    }
  }

  int dim() const { return 4 * static_cast<int>(theta_.size()); }

  /// The view the kernels take (valid while this object lives).
  quaternion_view view() const { return {turns_.data(), axes_f_.data(), static_cast<int>(theta_.size())}; }

  /// The element function in float64: the checker's laws run it.
  void apply(const std::array<std::int64_t, 1>& c, const double* x, double* y) const {
    for (std::size_t b = 0; b < theta_.size(); ++b) {
      const double a = grape::math::phase_to_radians(grape::math::phase_at(c[0], turns_[b]));
      turn_block(std::cos(a), std::sin(a), &axes_[3 * b], x + 4 * b, y + 4 * b);
    }
  }
  /// In float32 through the view: the code the kernels run, which float32_agreement checks.
  void apply(const std::array<std::int64_t, 1>& c, const float* x, float* y) const {
    grape::apply_view(view(), c.data(), false, x, y);
  }
  /// The key action κ: for an orthogonal ρ, the same turn (ρ(m)ᵀρ(n) = ρ(n − m)).
  template <class T>
  void apply_key(const std::array<std::int64_t, 1>& c, const T* x, T* y) const {
    apply(c, x, y);
  }

  /// L with ρ(m) = exp(m·L), for the checker's float64 reference: block b is θ_b times the matrix
  /// of x ↦ u_b ⊗ x, which is skew and squares to −1, so exp(φ·U) = cos φ + sin φ·U.
  Eigen::MatrixXd generator(int) const {
    Eigen::MatrixXd L = Eigen::MatrixXd::Zero(dim(), dim());
    for (std::size_t b = 0; b < theta_.size(); ++b) {
      const double t = theta_[b], u1 = axes_[3 * b], u2 = axes_[3 * b + 1], u3 = axes_[3 * b + 2];
      Eigen::Matrix4d U;
      U << 0, -u1, -u2, -u3,
           u1, 0, -u3, u2,
           u2, u3, 0, -u1,
           u3, -u2, u1, 0;
      L.block<4, 4>(4 * b, 4 * b) = t * U;
    }
    return L;
  }

 private:
  std::vector<double> theta_;
  std::vector<grape::math::phase_t> turns_;
  std::vector<double> axes_;  // [blocks][3], unit
  std::vector<float> axes_f_;  // the view's copy
};

static_assert(grape::RepresentationOfRank<quaternion_turns, 1>);
static_assert(grape::KernelRepresentation<quaternion_turns>);
