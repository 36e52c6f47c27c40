#pragma once
// Shared by the CUDA flash attention's emulation tests (forward and backward): a scenario, its
// random inputs rounded to the storage type, the float64 dense reference of the forward, and the
// emulation of a launch's grid over a block program.
#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "cuda/flash_checks.hpp"
#include "cuda/host_storage.hpp"
#include "grape/math/bias.hpp"

namespace grape::flash_test {


enum class bias_kind { none, alibi, t5, fox, gated_key, gated_qk };

struct scenario {
  int q_heads = 2, k_heads = 1, v_heads = 1, head_dim = 32, v_dim = 32;
  std::vector<std::int64_t> lengths = {70};
  bool varlen = false;     // cu_seqlens (else padded: every sequence lengths[0] tokens)
  bool positions = false;  // bias positions given per token (an offset per sequence)
  bool causal = true;
  std::int64_t window = 0;
  bias_kind bias = bias_kind::none;
  int rows = 64, cols = 64;
  std::int64_t q_token_pad = 0;  // extra elements per Q token (a strided Q)
};

/// The inputs of a scenario and the float64 reference over their rounded values.
template <class T>
struct flash_case {
  scenario s;
  std::vector<std::int64_t> cu, positions;
  std::int64_t tokens = 0;
  std::vector<T> q, k, v;
  std::vector<float> slopes, t5_table, t5_distances;
  std::vector<double> fox_prefix, omega, key_gate, query_gate;  // FoX's, gated GRAPE-A's over fox_length
  std::int64_t fox_length = 0;
  int t5_buckets = 8, t5_max_distance = 20;

  flash_case(const scenario& sc, std::uint64_t seed) : s(sc) {
    std::mt19937_64 rng(seed);
    cu.push_back(0);
    for (std::size_t b = 0; b < s.lengths.size(); ++b) cu.push_back(cu.back() + (s.varlen ? s.lengths[b] : s.lengths[0]));
    tokens = cu.back();
    std::uniform_int_distribution<std::int64_t> offset(0, 200);
    for (std::size_t b = 0; b + 1 < cu.size(); ++b) {
      const std::int64_t o = s.positions ? offset(rng) : 0;
      for (std::int64_t i = 0; i < cu[b + 1] - cu[b]; ++i) positions.push_back(o + i);
    }
    std::normal_distribution<float> g(0.0f, 1.0f);
    auto fill = [&](std::int64_t n) {
      std::vector<T> x(n);
      for (auto& e : x) e = static_cast<T>(g(rng));
      return x;
    };
    q = fill(tokens * (s.q_heads * s.head_dim + s.q_token_pad));
    k = fill(tokens * s.k_heads * s.head_dim);
    v = fill(tokens * s.v_heads * s.v_dim);
    for (int h = 0; h < s.q_heads; ++h) slopes.push_back(static_cast<float>(math::alibi_slope(h, s.q_heads)));
    for (int i = 0; i < t5_buckets * s.q_heads; ++i) t5_table.push_back(g(rng));
    t5_distances = cuda::t5_distance_table(t5_table.data(), s.q_heads, t5_buckets, t5_max_distance, !s.causal);
    fox_length = 400;
    std::uniform_real_distribution<double> gate(-0.3, 0.0);
    for (int h = 0; h < s.q_heads; ++h) {
      fox_prefix.push_back(0.0);
      for (std::int64_t l = 0; l < fox_length; ++l) fox_prefix.push_back(fox_prefix.back() + gate(rng));
    }
    std::uniform_real_distribution<double> rate(0.0, 0.2);
    for (int h = 0; h < s.q_heads; ++h) omega.push_back(rate(rng));
    for (std::int64_t l = 0; l < s.q_heads * fox_length; ++l) {
      key_gate.push_back(rate(rng));
      query_gate.push_back(rate(rng));
    }
  }

  double load(const T& x) const { return static_cast<double>(cuda::storage<T>::load(x)); }

  double bias_of(int h, std::int64_t m, std::int64_t n) const {
    switch (s.bias) {
      case bias_kind::none: return 0.0;
      case bias_kind::alibi: return -static_cast<double>(slopes[h]) * std::abs(static_cast<double>(m - n));
      case bias_kind::t5:
        return t5_table[static_cast<std::int64_t>(math::t5_bucket(n - m, !s.causal, t5_buckets, t5_max_distance)) *
                            s.q_heads + h];
      case bias_kind::fox: {
        if (n > m) return -std::numeric_limits<double>::infinity();
        const double* f = fox_prefix.data() + h * (fox_length + 1) + 1;
        return f[m] - f[n];
      }
      case bias_kind::gated_key:
      case bias_kind::gated_qk: {
        if (n > m) return -std::numeric_limits<double>::infinity();
        const double q_rate = s.bias == bias_kind::gated_qk ? query_gate[h * fox_length + m] : 0.0;
        return -static_cast<double>(m - n) * omega[h] * (key_gate[h * fox_length + n] + q_rate);
      }
    }
    return 0.0;
  }

  bool sees(std::int64_t i, std::int64_t j) const {
    return (!s.causal || j <= i) && (s.window <= 0 || (i - j < s.window && (s.causal || j - i < s.window)));
  }

  /// Float64 output [tokens, q_heads, v_dim] and log-sum-exp [q_heads, tokens].
  void reference(std::vector<double>& out, std::vector<double>& lse) const {
    out.assign(tokens * s.q_heads * s.v_dim, 0.0);
    lse.assign(tokens * s.q_heads, -std::numeric_limits<double>::infinity());
    const double scale = 1.0 / std::sqrt(static_cast<double>(s.head_dim));
    const std::int64_t q_row = s.q_heads * s.head_dim + s.q_token_pad;
    for (std::size_t b = 0; b + 1 < cu.size(); ++b)
      for (int h = 0; h < s.q_heads; ++h) {
        const int kh = h / (s.q_heads / s.k_heads), vh = h / (s.q_heads / s.v_heads);
        const std::int64_t len = cu[b + 1] - cu[b];
        for (std::int64_t i = 0; i < len; ++i) {
          std::vector<double> w(len, -std::numeric_limits<double>::infinity());
          double best = -std::numeric_limits<double>::infinity();
          for (std::int64_t j = 0; j < len; ++j) {
            if (!sees(i, j)) continue;
            double dot = 0;
            for (int c = 0; c < s.head_dim; ++c)
              dot += load(q[(cu[b] + i) * q_row + h * s.head_dim + c]) *
                     load(k[((cu[b] + j) * s.k_heads + kh) * s.head_dim + c]);
            w[j] = dot * scale + bias_of(h, positions[cu[b] + i], positions[cu[b] + j]);
            best = std::max(best, w[j]);
          }
          if (best == -std::numeric_limits<double>::infinity()) continue;
          double sum = 0;
          for (auto& x : w) sum += (x = std::exp(x - best));
          lse[h * tokens + cu[b] + i] = best + std::log(sum);
          for (std::int64_t j = 0; j < len; ++j)
            for (int c = 0; c < s.v_dim; ++c)
              out[((cu[b] + i) * s.q_heads + h) * s.v_dim + c] +=
                  w[j] / sum * load(v[((cu[b] + j) * s.v_heads + vh) * s.v_dim + c]);
        }
      }
  }

  /// Float64 dL/dQ, dL/dK, dL/dV for dL/dO = dout ([tokens, q_heads, v_dim]): the dense formulas
  /// P = softmax, dV = Pᵀ·dO, dS = P ∘ (dO·Vᵀ − rowsum(P ∘ dO·Vᵀ)), dQ = scale·dS·K, dK = scale·dSᵀ·Q.
  /// dL/dQ, dL/dK, dL/dV in float64, and the size of the terms each dQ/dK entry sums
  /// (scale·Σ_j P_j·(|dP_j| + |D|)·|K_j|): dS = P·(dP − D) cancels when one key takes almost all the
  /// weight, and a float32 kernel's error follows the terms, not the (then tiny) result.
  void reference_grads(const std::vector<T>& dout, std::vector<double>& dq, std::vector<double>& dk,
                       std::vector<double>& dv, std::vector<double>& dq_terms, std::vector<double>& dk_terms) const {
    dq.assign(tokens * s.q_heads * s.head_dim, 0.0);
    dk.assign(tokens * s.k_heads * s.head_dim, 0.0);
    dq_terms.assign(dq.size(), 0.0);
    dk_terms.assign(dk.size(), 0.0);
    dv.assign(tokens * s.v_heads * s.v_dim, 0.0);
    const double scale = 1.0 / std::sqrt(static_cast<double>(s.head_dim));
    const std::int64_t q_row = s.q_heads * s.head_dim + s.q_token_pad;
    for (std::size_t b = 0; b + 1 < cu.size(); ++b)
      for (int h = 0; h < s.q_heads; ++h) {
        const int kh = h / (s.q_heads / s.k_heads), vh = h / (s.q_heads / s.v_heads);
        const std::int64_t len = cu[b + 1] - cu[b], first = cu[b];
        auto qv = [&](std::int64_t i, int c) { return load(q[(first + i) * q_row + h * s.head_dim + c]); };
        auto kv = [&](std::int64_t j, int c) { return load(k[((first + j) * s.k_heads + kh) * s.head_dim + c]); };
        auto vv = [&](std::int64_t j, int c) { return load(v[((first + j) * s.v_heads + vh) * s.v_dim + c]); };
        auto ov = [&](std::int64_t i, int c) { return load(dout[((first + i) * s.q_heads + h) * s.v_dim + c]); };
        for (std::int64_t i = 0; i < len; ++i) {
          std::vector<double> p(len, 0.0), dp(len, 0.0);
          double best = -std::numeric_limits<double>::infinity();
          std::vector<double> w(len, -std::numeric_limits<double>::infinity());
          for (std::int64_t j = 0; j < len; ++j) {
            if (!sees(i, j)) continue;
            double dot = 0;
            for (int c = 0; c < s.head_dim; ++c) dot += qv(i, c) * kv(j, c);
            w[j] = dot * scale + bias_of(h, positions[first + i], positions[first + j]);
            best = std::max(best, w[j]);
          }
          if (best == -std::numeric_limits<double>::infinity()) continue;
          double sum = 0;
          for (std::int64_t j = 0; j < len; ++j) sum += (p[j] = std::exp(w[j] - best));
          double d = 0;
          for (std::int64_t j = 0; j < len; ++j) {
            p[j] /= sum;
            for (int c = 0; c < s.v_dim; ++c) dp[j] += ov(i, c) * vv(j, c);
            d += p[j] * dp[j];
          }
          for (std::int64_t j = 0; j < len; ++j) {
            const double ds = p[j] * (dp[j] - d), ds_terms = p[j] * (std::abs(dp[j]) + std::abs(d));
            for (int c = 0; c < s.v_dim; ++c) dv[((first + j) * s.v_heads + vh) * s.v_dim + c] += p[j] * ov(i, c);
            for (int c = 0; c < s.head_dim; ++c) {
              const std::int64_t qe = ((first + i) * s.q_heads + h) * s.head_dim + c;
              const std::int64_t ke = ((first + j) * s.k_heads + kh) * s.head_dim + c;
              dq[qe] += scale * ds * kv(j, c);
              dk[ke] += scale * ds * qv(i, c);
              dq_terms[qe] += scale * ds_terms * std::abs(kv(j, c));
              dk_terms[ke] += scale * ds_terms * std::abs(qv(i, c));
            }
          }
        }
      }
  }

  cuda::flash_args operands(std::vector<T>& out, std::vector<float>& lse, int* error) const {
    cuda::flash_args ops;
    ops.type = std::is_same_v<T, float> ? kernel::dtype::f32 : std::is_same_v<T, Eigen::half> ? kernel::dtype::f16
                                                                                            : kernel::dtype::bf16;
    ops.q = q.data();
    ops.k = k.data();
    ops.v = v.data();
    ops.out = out.data();
    ops.lse = lse.data();
    ops.q_token_stride = s.q_token_pad ? s.q_heads * s.head_dim + s.q_token_pad : 0;
    ops.q_heads = s.q_heads;
    ops.k_heads = s.k_heads;
    ops.v_heads = s.v_heads;
    ops.head_dim = s.head_dim;
    ops.v_dim = s.v_dim;
    ops.batch = static_cast<std::int64_t>(cu.size()) - 1;
    ops.cu_seqlens = s.varlen ? cu.data() : nullptr;
    ops.seq_len = s.varlen ? *std::max_element(s.lengths.begin(), s.lengths.end()) : s.lengths[0];
    ops.tokens = tokens;
    ops.positions = s.positions ? positions.data() : nullptr;
    ops.causal = s.causal;
    ops.window = s.window;
    ops.error = error;
    return ops;
  }
};

/// f(the scenario's bias functor over the case's arrays).
template <class T, class F>
void with_scores(const flash_case<T>& c, F&& f) {
  const scenario& s = c.s;
  switch (s.bias) {
    case bias_kind::none: return f(cuda::no_scores{});
    case bias_kind::alibi: return f(cuda::alibi_scores{c.slopes.data()});
    case bias_kind::t5: return f(cuda::t5_scores{c.t5_distances.data(), s.q_heads, c.t5_max_distance, !s.causal});
    case bias_kind::fox: return f(cuda::fox_scores{c.fox_prefix.data(), c.fox_length});
    case bias_kind::gated_key: return f(cuda::gated_scores{c.omega.data(), c.key_gate.data(), nullptr, c.fox_length});
    case bias_kind::gated_qk:
      return f(cuda::gated_scores{c.omega.data(), c.key_gate.data(), c.query_gate.data(), c.fox_length});
  }
}

/// Every block of the launch's grid, the program as a launch builds it (cuda::program_of).
template <class T, class Bias>
void emulate(const cuda::flash_args& ops, const cuda::flash_plan& plan, const Bias& bias) {
  cuda::check_flash(ops);
  cuda::check_flash_bias(ops, bias);
  const auto program = cuda::program_of<T>(ops, plan, bias);
  std::vector<double> smem_storage(plan.smem_bytes / sizeof(double) + 1);  // 8-byte aligned
  auto* smem = reinterpret_cast<unsigned char*>(smem_storage.data());
  for (std::int64_t h = 0; h < ops.q_heads; ++h)
    for (std::int64_t b = 0; b < ops.batch; ++b)
      for (std::int64_t x = 0; x < cuda::flash_query_blocks(ops, plan); ++x)
        program.run(x, b, h, cuda::block_shape{plan.threads}, smem);
}

/// The backward's programs over their grids: every key block, then every query block.
template <class T, class Bias>
void emulate_backward(const cuda::flash_args& ops, const cuda::flash_grads& g, const cuda::flash_plan& plan,
                      const Bias& bias) {
  cuda::check_flash_backward(ops, g);
  cuda::check_flash_bias(ops, bias);
  cuda::check_flash_bias_grads(ops, g, bias);
  const auto program = cuda::backward_program_of<T>(ops, g, plan, bias);
  std::vector<double> smem_storage(plan.smem_bytes / sizeof(double) + 1);
  auto* smem = reinterpret_cast<unsigned char*>(smem_storage.data());
  const cuda::block_shape block{plan.threads};
  const std::int64_t blocks = cuda::flash_query_blocks(ops, plan);
  for (std::int64_t g_head = 0; g_head < ops.k_heads; ++g_head)
    for (std::int64_t b = 0; b < ops.batch; ++b)
      for (std::int64_t x = 0; x < blocks; ++x) program.run_keys(x, b, g_head, block, smem);
  for (std::int64_t h = 0; h < ops.q_heads; ++h)
    for (std::int64_t b = 0; b < ops.batch; ++b)
      for (std::int64_t x = 0; x < blocks; ++x) program.run_queries(x, b, h, block, smem);
  if (g.grad_bias)
    for (std::int64_t h = 0; h < ops.q_heads; ++h) program.finish_bias_grads(h);
}

template <class T>
double tolerance() {
  if constexpr (std::is_same_v<T, float>) return 2e-5;
  else if constexpr (std::is_same_v<T, Eigen::half>) return 4e-3;
  else return 3e-2;  // P rounded to bfloat16 (8 bits) before P·V, and the output rounded
}

}  // namespace grape::flash_test
