// Gradients of rotate_qk against float64 central finite differences of an independent float64
// forward (cos/sin of m·θ in double): dL/dQ, dL/dK (rotate_qk_backward) and dL/dθ
// (rotate_qk_inv_freq_grad), with L = Σ g·y for a fixed random upstream gradient g.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "rope_reference.hpp"

namespace grape::test {
namespace {

struct grad_case {
  math::layout_kind layout = math::layout_kind::half_split;
  int head_dim = 12, rotary_dim = 8;
  int num_axes = 1;
  double factor = 1.0;
  cpu::dtype type = cpu::dtype::f32;
};

struct problem {
  rotary_spec spec;
  std::int64_t tokens = 6, hq = 3, hk = 1;
  std::vector<std::int64_t> pos;           // [axes, tokens]
  std::vector<double> xq, xk, gq, gk;      // values exactly representable in the storage type
};

problem make_problem(const grad_case& c) {
  problem p;
  rope_case rc;
  rc.head_dim = c.head_dim;
  rc.rotary_dim = c.rotary_dim;
  rc.layout = c.layout;
  rc.num_axes = c.num_axes;
  rc.factor = c.factor;
  p.spec = spec_of(rc);
  p.spec.inv_freq[0] = 0.9;
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> unit(-1, 1);
  std::uniform_int_distribution<std::int64_t> m(0, 60);
  p.pos.resize(c.num_axes * p.tokens);
  for (auto& v : p.pos) v = m(rng);
  byte_buffer tmp(4);
  auto fill = [&](std::vector<double>& v, std::int64_t n) {
    v.resize(n);
    for (auto& e : v) {
      store_value(c.type, tmp, 0, unit(rng));
      e = load_value(c.type, tmp, 0);
    }
  };
  fill(p.xq, p.tokens * p.hq * c.head_dim);
  fill(p.xk, p.tokens * p.hk * c.head_dim);
  fill(p.gq, p.xq.size());
  fill(p.gk, p.xk.size());
  return p;
}

/// L = Σ g·rotate(x) in float64 for the given frequencies.
double loss(const problem& p, const std::vector<double>& inv_freq, const std::vector<double>& xq,
            const std::vector<double>& xk) {
  const rotary_spec& s = p.spec;
  const int half = s.rotary_dim / 2;
  double total = 0;
  auto one = [&](const std::vector<double>& x, const std::vector<double>& g, std::int64_t heads) {
    for (std::int64_t t = 0; t < p.tokens; ++t)
      for (std::int64_t h = 0; h < heads; ++h) {
        const std::int64_t base = (t * heads + h) * s.head_dim;
        for (int ch = s.rotary_dim; ch < s.head_dim; ++ch) total += g[base + ch] * x[base + ch];
        for (int i = 0; i < half; ++i) {
          const int c0 = math::first_channel(s.layout, i, s.rotary_dim);
          const int c1 = math::second_channel(s.layout, i, s.rotary_dim);
          const int axis = s.plane_axis.empty() ? 0 : s.plane_axis[i];
          const double a = static_cast<double>(p.pos[axis * p.tokens + t]) * inv_freq[i];
          const double cs = s.attention_factor * std::cos(a), sn = s.attention_factor * std::sin(a);
          const double x0 = x[base + c0], x1 = x[base + c1];
          total += g[base + c0] * (x0 * cs - x1 * sn) + g[base + c1] * (x1 * cs + x0 * sn);
        }
      }
  };
  one(xq, p.gq, p.hq);
  one(xk, p.gk, p.hk);
  return total;
}

byte_buffer encode(cpu::dtype t, const std::vector<double>& v) {
  byte_buffer b(v.size() * dtype_bytes(t));
  for (std::size_t i = 0; i < v.size(); ++i) store_value(t, b, static_cast<std::int64_t>(i), v[i]);
  return b;
}

cpu::rotate_qk_args args_for(const problem& p, cpu::dtype t, const void* q, void* qo, const void* k,
                             void* ko) {
  cpu::rotate_qk_args a;
  a.type = t;
  const std::int64_t d = p.spec.head_dim;
  a.q = {q, qo, p.hq, p.tokens * p.hq * d, 0, p.hq * d, d};
  a.k = {k, ko, p.hk, p.tokens * p.hk * d, 0, p.hk * d, d};
  a.seq_len = p.tokens;
  a.position_ids = p.pos.data();
  return a;
}

void check(const grad_case& c) {
  const problem p = make_problem(c);
  const double tol = c.type == cpu::dtype::f32 ? 2e-5 : 2e-2;

  // dL/dx by the kernel: backward applied to g.
  const auto gq = encode(c.type, p.gq), gk = encode(c.type, p.gk);
  byte_buffer dq(gq.size()), dk(gk.size());
  cpu::rotate_qk_backward(p.spec, args_for(p, c.type, gq.data(), dq.data(), gk.data(), dk.data()));
  // ... against central differences of the float64 loss (L is linear in x: h = 0.5 is exact).
  const double h = 0.5;
  for (int which = 0; which < 2; ++which) {
    const std::vector<double>& x = which == 0 ? p.xq : p.xk;
    const byte_buffer& d = which == 0 ? dq : dk;
    for (std::size_t j = 0; j < x.size(); ++j) {
      std::vector<double> xp = x, xm = x;
      xp[j] += h;
      xm[j] -= h;
      const double fd = which == 0 ? (loss(p, p.spec.inv_freq, xp, p.xk) - loss(p, p.spec.inv_freq, xm, p.xk)) / (2 * h)
                                   : (loss(p, p.spec.inv_freq, p.xq, xp) - loss(p, p.spec.inv_freq, p.xq, xm)) / (2 * h);
      ASSERT_NEAR(load_value(c.type, d, static_cast<std::int64_t>(j)), fd, tol * std::max(1.0, c.factor))
          << (which == 0 ? "dQ" : "dK") << " element " << j;
    }
  }

  // dL/dθ by the kernel.
  const auto xq = encode(c.type, p.xq), xk = encode(c.type, p.xk);
  std::vector<double> grad(p.spec.rotary_dim / 2);
  cpu::rotate_qk_inv_freq_grad(p.spec, args_for(p, c.type, xq.data(), nullptr, xk.data(), nullptr),
                               gq.data(), gk.data(), grad.data());
  for (std::size_t i = 0; i < grad.size(); ++i) {
    const double step = 1e-6 * std::max(p.spec.inv_freq[i], 1e-3);
    std::vector<double> fp = p.spec.inv_freq, fm = p.spec.inv_freq;
    fp[i] += step;
    fm[i] -= step;
    const double fd = (loss(p, fp, p.xq, p.xk) - loss(p, fm, p.xq, p.xk)) / (2 * step);
    // Scale: Σ m·|g|·|x| bounds the sum's magnitude before cancellation.
    const double scale = 60.0 * p.tokens * (p.hq + p.hk) * 4 * std::max(1.0, c.factor);
    EXPECT_NEAR(grad[i], fd, 2e-7 * scale) << "dθ_" << i;
  }
}

TEST(rotate_qk_grad, half_split_and_interleaved) {
  for (auto lk : {math::layout_kind::half_split, math::layout_kind::interleaved}) {
    grad_case c;
    c.layout = lk;
    check(c);
  }
}

TEST(rotate_qk_grad, attention_factor_multi_axis_and_bf16) {
  grad_case c;
  c.factor = 1.4;
  c.num_axes = 2;
  check(c);
  c.type = cpu::dtype::bf16;
  c.layout = math::layout_kind::interleaved;
  check(c);
}

TEST(rotate_qk_grad, bad_arguments) {
  const problem p = make_problem(grad_case{});
  const auto x = encode(cpu::dtype::f32, p.xq), y = encode(cpu::dtype::f32, p.xk);
  std::vector<double> grad(4);
  const auto args = args_for(p, cpu::dtype::f32, x.data(), nullptr, y.data(), nullptr);
  EXPECT_THROW(cpu::rotate_qk_inv_freq_grad(p.spec, args, x.data(), y.data(), nullptr), input_error);
  EXPECT_THROW(cpu::rotate_qk_inv_freq_grad(p.spec, args, nullptr, y.data(), grad.data()), input_error);
  EXPECT_THROW(cpu::rotate_qk_inv_freq_grad(p.spec, args, x.data(), nullptr, grad.data()), input_error);
}

}  // namespace
}  // namespace grape::test
