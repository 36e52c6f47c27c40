// The parameter gradients of cpu::attention_backward against float64 central differences of the
// dense reference (backward_check.hpp), along random directions over the parameters: the biases'
// (ALiBi's slopes, T5's table, FoX's log forget gates, gated GRAPE-A's ω and gates) and the
// rotation's frequencies, by perturbing the instance itself.
#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <random>
#include <vector>

#include "backward_check.hpp"
#include "grape/builtins.hpp"
#include "grape/encodings/rotary_table.hpp"

namespace grape {
namespace {

using namespace backward_check;

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

/// A gated GRAPE-A instance with the values its bias holds (ω_h, then the key and the query gates)
/// moved by e·u.
template <class I>
I gated_values_moved(I inst, const std::vector<double>& u, double e) {
  auto& b = inst.bias;
  std::size_t at = 0;
  for (std::vector<double>* values : {&b.omega, &b.key_gate, &b.query_gate})
    for (double& x : *values) x += e * u[at++];
  return inst;
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
  property("grape_a_qk_gated omega and gates", 76, 8, [](std::uint64_t s) {
    bias_gradient<grape_a_qk_gated>(s, [](auto inst, const std::vector<double>& u, double e) {
      return gated_values_moved(std::move(inst), u, e);
    });
  });
  property("grape_a_key_gated omega and gates", 77, 6, [](std::uint64_t s) {
    bias_gradient<grape_a_key_gated>(s, [](auto inst, const std::vector<double>& u, double e) {
      return gated_values_moved(std::move(inst), u, e);
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

}  // namespace
}  // namespace grape
