#pragma once
// skew_generators<N>: ρ(c) = Π_k exp(c_k·L_k) with one dense generator L_k per position axis
// (LieRE; a learned orthogonal basis B·planes·Bᵀ is the one-generator case). Each L_k is brought
// to the form B_k·(Σ θ_j J_j)·B_kᵀ once (real Schur form of a skew matrix), so applying ρ costs two
// d×d products and d/2 exact-phase plane rotations per axis.
// The law ρ(m)ᵀρ(n) = ρ(n − m) holds for N > 1 only when the L_k commute: that is the checker's
// to decide, so non-commuting generators are accepted here and rejected by grape::check.
#include <Eigen/Core>
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <vector>

#include "grape/math/phase.hpp"
#include "grape/math/rotate.hpp"
#include "grape/rep/concepts.hpp"
#include "grape/view/concepts.hpp"
#include "grape/view/skew.hpp"

namespace grape {

namespace detail {
/// One axis's generator brought to B·(Σ θ_j J_j)·Bᵀ (real Schur form; src/header_bodies/skew_axis.cpp, so
/// that no translation unit including this header compiles Eigen's eigenvalue solvers).
struct skew_axis {
  Eigen::MatrixXd basis;
  Eigen::MatrixXf basis_f;             // the kernels' copies, column-major: B
  Eigen::MatrixXf basis_tf;            // and Bᵀ
  std::vector<int> first;              // block j rotates basis coordinates (first[j], first[j] + 1)
  std::vector<math::phase_t> turns;    // rate of block j as a turn fraction
  skew_axis_view view() const {
    return {basis_f.data(), basis_tf.data(), first.data(), turns.data(), static_cast<int>(first.size())};
  }
};
/// Only the sub-diagonal of the Schur form is read, so a generator that is not skew is silently
/// made into one: the checker's reference-agreement law (exp of the true L) is what catches that.
skew_axis decompose_skew(const Eigen::MatrixXd& L);
}  // namespace detail

template <int N>
class skew_generators {
 public:
  static constexpr int rank = N;
  static constexpr key_pairing pairing = key_pairing::same;

  skew_generators() = default;
  /// From dense generators, one per axis (each d×d; meant to be skew-symmetric).
  explicit skew_generators(std::array<Eigen::MatrixXd, N> generators) : L_(std::move(generators)) {
    for (int k = 0; k < N; ++k) axes_[k] = detail::decompose_skew(L_[k]);
  }
  /// A learned orthogonal basis: L = B·(Σ θ_j J_j)·Bᵀ on planes (2j, 2j+1) of the basis.
  static skew_generators from_basis(const Eigen::MatrixXd& basis, const std::vector<double>& theta)
    requires(N == 1)
  {
    Eigen::MatrixXd planes = Eigen::MatrixXd::Zero(basis.rows(), basis.cols());
    for (std::size_t j = 0; j < theta.size(); ++j) {
      planes(2 * j + 1, 2 * j) = theta[j];
      planes(2 * j, 2 * j + 1) = -theta[j];
    }
    return skew_generators({Eigen::MatrixXd(basis * planes * basis.transpose())});
  }

  int dim() const { return static_cast<int>(L_[0].rows()); }

  /// The device-safe view the kernels take (valid while this object lives).
  skew_view<N> view() const {
    skew_view<N> v;
    for (int k = 0; k < N; ++k) v.axes[k] = axes_[k].view();
    v.size = dim();
    return v;
  }

  /// exp(c_0 L_0)…exp(c_{N-1} L_{N-1}) x in double.
  void apply(const std::array<std::int64_t, N>& c, const double* x, double* y) const {
    Eigen::VectorXd v = Eigen::Map<const Eigen::VectorXd>(x, dim());
    for (int k = N - 1; k >= 0; --k) {
      const detail::skew_axis& a = axes_[k];
      Eigen::VectorXd t = a.basis.transpose() * v;
      for (std::size_t j = 0; j < a.first.size(); ++j) {
        const double angle = math::phase_to_radians(math::phase_at(c[k], a.turns[j]));
        const auto r = math::rotate_pair<double>(t[a.first[j]], t[a.first[j] + 1], std::sin(angle),
                                                 std::cos(angle));
        t[a.first[j]] = r.first;
        t[a.first[j] + 1] = r.second;
      }
      v = a.basis * t;
    }
    Eigen::Map<Eigen::VectorXd>(y, dim()) = v;
  }
  /// The kernels' element path.
  void apply(const std::array<std::int64_t, N>& c, const float* x, float* y) const {
    apply_view(view(), c.data(), false, x, y);
  }
  template <class T>
  void apply_key(const std::array<std::int64_t, N>& c, const T* x, T* y) const {
    apply(c, x, y);
  }
  Eigen::MatrixXd generator(int axis) const { return L_[axis]; }
  /// The largest ‖(L + Lᵀ)/2‖ over the axes: what apply leaves out of a generator that is not
  /// skew; 0 when that is rounding only (a product B·J·Bᵀ is skew up to a few ulps of ‖L‖). The
  /// checker's report notes it.
  double symmetric_part() const {
    double s = 0;
    for (const auto& L : L_) {
      const double part = (0.5 * (L + L.transpose())).norm();
      if (part > 1e-12 * (1.0 + L.norm())) s = std::max(s, part);
    }
    return s;
  }

 private:
  std::array<Eigen::MatrixXd, N> L_;
  std::array<detail::skew_axis, N> axes_;
};

}  // namespace grape
