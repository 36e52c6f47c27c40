// GRAPE-M's learnable (one frequency row per key head) and contextual (real phases) rotations
// against a float64 transcription of their formula: forward, backward, dL/dθ and dL/dΦ (central
// finite differences of the float64 forward), the relative law in Φ, the precision of large
// phases, and the argument errors.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "cpu/grape_m.hpp"
#include "grape/detail/error.hpp"
#include "grape/encodings/grape_m_contextual.hpp"

namespace grape::test {
namespace {

using math::layout_kind;

/// One call: Q [batch, seq, hq, dim] and K [batch, seq, hk, dim], contiguous, float32 values.
struct problem {
  int batch = 2, seq = 5, hq = 4, hk = 2, dim = 12, planes = 5;
  layout_kind layout = layout_kind::half_split;
  int freq_rows = 2, phase_rows = 2;
  bool real_phases = true;
  int angle_sign = 1;
  std::vector<double> freqs, phases;
  std::vector<std::int64_t> positions;  // [tokens] with integer positions
  std::vector<float> q, k;

  std::int64_t tokens() const { return static_cast<std::int64_t>(batch) * seq; }

  void fill(std::uint64_t seed, double max_phase = 50.0) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> unit(-1.0, 1.0), rate(0.0, 1.0);
    freqs.resize(static_cast<std::size_t>(freq_rows) * planes);
    for (int r = 0; r < freq_rows; ++r)
      for (int j = 0; j < planes; ++j)  // RoPE-like spread, each row its own
        freqs[r * planes + j] = std::pow(10000.0, -2.0 * j / (2 * planes)) * (0.5 + rate(rng));
    phases.assign(static_cast<std::size_t>(phase_rows) * tokens(), 0.0);
    for (int r = 0; r < phase_rows; ++r)  // an exclusive cumulative sum of non-negative rates per sequence
      for (int b = 0; b < batch; ++b) {
        double phi = max_phase * rate(rng);
        for (int s = 0; s < seq; ++s, phi += 2.0 * rate(rng)) phases[r * tokens() + b * seq + s] = phi;
      }
    positions.resize(tokens());
    for (auto& p : positions) p = static_cast<std::int64_t>(rate(rng) * 1e6);
    q.resize(static_cast<std::size_t>(tokens()) * hq * dim);
    k.resize(static_cast<std::size_t>(tokens()) * hk * dim);
    for (auto& v : q) v = static_cast<float>(unit(rng));
    for (auto& v : k) v = static_cast<float>(unit(rng));
  }

  cpu::grape_m_spec spec() const {
    cpu::grape_m_spec s;
    s.head_dim = dim;
    s.planes = planes;
    s.layout = layout;
    s.freqs = freqs.data();
    s.freq_rows = freq_rows;
    s.phases = real_phases ? phases.data() : nullptr;
    s.phase_rows = phase_rows;
    s.angle_sign = angle_sign;
    return s;
  }

  cpu::rotate_qk_args args(const float* qin, float* qout, const float* kin, float* kout) const {
    cpu::rotate_qk_args a;
    a.q = {qin, qout, hq, static_cast<std::int64_t>(q.size()), static_cast<std::int64_t>(seq) * hq * dim,
           static_cast<std::int64_t>(hq) * dim, dim};
    a.k = {kin, kout, hk, static_cast<std::int64_t>(k.size()), static_cast<std::int64_t>(seq) * hk * dim,
           static_cast<std::int64_t>(hk) * dim, dim};
    a.batch = batch;
    a.seq_len = seq;
    if (!real_phases) a.position_ids = positions.data();
    return a;
  }

  /// The float64 formula: head h (kv = its key head) of token t turned by p·θ[row], `sign` ±1.
  std::vector<double> reference(const std::vector<double>& x, int heads, bool is_q, double sign,
                                const std::vector<double>& theta, const std::vector<double>& phi) const {
    std::vector<double> y = x;
    for (std::int64_t t = 0; t < tokens(); ++t)
      for (int h = 0; h < heads; ++h) {
        const int kv = is_q ? h / (hq / hk) : h;
        const double p = real_phases ? phi[(phase_rows == 1 ? 0 : kv) * tokens() + t]
                                     : static_cast<double>(positions[t]);
        double* v = y.data() + (t * heads + h) * dim;
        for (int j = 0; j < planes; ++j) {
          const int c0 = layout == layout_kind::half_split ? j : 2 * j;
          const int c1 = layout == layout_kind::half_split ? j + planes : 2 * j + 1;
          const double a = sign * angle_sign * p * theta[(freq_rows == 1 ? 0 : kv) * planes + j];
          const double x0 = v[c0], x1 = v[c1];
          v[c0] = x0 * std::cos(a) - x1 * std::sin(a);
          v[c1] = x1 * std::cos(a) + x0 * std::sin(a);
        }
      }
    return y;
  }
};

std::vector<double> widen(const std::vector<float>& v) { return {v.begin(), v.end()}; }

double max_error(const std::vector<float>& got, const std::vector<double>& want) {
  double e = 0;
  for (std::size_t i = 0; i < got.size(); ++i) e = std::max(e, std::abs(got[i] - want[i]));
  return e;
}

void expect_forward_matches(const problem& p, double tolerance) {
  std::vector<float> qo(p.q.size()), ko(p.k.size());
  cpu::grape_m_rotate_qk(p.spec(), p.args(p.q.data(), qo.data(), p.k.data(), ko.data()));
  EXPECT_LE(max_error(qo, p.reference(widen(p.q), p.hq, true, 1, p.freqs, p.phases)), tolerance);
  EXPECT_LE(max_error(ko, p.reference(widen(p.k), p.hk, false, 1, p.freqs, p.phases)), tolerance);
}

TEST(GrapeM, PerHeadFrequencyRowsWithIntegerPositionsMatchTheFormula) {
  problem p;
  p.real_phases = false;
  p.fill(1);  // positions up to 10^6: exact phases
  expect_forward_matches(p, 4e-6);
  p.layout = layout_kind::interleaved;
  p.freq_rows = 1;
  expect_forward_matches(p, 4e-6);   // one shared row: rotate_qk's kernels
  p.freqs[1] = -0.3;                 // a negative frequency (rotate_qk refuses it): the phase body
  expect_forward_matches(p, 4e-6);
}

TEST(GrapeM, RealPhasesPerKeyHeadMatchTheFormula) {
  for (auto layout : {layout_kind::half_split, layout_kind::interleaved})
    for (int rows : {1, 2}) {
      problem p;
      p.layout = layout;
      p.phase_rows = rows;
      p.freq_rows = 3 - rows;
      p.fill(2);
      expect_forward_matches(p, 4e-6);
    }
}

// angle_sign = −1: the authors' apply_rotary_emb turns by −angle.
TEST(GrapeM, NegativeAngleSignTurnsTheOtherWay) {
  for (bool real : {true, false}) {
    problem p;
    p.real_phases = real;
    p.angle_sign = -1;
    p.fill(10);
    expect_forward_matches(p, 4e-6);
    std::vector<float> qo(p.q.size()), ko(p.k.size());
    cpu::grape_m_rotate_qk_backward(p.spec(), p.args(p.q.data(), qo.data(), p.k.data(), ko.data()));
    EXPECT_LE(max_error(qo, p.reference(widen(p.q), p.hq, true, -1, p.freqs, p.phases)), 4e-6);
  }
}

TEST(GrapeM, InPlaceEqualsOutOfPlace) {
  problem p;
  p.fill(3);
  std::vector<float> qo(p.q.size()), ko(p.k.size());
  cpu::grape_m_rotate_qk(p.spec(), p.args(p.q.data(), qo.data(), p.k.data(), ko.data()));
  cpu::grape_m_rotate_qk(p.spec(), p.args(p.q.data(), p.q.data(), p.k.data(), p.k.data()));
  EXPECT_EQ(p.q, qo);
  EXPECT_EQ(p.k, ko);
}

// A phase of 3·10^5 with θ near 1: float32 would lose ~0.02 rad of the angle; grape forms it in
// float64, so the output keeps float32 accuracy.
TEST(GrapeM, LargePhasesKeepFloat32Accuracy) {
  problem p;
  p.fill(4, 3e5);
  expect_forward_matches(p, 4e-6);
  double float32_angle_error = 0;
  for (double phi : p.phases) {
    const float a32 = static_cast<float>(phi) * static_cast<float>(p.freqs[0]);
    float32_angle_error = std::max(float32_angle_error, std::abs(a32 - phi * p.freqs[0]));
  }
  EXPECT_GT(float32_angle_error, 1e-3) << "the case must be one where float32 angles drift";
}

TEST(GrapeM, HalfPrecisionStorageRoundsOnce) {
  problem p;
  p.fill(5);
  std::vector<Eigen::bfloat16> q(p.q.size()), k(p.k.size());
  for (std::size_t i = 0; i < q.size(); ++i) q[i] = Eigen::bfloat16(p.q[i]);
  for (std::size_t i = 0; i < k.size(); ++i) k[i] = Eigen::bfloat16(p.k[i]);
  std::vector<double> qd(q.begin(), q.end()), kd(k.begin(), k.end());
  auto args = p.args(nullptr, nullptr, nullptr, nullptr);
  args.q.in = args.q.out = q.data();
  args.k.in = args.k.out = k.data();
  args.type = cpu::dtype::bf16;
  cpu::grape_m_rotate_qk(p.spec(), args);
  const auto want = p.reference(qd, p.hq, true, 1, p.freqs, p.phases);
  for (std::size_t i = 0; i < q.size(); ++i)  // one bf16 rounding: half an ulp of 2^-8, |y| < 2
    EXPECT_NEAR(static_cast<double>(q[i]), want[i], 1.0 / 128 + 1e-6) << i;
}

TEST(GrapeM, BackwardIsTheTransposedRotation) {
  for (bool real : {true, false}) {
    problem p;
    p.real_phases = real;
    p.fill(6);
    std::vector<float> qo(p.q.size()), ko(p.k.size());
    cpu::grape_m_rotate_qk_backward(p.spec(), p.args(p.q.data(), qo.data(), p.k.data(), ko.data()));
    EXPECT_LE(max_error(qo, p.reference(widen(p.q), p.hq, true, -1, p.freqs, p.phases)), 4e-6);
    EXPECT_LE(max_error(ko, p.reference(widen(p.k), p.hk, false, -1, p.freqs, p.phases)), 4e-6);
  }
}

/// L = Σ g·y of the float64 forward, for finite differences.
double loss(const problem& p, const std::vector<double>& gq, const std::vector<double>& gk,
            const std::vector<double>& theta, const std::vector<double>& phi) {
  const auto yq = p.reference(widen(p.q), p.hq, true, 1, theta, phi);
  const auto yk = p.reference(widen(p.k), p.hk, false, 1, theta, phi);
  double l = 0;
  for (std::size_t i = 0; i < yq.size(); ++i) l += gq[i] * yq[i];
  for (std::size_t i = 0; i < yk.size(); ++i) l += gk[i] * yk[i];
  return l;
}

void expect_param_grads_match(problem p) {
  p.fill(7, 3.0);
  for (auto& m : p.positions) m %= 64;  // finite differences need a loss that is smooth at scale h
  std::mt19937_64 rng(8);
  std::uniform_real_distribution<double> unit(-1.0, 1.0);
  std::vector<float> gq(p.q.size()), gk(p.k.size());
  for (auto& v : gq) v = static_cast<float>(unit(rng));
  for (auto& v : gk) v = static_cast<float>(unit(rng));
  // Both kernels that give the gradients: grape_m_param_grads from the inputs, and the backward
  // with gradients from the rotated outputs (which also turns g back: checked against the formula).
  std::vector<double> dtheta(p.freqs.size(), -1.0), dphi(p.phases.size(), -1.0);
  std::vector<double> fused_dtheta(p.freqs.size(), -1.0), fused_dphi(p.phases.size(), -1.0);
  cpu::grape_m_param_grads(p.spec(), p.args(p.q.data(), nullptr, p.k.data(), nullptr), gq.data(), gk.data(),
                           {dtheta.data(), p.real_phases ? dphi.data() : nullptr});
  std::vector<float> yq(p.q.size()), yk(p.k.size()), dq = gq, dk = gk;
  cpu::grape_m_rotate_qk(p.spec(), p.args(p.q.data(), yq.data(), p.k.data(), yk.data()));
  cpu::grape_m_rotate_qk_backward_with_grads(p.spec(), p.args(dq.data(), dq.data(), dk.data(), dk.data()), yq.data(),
                                             yk.data(), {fused_dtheta.data(), p.real_phases ? fused_dphi.data() : nullptr});
  EXPECT_LE(max_error(dq, p.reference(widen(gq), p.hq, true, -1, p.freqs, p.phases)), 4e-6);
  EXPECT_LE(max_error(dk, p.reference(widen(gk), p.hk, false, -1, p.freqs, p.phases)), 4e-6);
  const auto gqd = widen(gq), gkd = widen(gk);
  // Central difference of L in one entry of θ or Φ (a copy of both, one entry moved by ±h).
  auto central = [&](bool of_theta, std::size_t i, double h) {
    std::vector<double> theta = p.freqs, phi = p.phases;
    double& v = of_theta ? theta[i] : phi[i];
    const double keep = v;
    v = keep + h;
    const double up = loss(p, gqd, gkd, theta, phi);
    v = keep - h;
    return (up - loss(p, gqd, gkd, theta, phi)) / (2 * h);
  };
  for (std::size_t i = 0; i < p.freqs.size(); ++i) {
    const double want = central(true, i, 1e-6 * std::max(1e-3, std::abs(p.freqs[i])));
    EXPECT_NEAR(dtheta[i], want, 1e-4 * (1 + std::abs(want))) << "dθ[" << i << "]";
    EXPECT_NEAR(fused_dtheta[i], want, 1e-4 * (1 + std::abs(want))) << "dθ[" << i << "], with the backward";
  }
  if (!p.real_phases) return;
  for (std::size_t i = 0; i < p.phases.size(); ++i) {
    const double want = central(false, i, 1e-6);
    EXPECT_NEAR(dphi[i], want, 1e-4 * (1 + std::abs(want))) << "dΦ[" << i << "]";
    EXPECT_NEAR(fused_dphi[i], want, 1e-4 * (1 + std::abs(want))) << "dΦ[" << i << "], with the backward";
  }
}

TEST(GrapeM, FrequencyAndPhaseGradientsMatchFiniteDifferences) {
  problem per_head;
  expect_param_grads_match(per_head);
  problem shared;
  shared.freq_rows = shared.phase_rows = 1;
  expect_param_grads_match(shared);
  problem integer;
  integer.real_phases = false;
  expect_param_grads_match(integer);
  problem negative;
  negative.angle_sign = -1;
  expect_param_grads_match(negative);
  negative.real_phases = false;
  expect_param_grads_match(negative);
}

// The relative law in R: every score q_mᵀk_n of a head depends on Φ_n − Φ_m only, so moving all
// phases by one real c leaves every score as it was (to float32 rounding of the rotated vectors).
RC_GTEST_PROP(GrapeM, ScoresDependOnPhaseDifferencesOnly, ()) {
  problem p;
  p.batch = 1;
  p.seq = *rc::gen::inRange(1, 9);
  p.phase_rows = p.freq_rows = *rc::gen::element(1, 2);
  p.layout = *rc::gen::element(layout_kind::half_split, layout_kind::interleaved);
  p.fill(*rc::gen::arbitrary<std::uint32_t>(), 1e3);
  const double shift = *rc::gen::inRange(-100000, 100000) * 0.37;
  auto scores = [&](const std::vector<double>& phases) {
    problem moved = p;
    moved.phases = phases;
    std::vector<float> qo(p.q.size()), ko(p.k.size());
    cpu::grape_m_rotate_qk(moved.spec(), moved.args(p.q.data(), qo.data(), p.k.data(), ko.data()));
    std::vector<double> s;
    for (int h = 0; h < p.hq; ++h)
      for (int m = 0; m < p.seq; ++m)
        for (int n = 0; n < p.seq; ++n) {
          double dot = 0;
          for (int c = 0; c < p.dim; ++c)
            dot += double{qo[(m * p.hq + h) * p.dim + c]} * ko[(n * p.hk + h / (p.hq / p.hk)) * p.dim + c];
          s.push_back(dot);
        }
    return s;
  };
  std::vector<double> moved = p.phases;
  for (auto& v : moved) v += shift;
  const auto a = scores(p.phases), b = scores(moved);
  for (std::size_t i = 0; i < a.size(); ++i)  // |q|, |k| <= √12: float32 rounding of 24 products
    RC_ASSERT(std::abs(a[i] - b[i]) <= 2e-5);
}

// The kernel computes the type's logits: grape_m_contextual's instance (what the checker's laws
// hold for) and cpu::grape_m_rotate_qk on the same frequencies and phases give the same scores.
TEST(GrapeM, KernelScoresAreTheContextualTypesLogits) {
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 8; ++trial) {
    grape_m_contextual::params params = grape_m_contextual::random_params(rng);
    const auto inst = grape_m_contextual::make(params);
    problem p;
    p.batch = 1;
    p.seq = 9;
    p.hq = p.hk = inst.heads();
    p.dim = inst.head_dim;
    p.planes = inst.planes();
    p.freq_rows = inst.freq_rows;
    p.phase_rows = inst.phase_rows;
    p.fill(12 + trial);
    p.freqs = inst.freqs;
    p.phases.assign(static_cast<std::size_t>(p.phase_rows) * p.seq, 0.0);
    for (int r = 0; r < p.phase_rows; ++r)  // the first seq tokens of each row
      for (int t = 0; t < p.seq; ++t) p.phases[r * p.seq + t] = inst.phases[r * inst.length + t];
    std::vector<float> qo(p.q.size()), ko(p.k.size());
    cpu::grape_m_rotate_qk(p.spec(), p.args(p.q.data(), qo.data(), p.k.data(), ko.data()));
    for (int h = 0; h < p.hq; ++h)
      for (int m = 0; m < p.seq; ++m)
        for (int n = 0; n < p.seq; ++n) {
          const std::vector<double> q(p.q.begin() + (m * p.hq + h) * p.dim, p.q.begin() + (m * p.hq + h + 1) * p.dim);
          const std::vector<double> k(p.k.begin() + (n * p.hk + h) * p.dim, p.k.begin() + (n * p.hk + h + 1) * p.dim);
          double kernel = 0;
          for (int c = 0; c < p.dim; ++c)
            kernel += double{qo[(m * p.hq + h) * p.dim + c]} * ko[(n * p.hk + h) * p.dim + c];
          const double type = inst.score(h, q.data(), k.data(), std::array<std::int64_t, 1>{m},
                                         std::array<std::int64_t, 1>{n});
          EXPECT_NEAR(kernel, type, 2e-5 * p.dim) << "trial " << trial << " head " << h << " m " << m << " n " << n;
        }
  }
}

// ---- errors: one grape::input_error naming the argument, nothing written ---------------------

void expect_error(problem p, const std::string& names) {
  std::vector<float> qo(p.q.size(), 7.0f), ko(p.k.size(), 7.0f);
  try {
    cpu::grape_m_rotate_qk(p.spec(), p.args(p.q.data(), qo.data(), p.k.data(), ko.data()));
    ADD_FAILURE() << "no error; expected one naming " << names;
  } catch (const input_error& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind("grape: ", 0), 0u) << what;
    EXPECT_NE(what.find(names), std::string::npos) << what;
  }
  EXPECT_TRUE(std::all_of(qo.begin(), qo.end(), [](float v) { return v == 7.0f; }));
  EXPECT_TRUE(std::all_of(ko.begin(), ko.end(), [](float v) { return v == 7.0f; }));
}

TEST(GrapeM, BadArgumentsAreNamed) {
  problem p;
  p.fill(9);
  problem rows = p;
  rows.freq_rows = 3;
  rows.freqs.resize(3 * p.planes, 0.1);
  expect_error(rows, "freqs: rows must be 1 or the key heads 2");
  problem prow = p;
  prow.phase_rows = 3;
  prow.phases.resize(3 * p.tokens(), 0.0);
  expect_error(prow, "phases: rows must be 1 or the key heads 2");
  problem groups = p;
  groups.hq = 3;
  groups.q.resize(p.tokens() * 3 * p.dim);
  expect_error(groups, "q has 3 heads, not a multiple of k's 2");
  problem nan = p;
  nan.phases[p.tokens() + 3] = std::nan("");
  expect_error(nan, "phases[1][3] is not finite");
  problem inf = p;
  inf.freqs[1] = INFINITY;
  expect_error(inf, "freqs[0][1] is not finite");
  problem sign = p;
  sign.angle_sign = 2;
  expect_error(sign, "angle_sign must be 1 or -1 (got 2)");
  problem planes = p;
  planes.planes = 7;
  expect_error(planes, "planes must be in [1, head_dim / 2 = 6]");
  // Phases and position ids at once.
  std::vector<float> qo(p.q.size()), ko(p.k.size());
  auto args = p.args(p.q.data(), qo.data(), p.k.data(), ko.data());
  args.position_ids = p.positions.data();
  EXPECT_THROW(cpu::grape_m_rotate_qk(p.spec(), args), input_error);
  try {
    cpu::grape_m_rotate_qk(p.spec(), args);
  } catch (const input_error& e) {
    EXPECT_NE(std::string(e.what()).find("positions, offsets"), std::string::npos) << e.what();
  }
  problem short_q = p;  // the addressing checks are rotate_qk's: Q's size names q
  short_q.real_phases = false;
  auto a2 = short_q.args(p.q.data(), qo.data(), p.k.data(), ko.data());
  a2.q.size -= 1;
  try {
    cpu::grape_m_rotate_qk(short_q.spec(), a2);
    ADD_FAILURE() << "no error for a short q";
  } catch (const input_error& e) {
    EXPECT_NE(std::string(e.what()).find("q"), std::string::npos) << e.what();
  }
  // The backward with gradients names the rotated operand it lacks, and writes nothing.
  std::vector<float> dq(p.q.size(), 7.0f), dk(p.k.size(), 7.0f);
  std::vector<double> dtheta(p.freqs.size(), 7.0);
  try {
    cpu::grape_m_rotate_qk_backward_with_grads(p.spec(), p.args(p.q.data(), dq.data(), p.k.data(), dk.data()),
                                               p.q.data(), nullptr, {dtheta.data(), nullptr});
    ADD_FAILURE() << "no error for a missing rotated_k";
  } catch (const input_error& e) {
    EXPECT_NE(std::string(e.what()).find("grape_m: rotated_k is null"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(std::all_of(dq.begin(), dq.end(), [](float v) { return v == 7.0f; }));
  EXPECT_TRUE(std::all_of(dtheta.begin(), dtheta.end(), [](double v) { return v == 7.0; }));
}

}  // namespace
}  // namespace grape::test
