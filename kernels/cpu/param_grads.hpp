#pragma once
// Gradients with respect to learnable parameters of the generic encodings, for L = Σ gᵀy over
// tokens and heads (g = dL/dy):
//   - GRAPE-M rank-2 (y = exp(t·ω(a bᵀ − b aᵀ))x): dL/da, dL/db by forward-mode automatic
//     differentiation (Eigen's AutoDiffScalar) through the closed form, O(d²) per vector;
//   - a learned orthogonal basis (y = B R(t) Bᵀ x): dL/dB in closed form (basis_grad), the
//     Euclidean gradient; keeping B orthogonal (a retraction) is the optimizer's job.
// Angles here are float64 products t·θ, which stay within about 1e-7 rad up to position 2^31: ample
// for a gradient, though not the exact phase the forward kernels use.
#include <Eigen/Core>
#include <cmath>
#include <cstdint>
#include <unsupported/Eigen/AutoDiff>
#include <vector>

namespace grape::cpu {

/// exp(t·ω(a bᵀ − b aᵀ))x by the Rodrigues closed form, generic in the scalar T.
template <class T>
void rank2_rotate_generic(const std::vector<T>& a_raw, const std::vector<T>& b, double omega, double t,
                          const std::vector<T>& x, std::vector<T>& y) {
  const std::size_t d = x.size();
  std::vector<T> a(d);
  for (std::size_t i = 0; i < d; ++i) a[i] = a_raw[i] * omega;
  T alpha(0), beta(0), gamma(0), u(0), v(0);
  for (std::size_t i = 0; i < d; ++i) {
    alpha += a[i] * a[i];
    beta += b[i] * b[i];
    gamma += a[i] * b[i];
    u += a[i] * x[i];
    v += b[i] * x[i];
  }
  using std::cos;
  using std::sin;
  using std::sqrt;
  const T s = sqrt(alpha * beta - gamma * gamma);
  const T h = s * (t / 2);
  const T f1 = 2 * sin(h) * cos(h) / s, f2 = 2 * sin(h) * sin(h) / (s * s);
  const T ca = f1 * v + f2 * (gamma * v - beta * u), cb = -f1 * u + f2 * (gamma * u - alpha * v);
  y.resize(d);
  for (std::size_t i = 0; i < d; ++i) y[i] = x[i] + ca * a[i] + cb * b[i];
}

/// dL/da and dL/db (each d values, accumulated) for x and g of shape [tokens, heads, d] (float32)
/// and one position per token.
inline void grape_m_param_grad(const std::vector<double>& a, const std::vector<double>& b, double omega,
                               const float* x, const float* grad_y, std::int64_t tokens, std::int64_t heads,
                               const std::int64_t* positions, double* grad_a, double* grad_b) {
  const int d = static_cast<int>(a.size());
  using ad = Eigen::AutoDiffScalar<Eigen::VectorXd>;
  std::vector<ad> av(d), bv(d);
  for (int i = 0; i < d; ++i) {
    av[i] = ad(a[i], 2 * d, i);
    bv[i] = ad(b[i], 2 * d, d + i);
  }
  Eigen::VectorXd total = Eigen::VectorXd::Zero(2 * d);
  std::vector<ad> xv(d), yv;
  for (std::int64_t t = 0; t < tokens; ++t)
    for (std::int64_t h = 0; h < heads; ++h) {
      const std::int64_t base = (t * heads + h) * d;
      for (int i = 0; i < d; ++i) xv[i] = ad(x[base + i], Eigen::VectorXd::Zero(2 * d));
      rank2_rotate_generic<ad>(av, bv, omega, static_cast<double>(positions[t]), xv, yv);
      for (int i = 0; i < d; ++i) total += grad_y[base + i] * yv[i].derivatives();
    }
  for (int i = 0; i < d; ++i) {
    grad_a[i] += total[i];
    grad_b[i] += total[d + i];
  }
}

/// dL/dB for y = B R(t) Bᵀ x, R(t) = planes (2j, 2j+1) turned by t·θ_j:
///   dL/dB = Σ g (R Bᵀ x)ᵀ + x (Rᵀ Bᵀ g)ᵀ   (g = dL/dy per vector), written into grad_basis (d×d,
///   column-major like Eigen, accumulated).
inline void basis_grad(const Eigen::MatrixXd& basis, const std::vector<double>& theta, const float* x,
                       const float* grad_y, std::int64_t tokens, std::int64_t heads, const std::int64_t* positions,
                       Eigen::MatrixXd& grad_basis) {
  const int d = static_cast<int>(basis.rows());
  auto rotate = [&](Eigen::VectorXd v, double t, double sign) {
    for (std::size_t j = 0; j < theta.size(); ++j) {
      const double c = std::cos(t * theta[j]), s = sign * std::sin(t * theta[j]);
      const double v0 = v[2 * j], v1 = v[2 * j + 1];
      v[2 * j] = v0 * c - v1 * s;
      v[2 * j + 1] = v1 * c + v0 * s;
    }
    return v;
  };
  for (std::int64_t t = 0; t < tokens; ++t)
    for (std::int64_t h = 0; h < heads; ++h) {
      const std::int64_t base = (t * heads + h) * d;
      const Eigen::VectorXd xv = Eigen::Map<const Eigen::VectorXf>(x + base, d).cast<double>();
      const Eigen::VectorXd gv = Eigen::Map<const Eigen::VectorXf>(grad_y + base, d).cast<double>();
      const double m = static_cast<double>(positions[t]);
      grad_basis += gv * rotate(basis.transpose() * xv, m, 1.0).transpose();
      grad_basis += xv * rotate(basis.transpose() * gv, m, -1.0).transpose();
    }
}

}  // namespace grape::cpu
