#pragma once
// skew_generators<N>: ρ(c) = Π_k exp(c_k·L_k) with one dense generator L_k per position axis
// (LieRE; a learned orthogonal basis B·planes·Bᵀ is the one-generator case). Each L_k is brought
// to the form B_k·(Σ θ_j J_j)·B_kᵀ once (real Schur form of a skew matrix), so applying ρ costs two
// d×d products and d/2 exact-phase plane rotations per axis.
// The law ρ(m)ᵀρ(n) = ρ(n − m) holds for N > 1 only when the L_k commute: that is the checker's
// to decide, so non-commuting generators are accepted here and rejected by grape::check.
#include <Eigen/Core>
#include <Eigen/Eigenvalues>
#include <array>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "grape/math/phase.hpp"
#include "grape/math/rotate.hpp"
#include "grape/math/sincos.hpp"
#include "grape/rep/concepts.hpp"

namespace grape {

template <int N>
class skew_generators {
 public:
  static constexpr int rank = N;
  static constexpr key_pairing pairing = key_pairing::same;

  skew_generators() = default;
  /// From dense generators, one per axis (each d×d; meant to be skew-symmetric).
  explicit skew_generators(std::array<Eigen::MatrixXd, N> generators) : L_(std::move(generators)) {
    for (int k = 0; k < N; ++k) axes_[k] = decompose(L_[k]);
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

  template <class T>
  void apply(const std::array<std::int64_t, N>& c, const T* x, T* y) const {
    using vec = Eigen::Matrix<T, Eigen::Dynamic, 1>;
    vec v = Eigen::Map<const vec>(x, dim());
    for (int k = N - 1; k >= 0; --k) v = axes_[k].rotate(c[k], v);  // exp(c_0 L_0)…exp(c_{N-1} L_{N-1}) x
    Eigen::Map<vec>(y, dim()) = v;
  }
  template <class T>
  void apply_key(const std::array<std::int64_t, N>& c, const T* x, T* y) const {
    apply(c, x, y);
  }
  Eigen::MatrixXd generator(int axis) const { return L_[axis]; }

 private:
  struct axis_rotation {
    Eigen::MatrixXd basis;
    Eigen::MatrixXf basis_f;
    std::vector<int> first;              // block j rotates basis coordinates (first[j], first[j] + 1)
    std::vector<math::phase_t> turns;    // rate of block j as a turn fraction

    template <class T>
    Eigen::Matrix<T, Eigen::Dynamic, 1> rotate(std::int64_t c, const Eigen::Matrix<T, Eigen::Dynamic, 1>& x) const {
      Eigen::Matrix<T, Eigen::Dynamic, 1> t;
      if constexpr (std::is_same_v<T, float>) t = basis_f.transpose() * x;
      else t = basis.transpose() * x;
      for (std::size_t j = 0; j < first.size(); ++j) {
        const math::phase_t p = math::phase_at(c, turns[j]);
        T s, co;
        if constexpr (std::is_same_v<T, float>) {
          const auto sc = math::sincos_of_phase(p);
          s = sc.sin;
          co = sc.cos;
        } else {
          const double a = math::phase_to_radians(p);
          s = std::sin(a);
          co = std::cos(a);
        }
        const auto r = math::rotate_pair<T>(t[first[j]], t[first[j] + 1], s, co);
        t[first[j]] = r.first;
        t[first[j] + 1] = r.second;
      }
      if constexpr (std::is_same_v<T, float>) return basis_f * t;
      else return basis * t;
    }
  };

  // Real Schur form L = Q T Qᵀ; for a skew L, T is block diagonal with 2×2 blocks θ·J. Only the
  // sub-diagonal is read, so a generator that is not skew is silently made into one: the checker's
  // reference-agreement law (exp of the true L) is what catches that.
  static axis_rotation decompose(const Eigen::MatrixXd& L) {
    axis_rotation a;
    Eigen::RealSchur<Eigen::MatrixXd> schur(L);
    a.basis = schur.matrixU();
    a.basis_f = a.basis.template cast<float>();
    const Eigen::MatrixXd& T = schur.matrixT();
    const double tiny = 1e-12 * (1.0 + L.norm());
    for (int j = 0; j + 1 < T.rows();) {
      if (std::abs(T(j + 1, j)) > tiny) {
        a.first.push_back(j);
        a.turns.push_back(math::turn_fraction_of(T(j + 1, j)));
        j += 2;
      } else {
        j += 1;
      }
    }
    return a;
  }

  std::array<Eigen::MatrixXd, N> L_;
  std::array<axis_rotation, N> axes_;
};

}  // namespace grape
