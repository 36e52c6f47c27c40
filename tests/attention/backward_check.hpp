#pragma once
// What the attention backward tests share: the loss L = Σ G∘O computed in float64 from the
// instance's own score (softmax materialized), directional central differences of it against
// ⟨gradient, direction⟩ from the kernel, and the kernel's backward on a random call.
#include <rapidcheck.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <type_traits>
#include <vector>

#include "../kernel_laws/random_call.hpp"
#include "cpu/attention_backward.hpp"
#include "grape/check/attention_case.hpp"

namespace grape::backward_check {

/// Σ G∘O in float64 for the call's shapes, mask and positions, with operands q, k, v and instance inst.
template <class I, class T>
double dense_loss(const attention_case<I, T>& c, const I& inst, const std::vector<double>& q,
                  const std::vector<double>& k, const std::vector<double>& v, const std::vector<double>& G) {
  const int d = c.d;
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  std::vector<double> qs(d), logits;
  double loss = 0;
  for (std::size_t b = 0; b < c.first.size(); ++b)
    for (std::int64_t h = 0; h < c.heads; ++h) {
      const std::int64_t kh = h / (c.heads / c.kv_heads);
      const int eh = inst.heads() == 1 ? 0 : static_cast<int>(h);
      for (std::int64_t i = 0; i < c.len[b]; ++i) {
        const std::int64_t ti = c.first[b] + i;
        for (int x = 0; x < d; ++x) qs[x] = scale * q[(ti * c.heads + h) * d + x];
        logits.assign(static_cast<std::size_t>(c.len[b]), -INFINITY);
        double top = -INFINITY;
        for (std::int64_t j = 0; j < c.len[b]; ++j) {
          const bool seen = (!c.args.causal || j <= i) && (c.args.window == 0 || std::abs(i - j) < c.args.window);
          if (!seen) continue;
          const std::int64_t tj = c.first[b] + j;
          logits[j] = inst.score(eh, qs.data(), k.data() + (tj * c.kv_heads + kh) * d,
                                 std::array<std::int64_t, 1>{c.position(b, i)},
                                 std::array<std::int64_t, 1>{c.position(b, j)});
          top = std::max(top, logits[j]);
        }
        double sum = 0;
        for (double x : logits) sum += std::isinf(x) ? 0.0 : std::exp(x - top);
        for (std::int64_t j = 0; j < c.len[b]; ++j) {
          if (std::isinf(logits[j])) continue;
          const double p = std::exp(logits[j] - top) / sum;
          const std::int64_t tj = c.first[b] + j;
          for (int x = 0; x < d; ++x) loss += p * v[(tj * c.kv_heads + kh) * d + x] * G[(ti * c.heads + h) * d + x];
        }
      }
    }
  return loss;
}

template <class T>
std::vector<double> as_double(const std::vector<T>& x) {
  return std::vector<double>(x.begin(), x.end());
}

/// The central difference of f along u (step eps) against ⟨g, u⟩: within `rel` of Σ|g_i u_i|
/// (operands are O(1); rel 1e-3 for float32 storage, the storage's rounding otherwise).
inline void expect_directional(const char* what, const std::function<double(double)>& f, const std::vector<double>& g,
                        const std::vector<double>& u, double eps, double rel = 1e-3) {
  const double up = f(eps), down = f(-eps), fd = (up - down) / (2 * eps);
  double dot = 0, size = 0, reach = 0;
  for (std::size_t i = 0; i < g.size(); ++i) dot += g[i] * u[i], size += std::abs(g[i] * u[i]), reach += std::abs(u[i]);
  RC_LOG() << what << ": central difference " << fd << " kernel " << dot << "\n";
  // Floors: the float32 kernel's absolute error per element (a gradient that is zero in exact
  // arithmetic, e.g. dQ under a window of 1, is the rounding of dP − D), and the float64 loss's
  // own rounding divided by the step.
  RC_ASSERT(std::abs(fd - dot) <= rel * (size + 1e-3 * reach) + 1e-11 * (std::abs(up) + std::abs(down) + 1) / eps);
}

/// Random directions on a tensor [tokens, heads, d]: one (token, head) row, and the whole tensor.
inline std::vector<std::vector<double>> directions(std::mt19937_64& rng, std::int64_t tokens, std::int64_t heads, int d) {
  std::normal_distribution<double> n(0.0, 1.0);
  std::vector<double> row(static_cast<std::size_t>(tokens * heads * d)), all(row.size());
  const std::int64_t t = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(tokens));
  const std::int64_t h = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(heads));
  for (int x = 0; x < d; ++x) row[(t * heads + h) * d + x] = n(rng);
  for (auto& e : all) e = n(rng);
  return {row, all};
}

struct backward_result {
  std::vector<double> dq, dk, dv, dbias, dfreq, dphase;
};

/// Forward, then backward with a random G; the call's operands and G in float64.
template <class K, class I, class T>
backward_result run_backward(const K& kernel_inst, attention_case<I, T>& c, const std::vector<T>& G,
                             std::size_t bias_params = 0, std::size_t planes = 0, std::size_t phases = 0) {
  cpu::attention(kernel_inst, c.args);
  std::vector<T> dq(c.q.size()), dk(c.k.size()), dv(c.v.size());
  backward_result r;
  r.dbias.assign(bias_params, 0.0);
  r.dfreq.assign(planes, 0.0);
  r.dphase.assign(phases, 0.0);
  cpu::attention_grad_args g{G.data(), dq.data(), dk.data(), dv.data(), bias_params ? r.dbias.data() : nullptr,
                             planes ? r.dfreq.data() : nullptr, phases ? r.dphase.data() : nullptr};
  cpu::attention_backward(kernel_inst, c.args, g);
  r.dq = as_double(dq), r.dk = as_double(dk), r.dv = as_double(dv);
  return r;
}

template <class T>
std::vector<T> random_like(std::mt19937_64& rng, std::size_t n) {
  std::normal_distribution<double> g(0.0, 1.0);
  std::vector<T> x(n);
  for (auto& e : x) e = static_cast<T>(g(rng));
  return x;
}

inline std::vector<double> moved(const std::vector<double>& x, const std::vector<double>& u, double e) {
  std::vector<double> y = x;
  for (std::size_t i = 0; i < y.size(); ++i) y[i] += e * u[i];
  return y;
}

/// Q, K and V gradients of the kernel on `kernel_inst` against central differences of the dense
/// float64 loss of the call's instance.
template <class K, class I, class T>
void qkv_gradients(std::mt19937_64& rng, const K& kernel_inst, attention_case<I, T>& c) {
  const double rel = std::is_same_v<T, float> ? 1e-3 : std::is_same_v<T, Eigen::half> ? 1e-2 : 6e-2;
  const std::vector<T> G = random_like<T>(rng, c.out.size());
  const backward_result r = run_backward(kernel_inst, c, G);
  RC_LOG() << "tokens " << c.total << " heads " << c.heads << "/" << c.kv_heads << " causal " << c.args.causal
           << " window " << c.args.window << "\n";
  const std::vector<double> q = as_double(c.q), k = as_double(c.k), v = as_double(c.v), g = as_double(G);
  for (const auto& u : directions(rng, c.total, c.heads, c.d))
    expect_directional("q", [&](double e) { return dense_loss(c, c.inst, moved(q, u, e), k, v, g); }, r.dq, u, 1e-3, rel);
  for (const auto& u : directions(rng, c.total, c.kv_heads, c.d))
    expect_directional("k", [&](double e) { return dense_loss(c, c.inst, q, moved(k, u, e), v, g); }, r.dk, u, 1e-3, rel);
  for (const auto& u : directions(rng, c.total, c.kv_heads, c.d))
    expect_directional("v", [&](double e) { return dense_loss(c, c.inst, q, k, moved(v, u, e), g); }, r.dv, u, 1e-3, rel);
}

template <class E, class T = float>
void encoding_qkv_gradients(std::uint64_t seed, std::int64_t position_base) {
  std::mt19937_64 rng(seed);
  const auto inst = E::make(E::random_params(rng));
  attention_case<typename E::instance, T> c(rng, inst, encoding_heads(inst), 90, position_base, 300);
  qkv_gradients(rng, c.inst, c);
}

}  // namespace grape::backward_check
