// Gradients of the kernels against float64 central finite differences: dL/dx for every rotary
// built-in through cpu::rotate_qk_backward(instance, args) (query and key side), dL/da and dL/db of GRAPE-M's rank-2 generator, and dL/dB of
// a learned orthogonal basis; L = Σ gᵀy with random g.
#include <gtest/gtest.h>

#include <Eigen/Core>
#include <boost/hana/for_each.hpp>
#include <boost/hana/tuple.hpp>
#include <cmath>
#include <random>
#include <vector>

#include "cpu/encode_qk.hpp"
#include "cpu/param_grads.hpp"
#include "grape/builtins.hpp"

namespace grape {
namespace {

std::vector<float> randn(std::mt19937_64& rng, std::size_t n) {
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = g(rng);
  return v;
}

TEST(Backward, InputGradientOfEveryRotaryBuiltinMatchesFiniteDifferences) {
  constexpr auto rotary = boost::hana::tuple_t<rope, rope_interleaved, mrope, axial_2d, xpos, grape_m, string_rope, liere_2d>;
  boost::hana::for_each(rotary, [](auto type) {
    using E = typename decltype(type)::type;
    using G = typename E::group;
    for (std::uint64_t seed = 1; seed <= 5; ++seed) {
      std::mt19937_64 rng(seed);
      const auto inst = E::make(E::random_params(rng));
      const int d = inst.content_dim();
      const std::int64_t tokens = 3, heads = 2;
      std::vector<std::array<std::int64_t, G::rank>> coords(tokens);
      std::uniform_int_distribution<std::int64_t> pos(0, std::min<std::int64_t>(E::position_limit, 100000) - 1);
      for (auto& c : coords)
        for (auto& v : c) v = pos(rng);
      const auto g = randn(rng, tokens * heads * d);
      for (bool is_key : {false, true}) {
        std::vector<float> grad(g.size());
        // The backward of the instance road, on Q or on K alone, contiguous [tokens, heads, d].
        std::vector<std::int64_t> ids;
        for (int a = 0; a < G::rank; ++a)
          for (const auto& c : coords) ids.push_back(c[a]);
        cpu::rotate_qk_args args;
        const cpu::qk_tensor operand{g.data(), grad.data(), heads, tokens * heads * d, 0, heads * d, d};
        (is_key ? args.k : args.q) = operand;
        args.seq_len = tokens;
        args.position_ids = ids.data();
        cpu::rotate_qk_backward(inst, args);
        const auto x0 = randn(rng, tokens * heads * d);
        auto loss = [&](const std::vector<double>& x) {
          double l = 0;
          std::vector<double> y(d);
          for (std::int64_t t = 0; t < tokens; ++t)
            for (std::int64_t h = 0; h < heads; ++h) {
              inst.encode(is_key, coords[t], x.data() + (t * heads + h) * d, y.data());
              for (int c = 0; c < d; ++c) l += g[(t * heads + h) * d + c] * y[c];
            }
          return l;
        };
        std::vector<double> x(x0.begin(), x0.end());
        double worst = 0, scale = 1;
        for (std::size_t i = 0; i < x.size(); ++i) {
          const double step = 1e-3, keep = x[i];
          x[i] = keep + step;
          const double up = loss(x);
          x[i] = keep - step;
          const double down = loss(x);
          x[i] = keep;
          const double fd = (up - down) / (2 * step);
          worst = std::max(worst, std::abs(fd - grad[i]));
          scale = std::max(scale, std::abs(fd));
        }
        EXPECT_LT(worst, 1e-4 * scale) << E::name << (is_key ? " key" : " query") << " seed " << seed;
      }
    }
  });
}

TEST(Backward, GrapeMGeneratorGradientMatchesFiniteDifferences) {
  std::mt19937_64 rng(3);
  const int d = 6;
  const std::int64_t tokens = 4, heads = 2;
  std::normal_distribution<double> n(0.0, 0.5);
  std::vector<double> a(d), b(d);
  for (auto& v : a) v = n(rng);
  for (auto& v : b) v = n(rng);
  const double omega = 0.3;
  const std::vector<std::int64_t> positions = {0, 7, 130, 999};
  const auto x = randn(rng, tokens * heads * d), g = randn(rng, tokens * heads * d);
  std::vector<double> grad_a(d, 0.0), grad_b(d, 0.0);
  cpu::grape_m_param_grad(a, b, omega, x.data(), g.data(), tokens, heads, positions.data(), grad_a.data(), grad_b.data());
  // The loss through the library's representation (exact phase, math/rank2.hpp): independent code.
  auto loss = [&](const std::vector<double>& aa, const std::vector<double>& bb) {
    const rank2_rotation rep(aa, bb, omega);
    double l = 0;
    std::vector<double> xi(d), y(d);
    for (std::int64_t t = 0; t < tokens; ++t)
      for (std::int64_t h = 0; h < heads; ++h) {
        for (int c = 0; c < d; ++c) xi[c] = x[(t * heads + h) * d + c];
        rep.apply({positions[t]}, xi.data(), y.data());
        for (int c = 0; c < d; ++c) l += g[(t * heads + h) * d + c] * y[c];
      }
    return l;
  };
  for (int which = 0; which < 2; ++which)
    for (int i = 0; i < d; ++i) {
      auto p = which == 0 ? a : b;
      const double step = 1e-6;
      p[i] += step;
      const double up = which == 0 ? loss(p, b) : loss(a, p);
      p[i] -= 2 * step;
      const double down = which == 0 ? loss(p, b) : loss(a, p);
      const double fd = (up - down) / (2 * step), got = which == 0 ? grad_a[i] : grad_b[i];
      EXPECT_NEAR(got, fd, 1e-5 * (1 + std::abs(fd))) << (which == 0 ? "a[" : "b[") << i << "]";
    }
}

TEST(Backward, LearnedBasisGradientMatchesFiniteDifferences) {
  std::mt19937_64 rng(4);
  const int d = 6;
  const std::int64_t tokens = 3, heads = 2;
  const Eigen::MatrixXd basis = detail::random_orthogonal(rng, d);
  const std::vector<double> theta = {1.0, 0.2, 0.03};
  const std::vector<std::int64_t> positions = {1, 50, 4000};
  const auto x = randn(rng, tokens * heads * d), g = randn(rng, tokens * heads * d);
  Eigen::MatrixXd grad = Eigen::MatrixXd::Zero(d, d);
  cpu::basis_grad(basis, theta, x.data(), g.data(), tokens, heads, positions.data(), grad);
  auto loss = [&](const Eigen::MatrixXd& B) {
    double l = 0;
    for (std::int64_t t = 0; t < tokens; ++t) {
      Eigen::MatrixXd R = Eigen::MatrixXd::Zero(d, d);
      for (std::size_t j = 0; j < theta.size(); ++j) {
        const double a = positions[t] * theta[j];
        R(2 * j, 2 * j) = R(2 * j + 1, 2 * j + 1) = std::cos(a);
        R(2 * j + 1, 2 * j) = std::sin(a);
        R(2 * j, 2 * j + 1) = -std::sin(a);
      }
      for (std::int64_t h = 0; h < heads; ++h) {
        const Eigen::VectorXd xv = Eigen::Map<const Eigen::VectorXf>(x.data() + (t * heads + h) * d, d).cast<double>();
        const Eigen::VectorXd gv = Eigen::Map<const Eigen::VectorXf>(g.data() + (t * heads + h) * d, d).cast<double>();
        l += gv.dot(B * R * B.transpose() * xv);
      }
    }
    return l;
  };
  for (int i = 0; i < d; ++i)
    for (int j = 0; j < d; ++j) {
      Eigen::MatrixXd B = basis;
      const double step = 1e-6;
      B(i, j) += step;
      const double up = loss(B);
      B(i, j) -= 2 * step;
      const double fd = (up - loss(B)) / (2 * step);
      EXPECT_NEAR(grad(i, j), fd, 1e-5 * (1 + std::abs(fd))) << i << "," << j;
    }
}

}  // namespace
}  // namespace grape
