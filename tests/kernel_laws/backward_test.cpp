// Gradients of the kernels against float64 central finite differences: dL/dx for every rotary
// built-in through cpu::rotate_qk_backward(instance, args) (query and key side), dL/da, dL/db and dL/dω of GRAPE-M's rank-2 generator, and dL/dB of
// a learned orthogonal basis; L = Σ gᵀy with random g.
#include <gtest/gtest.h>

#include <Eigen/Core>
#include <boost/hana/for_each.hpp>
#include <boost/hana/tuple.hpp>
#include <cmath>
#include <random>
#include <string>
#include <unsupported/Eigen/MatrixFunctions>
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

double dot(const std::vector<double>& u, const std::vector<double>& v) {
  double sum = 0;
  for (std::size_t i = 0; i < u.size(); ++i) sum += u[i] * v[i];
  return sum;
}

/// One case of GRAPE-M's rank-2 parameter gradient: dL/da, dL/db, dL/dω against central differences
/// of a loss through Eigen's matrix exponential of t·ω(a bᵀ − b aᵀ) (independent of the closed form).
void expect_rank2_grads_match(std::vector<double> a, std::vector<double> b, double omega,
                              const std::vector<std::int64_t>& positions, std::uint64_t seed, const char* what) {
  std::mt19937_64 rng(seed);
  const int d = static_cast<int>(a.size());
  const auto tokens = static_cast<std::int64_t>(positions.size());
  const std::int64_t heads = 2;
  const auto x = randn(rng, tokens * heads * d), g = randn(rng, tokens * heads * d);
  cpu::rank2_grads got;
  cpu::rank2_grad(a, b, omega, x.data(), g.data(), tokens, heads, positions.data(), got);
  auto loss = [&](const std::vector<double>& aa, const std::vector<double>& bb, double w) {
    const Eigen::Map<const Eigen::VectorXd> av(aa.data(), d), bv(bb.data(), d);
    const Eigen::MatrixXd generator = w * (av * bv.transpose() - bv * av.transpose());
    double l = 0;
    for (std::int64_t t = 0; t < tokens; ++t) {
      const Eigen::MatrixXd rho = (static_cast<double>(positions[t]) * generator).exp();
      for (std::int64_t h = 0; h < heads; ++h) {
        const std::int64_t base = (t * heads + h) * d;
        const Eigen::VectorXd y = rho * Eigen::Map<const Eigen::VectorXf>(x.data() + base, d).cast<double>();
        l += Eigen::Map<const Eigen::VectorXf>(g.data() + base, d).cast<double>().dot(y);
      }
    }
    return l;
  };
  const double step = 1e-6, omega_step = 1e-7 * omega;  // t·dL/dω is large: a small relative step
  auto expect_near = [&](double analytic, double up, double down, const std::string& name, double h = 1e-6) {
    const double fd = (up - down) / (2 * h);
    EXPECT_NEAR(analytic, fd, 2e-5 * (1 + std::abs(fd))) << what << ": " << name;
  };
  for (int i = 0; i < d; ++i) {
    auto p = a;
    p[i] += step;
    const double up = loss(p, b, omega);
    p[i] -= 2 * step;
    expect_near(got.a[i], up, loss(p, b, omega), "a[" + std::to_string(i) + "]");
    p = b;
    p[i] += step;
    const double up_b = loss(a, p, omega);
    p[i] -= 2 * step;
    expect_near(got.b[i], up_b, loss(a, p, omega), "b[" + std::to_string(i) + "]");
  }
  expect_near(got.omega, loss(a, b, omega + omega_step), loss(a, b, omega - omega_step), "omega", omega_step);
}

TEST(Backward, GrapeMRank2GradientsMatchFiniteDifferences) {
  std::mt19937_64 rng(3);
  std::normal_distribution<double> n(0.0, 0.5);
  auto draw = [&](int d) {
    std::vector<double> v(d);
    for (auto& e : v) e = n(rng);
    return v;
  };
  const auto a = draw(6), b = draw(6);
  expect_rank2_grads_match(a, b, 0.3, {0, 7, 130, 999}, 10, "general");
  // Far positions with a slow rotation: s·t of order 10, from float64 products.
  expect_rank2_grads_match(a, b, 1e-4, {0, 25000, 100000}, 11, "far positions");
  // b nearly parallel to a: s·t below 0.05 at every position, the Taylor branch.
  std::vector<double> near = a;
  for (int i = 0; i < 6; ++i) near[i] += 1e-4 * (i % 2 ? 1 : -1);
  expect_rank2_grads_match(a, near, 0.3, {0, 1, 3, 10}, 12, "nearly parallel");
  // And across the branch boundary: positions where s·t is 0.5, 0.9, 1.1 and 3 times 0.05.
  const double s = 0.3 * std::sqrt(std::max(0.0, dot(a, a) * dot(near, near) - dot(a, near) * dot(a, near)));
  std::vector<std::int64_t> straddle;
  for (double k : {0.5, 0.9, 1.1, 3.0}) straddle.push_back(std::llround(k * 0.05 / s));
  ASSERT_GT(straddle[0], 0);
  expect_rank2_grads_match(a, near, 0.3, straddle, 13, "across the series boundary");
  expect_rank2_grads_match(draw(33), draw(33), 0.05, {5, 77}, 14, "odd head_dim 33");
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
