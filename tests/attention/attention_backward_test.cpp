// cpu::attention_backward against float64 central differences of a dense reference: the loss
// L = Σ G∘O with O computed in float64 from the instance's own score (softmax materialized), its
// directional derivatives along random directions — one (token, head) row at a time and the whole
// tensor — compared with ⟨gradient, direction⟩ from the kernel. Q, K, V for every injection kind;
// the bias parameters (ALiBi's slopes, T5's table, FoX's log forget gates) and the rotation's
// frequencies by perturbing the instance itself. Then the errors.
#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <vector>

#include "../kernel_laws/random_call.hpp"
#include "cpu/attention_backward.hpp"
#include "grape/builtins.hpp"
#include "grape/check/attention_call.hpp"
#include "grape/encodings/rotary_table.hpp"
#include "plain_attention.hpp"

namespace grape {
namespace {

/// Σ G∘O in float64 for the call's shapes, mask and positions, with operands q, k, v and instance inst.
template <class I, class T>
double dense_loss(const attention_call<I, T>& c, const I& inst, const std::vector<double>& q,
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
void expect_directional(const char* what, const std::function<double(double)>& f, const std::vector<double>& g,
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
std::vector<std::vector<double>> directions(std::mt19937_64& rng, std::int64_t tokens, std::int64_t heads, int d) {
  std::normal_distribution<double> n(0.0, 1.0);
  std::vector<double> row(static_cast<std::size_t>(tokens * heads * d)), all(row.size());
  const std::int64_t t = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(tokens));
  const std::int64_t h = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(heads));
  for (int x = 0; x < d; ++x) row[(t * heads + h) * d + x] = n(rng);
  for (auto& e : all) e = n(rng);
  return {row, all};
}

struct backward_result {
  std::vector<double> dq, dk, dv, dbias, dfreq;
};

/// Forward, then backward with a random G; the call's operands and G in float64.
template <class K, class I, class T>
backward_result run_backward(const K& kernel_inst, attention_call<I, T>& c, const std::vector<T>& G,
                             std::size_t bias_params = 0, std::size_t planes = 0) {
  cpu::attention(kernel_inst, c.args);
  std::vector<T> dq(c.q.size()), dk(c.k.size()), dv(c.v.size());
  backward_result r;
  r.dbias.assign(bias_params, 0.0);
  r.dfreq.assign(planes, 0.0);
  cpu::attention_grad_args g{G.data(), dq.data(), dk.data(), dv.data(), bias_params ? r.dbias.data() : nullptr,
                             planes ? r.dfreq.data() : nullptr};
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

std::vector<double> moved(const std::vector<double>& x, const std::vector<double>& u, double e) {
  std::vector<double> y = x;
  for (std::size_t i = 0; i < y.size(); ++i) y[i] += e * u[i];
  return y;
}

/// Q, K and V gradients of the kernel on `kernel_inst` against central differences of the dense
/// float64 loss of the call's instance.
template <class K, class I, class T>
void qkv_gradients(std::mt19937_64& rng, const K& kernel_inst, attention_call<I, T>& c) {
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
  attention_call<typename E::instance, T> c(rng, inst, encoding_heads(inst), 90, position_base, 300);
  qkv_gradients(rng, c.inst, c);
}

TEST(AttentionBackward, QKVGradientsMatchCentralDifferences) {
  property("none", 61, 10, [](std::uint64_t s) {
    std::mt19937_64 rng(s);
    attention_call<plain, float> c(rng, plain{{std::array{16, 64, 24}[s % 3]}}, 0, 90, 0, 300);
    qkv_gradients(rng, cpu::no_encoding{c.d}, c);
  });
  property("rope", 62, 10, [](std::uint64_t s) { encoding_qkv_gradients<rope>(s, 1000); });
  property("rope f16", 60, 4, [](std::uint64_t s) { encoding_qkv_gradients<rope, Eigen::half>(s, 1000); });
  property("rope bf16", 59, 4, [](std::uint64_t s) { encoding_qkv_gradients<rope, Eigen::bfloat16>(s, 1000); });
  property("alibi", 63, 10, [](std::uint64_t s) { encoding_qkv_gradients<alibi>(s, 100); });
  property("t5", 64, 8, [](std::uint64_t s) { encoding_qkv_gradients<t5_buckets>(s, 0); });
  property("fox", 65, 8, [](std::uint64_t s) { encoding_qkv_gradients<fox>(s, 0); });
  property("grape_a", 66, 8, [](std::uint64_t s) { encoding_qkv_gradients<grape_a>(s, 50); });
  property("rope_alibi", 67, 8, [](std::uint64_t s) { encoding_qkv_gradients<rope_alibi>(s, 500); });
  property("grape_m", 68, 6, [](std::uint64_t s) { encoding_qkv_gradients<grape_m>(s, 100); });
  // Narrow windows across the 64-token tiles: a tile pair with one visible corner must not be skipped.
  property("window at the tile edges", 69, 12, [](std::uint64_t s) {
    std::mt19937_64 rng(s);
    attention_call<plain, float> c(rng, plain{{16}}, 0, 160, 0, 300);
    c.args.window = std::array{1, 2, 3, 65}[s % 4];
    qkv_gradients(rng, cpu::no_encoding{c.d}, c);
  });
}

/// The bias's parameter gradient against central differences along directions over the
/// parameters (one parameter, then all): `perturbed(inst, u, e)` is the instance with its
/// parameters moved by e·u.
template <class E, class Perturbed>
void bias_gradient(std::uint64_t seed, const Perturbed& perturbed) {
  std::mt19937_64 rng(seed);
  const auto inst = E::make(E::random_params(rng));
  attention_call<typename E::instance, float> c(rng, inst, encoding_heads(inst), 90, 0, 300);
  const std::size_t n = inst.bias.parameter_count();
  const std::vector<float> G = random_like<float>(rng, c.out.size());
  const backward_result r = run_backward(c.inst, c, G, n);
  const std::vector<double> q = as_double(c.q), k = as_double(c.k), v = as_double(c.v), g = as_double(G);
  std::vector<double> one(n), all = as_double(random_like<float>(rng, n));
  one[rng() % n] = 1.0;
  for (const auto& u : {one, all})
    expect_directional("bias", [&](double e) { return dense_loss(c, perturbed(c.inst, u, e), q, k, v, g); }, r.dbias,
                       u, 1e-4);
}

TEST(AttentionBackward, BiasParameterGradientsMatchCentralDifferences) {
  property("alibi slopes", 71, 10, [](std::uint64_t s) {
    bias_gradient<alibi>(s, [](auto inst, const std::vector<double>& u, double e) {
      for (std::size_t h = 0; h < u.size(); ++h) inst.bias.slopes[h] += e * u[h];
      return inst;
    });
  });
  property("t5 table", 72, 8, [](std::uint64_t s) {
    bias_gradient<t5_buckets>(s, [](auto inst, const std::vector<double>& u, double e) {
      for (std::size_t i = 0; i < u.size(); ++i) inst.bias.table[i] += e * u[i];
      return inst;
    });
  });
  property("fox log forget gates", 73, 8, [](std::uint64_t s) {
    bias_gradient<fox>(s, [](auto inst, const std::vector<double>& u, double e) {
      auto& b = inst.bias;  // prefix sums of log f + e·u
      for (int h = 0; h < b.num_heads; ++h) {
        double* F = b.prefix.data() + h * (b.length + 1);
        double shift = 0;
        for (std::int64_t l = 0; l < b.length; ++l) {
          shift += e * u[h * b.length + l];
          F[l + 1] += shift;
        }
      }
      return inst;
    });
  });
}

TEST(AttentionBackward, FrequencyGradientMatchesCentralDifferences) {
  using table = rotary_table<layout_kind::half_split>;
  property("rotary table", 74, 10, [](std::uint64_t s) {
    std::mt19937_64 rng(s);
    const table::params p = table::random_params(rng);
    attention_call<table::instance, float> c(rng, table::make(p), 0, 90, 200, 300);
    const std::size_t planes = p.inv_freq.size();
    const std::vector<float> G = random_like<float>(rng, c.out.size());
    const backward_result r = run_backward(c.inst, c, G, 0, planes);
    const std::vector<double> q = as_double(c.q), k = as_double(c.k), v = as_double(c.v), g = as_double(G);
    std::vector<double> one(planes), all = as_double(random_like<float>(rng, planes));
    one[rng() % planes] = 1.0;
    for (auto u : {one, all}) {
      for (std::size_t i = 0; i < planes; ++i) u[i] *= p.inv_freq[i];  // relative steps: θ spans decades
      expect_directional("inv_freq", [&](double e) {
        table::params moved_p = p;
        moved_p.inv_freq = moved(p.inv_freq, u, e);
        return dense_loss(c, table::make(moved_p), q, k, v, g);
      }, r.dfreq, u, 1e-5);
    }
  });
}

TEST(AttentionBackward, BadArgumentsThrowBeforeAnyWrite) {
  std::mt19937_64 rng(7);
  const auto inst = rope::make(rope::default_params());
  attention_call<rope::instance, float> c(rng, inst, 0, 20, 0, 60);
  cpu::attention(inst, c.args);
  std::vector<float> G(c.out.size(), 1.0f), dq(c.q.size(), 7.0f), dk(c.k.size(), 7.0f), dv(c.v.size(), 7.0f);
  double slope_grad[1];
  const auto expect_error = [&](const auto& encoding, cpu::attention_args a, cpu::attention_grad_args g,
                                const char* what) {
    try {
      cpu::attention_backward(encoding, a, g);
      ADD_FAILURE() << "no error for " << what;
    } catch (const input_error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
    for (const auto* x : {&dq, &dk, &dv}) EXPECT_TRUE(std::all_of(x->begin(), x->end(), [](float y) { return y == 7.0f; }));
  };
  const cpu::attention_grad_args g{G.data(), dq.data(), dk.data(), dv.data(), nullptr, nullptr};
  auto a = c.args;
  a.lse = nullptr;
  expect_error(inst, a, g, "lse must hold the forward's log-sum-exp");
  auto bad = g;
  bad.grad_out = nullptr;
  expect_error(inst, c.args, bad, "grad_out must not be null");
  bad = g;
  bad.grad_k = nullptr;
  expect_error(inst, c.args, bad, "grad_q, grad_k and grad_v must not be null");
  bad = g;
  bad.grad_bias = slope_grad;
  expect_error(inst, c.args, bad, "grad_bias: this encoding has no score bias");
  bad = g;
  bad.grad_inv_freq = slope_grad;
  expect_error(cpu::no_encoding{c.d}, c.args, bad, "grad_inv_freq: only a rotation");
  a = c.args;
  a.window = -1;
  expect_error(inst, a, g, "window must be >= 0");
}

/// FoX asked for a position past its gate sequence: the bias throws inside the threaded loop (16
/// heads: 16 work items, so the loop runs on a thread team); the error reaches the caller and
/// nothing is written, in the forward and in the backward.
TEST(AttentionBackward, ABiasErrorInsideTheThreadedLoopReachesTheCaller) {
  std::mt19937_64 rng(8);
  const auto inst = fox::make({16, 8, std::vector<double>(16 * 64, 1.0)});
  attention_call<fox::instance, float> c(rng, inst, 16, 40, 0, 60);
  cpu::attention(inst, c.args);
  std::vector<float> G(c.out.size(), 1.0f), dq(c.q.size(), 7.0f), dk(c.k.size(), 7.0f), dv(c.v.size(), 7.0f);
  c.offsets.assign(c.first.size(), inst.bias.length);  // past the last gate
  c.ids.clear();
  attention_call<fox::instance, float> past(c);
  past.args.qk.threads = 2;
  std::vector<float> out = past.out;
  EXPECT_THROW(cpu::attention(inst, past.args), input_error);
  EXPECT_EQ(out, past.out);
  EXPECT_THROW(cpu::attention_backward(inst, past.args, {G.data(), dq.data(), dk.data(), dv.data(), nullptr, nullptr}),
               input_error);
  for (const auto* x : {&dq, &dk, &dv}) EXPECT_TRUE(std::all_of(x->begin(), x->end(), [](float y) { return y == 7.0f; }));
}

}  // namespace
}  // namespace grape
