// The parameter gradients of cpu::attention_backward against float64 central differences of the
// dense reference (backward_check.hpp), along random directions over the parameters: the biases'
// (ALiBi's slopes, T5's table, FoX's log forget gates, gated GRAPE-A's ω and gates, GRAPE-AP's
// projections), the rotation's frequencies and contextual GRAPE-M's frequencies and phases, by
// perturbing the instance itself.
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
  attention_case<typename E::instance, float> c(rng, inst, encoding_heads(inst), 90, 0, 300);
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
  property("grape_ap_relative projections", 79, 8, [](std::uint64_t s) {
    bias_gradient<grape_ap_relative>(s, [](auto inst, const std::vector<double>& u, double e) {
      const path_integral_bias& b = inst.bias;  // p moved, p̂ renormalised
      inst.bias = detail::make_path_integral_bias(b.num_heads, b.dim, b.norm_eps, moved(b.rows, u, e));
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
    attention_case<table::instance, float> c(rng, table::make(p), 0, 90, 200, 300);
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

/// Attention with a rotation sees only differences of positions within a sequence, so moving every
/// position by 10⁶ leaves dL/dθ as it was; the backward counts each token's position from its
/// sequence's start (position_origin::sequence_start), where Σ m·dL/dφ from 0 would carry 10⁶ times
/// the float32 rounding of dL/dφ (without the origin this test fails at 1.5·10⁻² of the gradient).
TEST(AttentionBackward, FrequencyGradientDoesNotDependOnWhereTheSequencesStart) {
  using table = rotary_table<layout_kind::half_split>;
  property("rotary table", 75, 6, [](std::uint64_t s) {
    std::mt19937_64 rng(s);
    const table::params p = table::random_params(rng);
    attention_case<table::instance, float> c(rng, table::make(p), 0, 90, 0, 300);
    const std::size_t planes = p.inv_freq.size();
    const std::vector<float> G = random_like<float>(rng, c.out.size());
    const backward_result near = run_backward(c.inst, c, G, 0, planes);
    auto far_call = c.shifted(1'000'000);
    const backward_result far = run_backward(far_call.inst, far_call, G, 0, planes);
    double scale = 1e-30, diff = 0;
    for (std::size_t i = 0; i < planes; ++i) {
      scale = std::max(scale, std::abs(near.dfreq[i]));
      diff = std::max(diff, std::abs(far.dfreq[i] - near.dfreq[i]));
    }
    RC_LOG() << "dL/dtheta difference " << diff / scale << "\n";
    RC_ASSERT(diff <= 1e-4 * scale);
  });
}

TEST(AttentionBackward, PhaseRotationGradientsMatchCentralDifferences) {
  using E = grape_m_contextual;
  property("grape_m_contextual frequencies and phases", 78, 10, [](std::uint64_t s) {
    std::mt19937_64 rng(s);
    const E::params p = E::random_params(rng);
    attention_case<E::instance, float> c(rng, E::make(p), encoding_heads(E::make(p)), 90, 0, 300);
    const std::size_t freqs = c.inst.freqs.size(), phases = c.inst.phases.size();
    const std::vector<float> G = random_like<float>(rng, c.out.size());
    const backward_result r = run_backward(c.inst, c, G, 0, freqs, phases);
    const std::vector<double> q = as_double(c.q), k = as_double(c.k), v = as_double(c.v), g = as_double(G);
    const auto loss = [&](const std::vector<double>& f, const std::vector<double>& phi) {
      E::instance moved_inst = c.inst;
      moved_inst.freqs = f, moved_inst.phases = phi;
      return dense_loss(c, moved_inst, q, k, v, g);
    };
    double reach = 1;  // the largest |Φ|: a step in θ turns a plane by Φ times as much
    for (double phi : c.inst.phases) reach = std::max(reach, std::abs(phi));
    std::vector<double> one(freqs), all = as_double(random_like<float>(rng, freqs));
    one[rng() % freqs] = 1.0;
    for (auto u : {one, all}) {
      for (std::size_t i = 0; i < freqs; ++i) u[i] *= c.inst.freqs[i] / reach;
      expect_directional("freqs", [&](double e) { return loss(moved(c.inst.freqs, u, e), c.inst.phases); }, r.dfreq, u,
                         1e-4);
    }
    // Φ of a token the call reads (else the gradient is 0 and says little), then every Φ.
    std::vector<double> read(phases), every = as_double(random_like<float>(rng, phases));
    const std::int64_t row = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(c.inst.phase_rows));
    read[row * c.inst.length + c.position(0, static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(c.len[0])))] = 1.0;
    for (const auto& u : {read, every})
      expect_directional("phases", [&](double e) { return loss(c.inst.freqs, moved(c.inst.phases, u, e)); }, r.dphase,
                         u, 1e-4);
  });
}

TEST(AttentionBackward, PhaseGradientsAreRefusedWhereThereAreNoPhases) {
  std::mt19937_64 rng(5);
  const auto inst = rope::make(rope::random_params(rng));
  attention_case<rope::instance, float> c(rng, inst, 0, 20, 0, 100);
  cpu::attention(c.inst, c.args);
  std::vector<float> G(c.out.size(), 1.0f), dq(c.q.size()), dk(c.k.size()), dv(c.v.size());
  double phase = 0;
  try {
    cpu::attention_backward(c.inst, c.args, {G.data(), dq.data(), dk.data(), dv.data(), nullptr, nullptr, &phase});
    FAIL() << "no error";
  } catch (const input_error& e) {
    EXPECT_STREQ(e.what(), "grape: grad_phases: only a rotation by per-token phases (rotate_by_phase) has phases");
  }
}

}  // namespace
}  // namespace grape
