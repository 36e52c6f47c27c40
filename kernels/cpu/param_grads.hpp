#pragma once
// Gradients with respect to learnable parameters of the generic encodings, for L = Σ gᵀy over
// tokens and heads (g = dL/dy):
//   - GRAPE-M rank-2 (y = exp(t·ω(a bᵀ − b aᵀ))x): dL/da, dL/db and dL/dω by reverse-mode
//     differentiation of the closed form, O(d) per vector (rank2_grad);
//   - a learned orthogonal basis (y = B R(t) Bᵀ x): dL/dB in closed form (basis_grad), the
//     Euclidean gradient; keeping B orthogonal (a retraction) is the optimizer's job.
// Angles here are float64 products t·θ, which stay within about 1e-7 rad up to position 2^31: ample
// for a gradient, though not the exact phase the forward kernels use.
#include <Eigen/Core>
#include <cmath>
#include <cstdint>
#include <vector>

namespace grape::cpu {

/// dL/d(a, b, ω) of GRAPE-M's rank-2 rotation, accumulated in float64.
struct rank2_grads {
  std::vector<double> a, b;  // d values each
  double omega = 0;
};

namespace detail {

/// f1 = sin(st)/s, f2 = (1 − cos st)/s² and their derivatives with respect to q = s², the
/// functions of the closed form y = x + (f1·v + f2·(γv − βu))·a + (−f1·u + f2·(γu − αv))·b. Near
/// st = 0 the derivatives cancel catastrophically, so a short Taylor series takes over there.
struct rank2_coefficients {
  double f1, f2, df1_dq, df2_dq;
};

inline rank2_coefficients rank2_coefficients_at(double s, double t) {
  const double phi = s * t, phi2 = phi * phi, t2 = t * t;
  if (std::abs(phi) < 0.05) {
    // (φ cos φ − sin φ)/φ³ and (φ sin φ − 2 + 2 cos φ)/φ⁴, to φ⁴ (the next terms are below 1e-12).
    const double g1 = -1.0 / 3 + phi2 / 30 - phi2 * phi2 / 840;
    const double g2 = -1.0 / 12 + phi2 / 180 - phi2 * phi2 / 6720;
    return {t * (1 - phi2 / 6 + phi2 * phi2 / 120), t2 * (0.5 - phi2 / 24 + phi2 * phi2 / 720), t2 * t * g1 / 2,
            t2 * t2 * g2 / 2};
  }
  const double sin_phi = std::sin(phi), cos_phi = std::cos(phi), half = std::sin(phi / 2), s2 = s * s;
  return {sin_phi / s, 2 * half * half / s2, (phi * cos_phi - sin_phi) / (2 * s2 * s),
          (phi * sin_phi - 4 * half * half) / (2 * s2 * s2)};
}

}  // namespace detail

/// Adds dL/da, dL/db and dL/dω for x and g of shape [tokens, heads, d] (float32, dense) and one
/// position per token; a and b are the parameters as given (ω not folded in).
inline void rank2_grad(const std::vector<double>& a_raw, const std::vector<double>& b, double omega, const float* x,
                       const float* grad_y, std::int64_t tokens, std::int64_t heads, const std::int64_t* positions,
                       rank2_grads& out) {
  const int d = static_cast<int>(a_raw.size());
  const Eigen::Map<const Eigen::VectorXd> b_v(b.data(), d);
  const Eigen::VectorXd a = omega * Eigen::Map<const Eigen::VectorXd>(a_raw.data(), d);
  const double alpha = a.squaredNorm(), beta = b_v.squaredNorm(), gamma = a.dot(b_v);
  const double s = std::sqrt(std::max(alpha * beta - gamma * gamma, 0.0));
  // dL/da = Σ ca·g + Gu·x + (2Gα)·a + Gγ·b and dL/db = Σ cb·g + Gv·x + (2Gβ)·b + Gγ·a: the vector
  // terms accumulate per vector, the scalar ones once.
  Eigen::VectorXd da = Eigen::VectorXd::Zero(d), db = Eigen::VectorXd::Zero(d);
  double g_alpha = 0, g_beta = 0, g_gamma = 0;
  for (std::int64_t t = 0; t < tokens; ++t) {
    const auto c = detail::rank2_coefficients_at(s, static_cast<double>(positions[t]));
    for (std::int64_t h = 0; h < heads; ++h) {
      const std::int64_t base = (t * heads + h) * d;
      const Eigen::VectorXd xv = Eigen::Map<const Eigen::VectorXf>(x + base, d).cast<double>();
      const Eigen::VectorXd gv = Eigen::Map<const Eigen::VectorXf>(grad_y + base, d).cast<double>();
      const double u = a.dot(xv), v = b_v.dot(xv), ga = gv.dot(a), gb = gv.dot(b_v);
      const double ca = c.f1 * v + c.f2 * (gamma * v - beta * u), cb = -c.f1 * u + c.f2 * (gamma * u - alpha * v);
      const double l1 = ga * v - gb * u, l2 = ga * (gamma * v - beta * u) + gb * (gamma * u - alpha * v);
      const double dq = l1 * c.df1_dq + l2 * c.df2_dq;  // dL/d(s²), s² = αβ − γ²
      const double gu = -ga * c.f2 * beta + gb * (c.f2 * gamma - c.f1);
      const double gv_ = ga * (c.f1 + c.f2 * gamma) - gb * c.f2 * alpha;
      g_alpha += -gb * c.f2 * v + dq * beta;
      g_beta += -ga * c.f2 * u + dq * alpha;
      g_gamma += c.f2 * (ga * v + gb * u) - 2 * gamma * dq;
      da += ca * gv + gu * xv;
      db += cb * gv + gv_ * xv;
    }
  }
  da += 2 * g_alpha * a + g_gamma * b_v;
  db += 2 * g_beta * b_v + g_gamma * a;
  if (out.a.size() != a_raw.size()) out.a.assign(a_raw.size(), 0.0);
  if (out.b.size() != b.size()) out.b.assign(b.size(), 0.0);
  for (int i = 0; i < d; ++i) {
    out.a[i] += omega * da[i];  // a = ω·a_raw
    out.b[i] += db[i];
    out.omega += a_raw[i] * da[i];
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
