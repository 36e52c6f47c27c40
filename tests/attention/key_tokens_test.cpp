// cpu::attention and its backward with K and V on tokens of their own (attention_args::keys): new
// queries against a longer run of keys (the queries the keys' last tokens, causal aligned at the
// ends) and a query chunk against keys anywhere else (no mask), for every kind of encoding the
// fused attention takes that way. The forward against a float64 dense reference of the instance's
// own score; the backward against the same-token call over the keys' tokens whose output gradient
// is zero outside the queries (the same logits, so the same gradients, up to float32 sums).
#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "../kernel_laws/random_call.hpp"
#include "cpu/attention_backward.hpp"
#include "grape/builtins.hpp"
#include "grape/check/attention_case.hpp"
#include "plain_attention.hpp"

namespace grape {
namespace {

/// The larger error, a NaN winning (std::max would drop it).
double worse(double a, double b) { return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b); }

/// A call of `batch` sequences, each with k_len keys at positions key_pos and q_len queries at
/// q_pos, [tokens, heads, d] contiguous and packed (cu_seqlens) or padded.
template <class I>
struct key_call {
  I inst;
  int d;
  std::int64_t heads, kv_heads, batch, q_len, k_len;
  bool varlen, causal;
  std::vector<std::int64_t> q_pos, k_pos, q_cu, k_cu;
  std::vector<float> q, k, v, out, lse;
  cpu::key_tokens keys;
  cpu::attention_args args;

  key_call(std::mt19937_64& rng, I i, std::int64_t h, bool aligned)
      : inst(std::move(i)), d(inst.content_dim()), heads(h), kv_heads(h) {
    std::uniform_int_distribution<int> u(0, 1 << 20);
    const auto pick = [&](std::int64_t lo, std::int64_t hi) { return lo + u(rng) % (hi - lo + 1); };
    if (heads % 2 == 0 && pick(0, 1)) kv_heads = heads / 2;  // GQA
    batch = pick(1, 2);
    varlen = pick(0, 1) == 1;
    k_len = pick(1, 150);
    q_len = pick(1, k_len);
    causal = aligned;
    for (std::int64_t b = 0; b < batch; ++b) {
      if (aligned) {  // the queries are the keys' last tokens, from a base position
        const std::int64_t base = pick(0, 60);
        for (std::int64_t j = 0; j < k_len; ++j) k_pos.push_back(base + j);
        for (std::int64_t i = 0; i < q_len; ++i) q_pos.push_back(base + k_len - q_len + i);
      } else {  // a query chunk after a key chunk, as a ring step meets them
        const std::int64_t base = pick(0, 40);
        for (std::int64_t j = 0; j < k_len; ++j) k_pos.push_back(base + j);
        const std::int64_t after = base + k_len + pick(0, 30);
        for (std::int64_t i = 0; i < q_len; ++i) q_pos.push_back(after + i);
      }
    }
    for (std::int64_t b = 0; b <= batch; ++b) q_cu.push_back(b * q_len), k_cu.push_back(b * k_len);
    std::normal_distribution<float> g(0.0f, 1.0f);
    const auto fill = [&](std::vector<float>& x, std::int64_t n) {
      x.resize(static_cast<std::size_t>(n));
      for (auto& e : x) e = g(rng);
    };
    fill(q, batch * q_len * heads * d);
    fill(k, batch * k_len * kv_heads * d);
    fill(v, batch * k_len * kv_heads * d);
    out.assign(static_cast<std::size_t>(batch * q_len * heads * d), 0.0f);
    lse.assign(static_cast<std::size_t>(batch * q_len * heads), 0.0f);
    const auto tensor = [&](std::vector<float>& x, std::int64_t hh, std::int64_t len) {
      return cpu::qk_tensor{x.data(), nullptr, hh, static_cast<std::int64_t>(x.size()), len * hh * d, hh * d, d};
    };
    args.qk.batch = batch;
    args.qk.q = tensor(q, heads, q_len);
    args.qk.k = tensor(k, kv_heads, k_len);
    args.v = tensor(v, kv_heads, k_len);
    args.qk.position_ids = q_pos.data();
    keys.position_ids = k_pos.data();
    if (varlen) {
      args.qk.cu_seqlens = q_cu.data();
      keys.cu_seqlens = k_cu.data();
    } else {
      args.qk.seq_len = q_len;
      keys.seq_len = k_len;
    }
    args.keys = &keys;
    args.out = out.data();
    args.lse = lse.data();
    args.causal = causal;
  }

  /// max |out − the float64 softmax of the instance's score|, and of the log-sum-exp.
  double worst_error() const {
    const double scale = 1.0 / std::sqrt(static_cast<double>(d));
    double worst = 0;
    std::vector<double> qs(d), kj(d), logits(static_cast<std::size_t>(k_len));
    for (std::int64_t b = 0; b < batch; ++b)
      for (std::int64_t h = 0; h < heads; ++h) {
        const std::int64_t kh = h / (heads / kv_heads);
        const int eh = inst.heads() == 1 ? 0 : static_cast<int>(h);
        for (std::int64_t i = 0; i < q_len; ++i) {
          const std::int64_t ti = b * q_len + i;
          for (int c = 0; c < d; ++c) qs[c] = scale * q[(ti * heads + h) * d + c];
          double top = -INFINITY;
          for (std::int64_t j = 0; j < k_len; ++j) {
            const std::int64_t tj = b * k_len + j;
            logits[j] = -INFINITY;
            if (causal && j - (k_len - q_len) > i) continue;
            for (int c = 0; c < d; ++c) kj[c] = k[(tj * kv_heads + kh) * d + c];
            logits[j] = inst.score(eh, qs.data(), kj.data(), std::array<std::int64_t, 1>{q_pos[ti]},
                                   std::array<std::int64_t, 1>{k_pos[tj]});
            top = std::max(top, logits[j]);
          }
          double sum = 0;
          for (double x : logits) sum += std::isinf(x) ? 0.0 : std::exp(x - top);
          for (int c = 0; c < d; ++c) {
            double o = 0;
            for (std::int64_t j = 0; j < k_len; ++j)
              if (!std::isinf(logits[j])) o += std::exp(logits[j] - top) / sum * v[((b * k_len + j) * kv_heads + kh) * d + c];
            worst = worse(worst, std::abs(out[(ti * heads + h) * d + c] - o));
          }
          if (sum > 0)
            worst = worse(worst, std::abs(lse[h * batch * q_len + ti] - (top + std::log(sum))) / 8);
        }
      }
    return worst;
  }
};

template <class E>
void forward_matches_reference(std::uint64_t seed, bool aligned) {
  std::mt19937_64 rng(seed);
  const auto inst = E::make(E::random_params(rng));
  const std::int64_t h = encoding_heads(inst) > 0 ? encoding_heads(inst) : 4;
  key_call<typename E::instance> c(rng, inst, h, aligned);
  cpu::attention(c.inst, c.args);
  const double worst = c.worst_error();
  RC_LOG() << "batch " << c.batch << " q " << c.q_len << " k " << c.k_len << " varlen " << c.varlen << " error "
           << worst << "\n";
  RC_ASSERT(worst <= 2e-5);
}

TEST(KeyTokens, NewQueriesAgainstLongerKeysMatchTheDenseReference) {
  property("rope", 301, 12, [](std::uint64_t s) { forward_matches_reference<rope>(s, true); });
  property("alibi", 302, 12, [](std::uint64_t s) { forward_matches_reference<alibi>(s, true); });
  property("t5", 303, 10, [](std::uint64_t s) { forward_matches_reference<t5_buckets>(s, true); });
  property("fox", 304, 10, [](std::uint64_t s) { forward_matches_reference<fox>(s, true); });
  property("grape_ap", 305, 6, [](std::uint64_t s) { forward_matches_reference<grape_ap_relative>(s, true); });
  property("grape_a_qk_gated", 306, 8, [](std::uint64_t s) { forward_matches_reference<grape_a_qk_gated>(s, true); });
  property("rope_alibi", 307, 10, [](std::uint64_t s) { forward_matches_reference<rope_alibi>(s, true); });
}

TEST(KeyTokens, AQueryChunkAgainstEarlierKeysMatchesTheDenseReference) {
  property("rope", 311, 10, [](std::uint64_t s) { forward_matches_reference<rope>(s, false); });
  property("alibi", 312, 10, [](std::uint64_t s) { forward_matches_reference<alibi>(s, false); });
  property("fox", 314, 8, [](std::uint64_t s) { forward_matches_reference<fox>(s, false); });
  property("grape_ap", 315, 5, [](std::uint64_t s) { forward_matches_reference<grape_ap_relative>(s, false); });
}

/// The gradients of the new queries' call against the same-token call over the keys' tokens whose
/// last q_len rows are those queries and whose output gradient is zero on the rows before them.
template <class E>
void backward_matches_same_token_call(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const auto inst = E::make(E::random_params(rng));
  const std::int64_t h = encoding_heads(inst) > 0 ? encoding_heads(inst) : 4;
  key_call<typename E::instance> c(rng, inst, h, true);
  cpu::attention(c.inst, c.args);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> dout(c.out.size());
  for (auto& x : dout) x = g(rng);
  constexpr bool bias_grads = requires { kernel::bias_part(c.inst)->parameter_count(); };
  constexpr bool freq_grads = requires { rotation_part(c.inst).rep.frequencies(); };
  std::size_t bias_count = 0, freq_count = 0;
  if constexpr (bias_grads) bias_count = kernel::bias_part(c.inst)->parameter_count();
  if constexpr (freq_grads) freq_count = static_cast<std::size_t>(rotation_part(c.inst).rep.dim() / 2);
  std::vector<float> dq(c.q.size()), dk(c.k.size()), dv(c.v.size());
  std::vector<double> grad_bias(bias_count), grad_freq(freq_count);
  cpu::attention_backward(c.inst, c.args, {dout.data(), dq.data(), dk.data(), dv.data(),
                                           bias_count ? grad_bias.data() : nullptr,
                                           freq_count ? grad_freq.data() : nullptr});

  // The same-token call: every key token is also a query, the first k_len − q_len of them new.
  const std::int64_t L = c.k_len, before = c.k_len - c.q_len, heads = c.heads, d = c.d;
  std::vector<float> q_full(static_cast<std::size_t>(c.batch * L * heads * d)), out_full(q_full.size()),
      dout_full(q_full.size(), 0.0f), lse_full(static_cast<std::size_t>(c.batch * L * heads));
  for (auto& x : q_full) x = g(rng);
  for (std::int64_t b = 0; b < c.batch; ++b)
    for (std::int64_t i = 0; i < c.q_len; ++i)
      for (std::int64_t e = 0; e < heads * d; ++e) {
        const auto from = static_cast<std::size_t>((b * c.q_len + i) * heads * d + e);
        const auto to = static_cast<std::size_t>((b * L + before + i) * heads * d + e);
        q_full[to] = c.q[from];
        dout_full[to] = dout[from];
      }
  cpu::attention_args full = c.args;
  full.keys = nullptr;
  full.qk.q = {q_full.data(), nullptr, heads, static_cast<std::int64_t>(q_full.size()), L * heads * d, heads * d, d};
  full.qk.position_ids = c.k_pos.data();
  full.qk.cu_seqlens = c.varlen ? c.k_cu.data() : nullptr;
  full.qk.seq_len = c.varlen ? 0 : L;
  full.out = out_full.data();
  full.lse = lse_full.data();
  cpu::attention(c.inst, full);
  std::vector<float> dq_full(q_full.size()), dk_full(c.k.size()), dv_full(c.v.size());
  std::vector<double> grad_bias_full(bias_count), grad_freq_full(freq_count);
  cpu::attention_backward(c.inst, full, {dout_full.data(), dq_full.data(), dk_full.data(), dv_full.data(),
                                         bias_count ? grad_bias_full.data() : nullptr,
                                         freq_count ? grad_freq_full.data() : nullptr});
  const auto worst = [](const auto& a, const auto& b, auto index) {
    double w = 0, scale = 1;
    for (std::size_t n = 0; n < a.size(); ++n) {
      w = worse(w, std::abs(static_cast<double>(a[n]) - static_cast<double>(b[index(n)])));
      scale = std::max(scale, std::abs(static_cast<double>(b[index(n)])));
    }
    return w / scale;
  };
  const auto same = [](std::size_t n) { return n; };
  const auto query_row = [&](std::size_t n) {
    const std::int64_t row = static_cast<std::int64_t>(n) / (heads * d), b = row / c.q_len, i = row % c.q_len;
    return static_cast<std::size_t>((b * L + before + i) * heads * d + static_cast<std::int64_t>(n) % (heads * d));
  };
  RC_LOG() << "batch " << c.batch << " q " << c.q_len << " k " << c.k_len << "\n";
  RC_ASSERT(worst(dq, dq_full, query_row) <= 1e-5);
  RC_ASSERT(worst(dk, dk_full, same) <= 1e-5);
  RC_ASSERT(worst(dv, dv_full, same) <= 1e-5);
  RC_ASSERT(worst(grad_bias, grad_bias_full, same) <= 1e-5);
  // dL/dθ: the keys' call counts positions from 0, the same-token call from each sequence's start.
  RC_ASSERT(worst(grad_freq, grad_freq_full, same) <= 1e-4);
}

TEST(KeyTokens, TheBackwardMatchesTheSameTokenCall) {
  property("rope", 321, 10, [](std::uint64_t s) { backward_matches_same_token_call<rope>(s); });
  property("alibi", 322, 10, [](std::uint64_t s) { backward_matches_same_token_call<alibi>(s); });
  property("t5", 323, 8, [](std::uint64_t s) { backward_matches_same_token_call<t5_buckets>(s); });
  property("fox", 324, 8, [](std::uint64_t s) { backward_matches_same_token_call<fox>(s); });
  property("grape_ap", 325, 5, [](std::uint64_t s) { backward_matches_same_token_call<grape_ap_relative>(s); });
  property("grape_a_qk_gated", 326, 6, [](std::uint64_t s) { backward_matches_same_token_call<grape_a_qk_gated>(s); });
  property("rope_alibi", 327, 8, [](std::uint64_t s) { backward_matches_same_token_call<rope_alibi>(s); });
}

TEST(KeyTokens, ALiftOrAPhaseRotationIsRefusedNamingKeys) {
  std::mt19937_64 rng(3);
  const auto inst = grape_a::make(grape_a::random_params(rng));
  key_call<grape_a::instance> c(rng, inst, inst.heads(), true);
  try {
    cpu::attention(c.inst, c.args);
    FAIL() << "no error";
  } catch (const input_error& e) {
    EXPECT_NE(std::string(e.what()).find("keys: a lift (GRAPE-A)"), std::string::npos) << e.what();
  }
}

TEST(KeyTokens, KeysOfTheWrongLayoutAreOneLineErrors) {
  std::mt19937_64 rng(4);
  key_call<plain> c(rng, plain{{16}}, 4, true);
  c.keys.seq_len = c.k_len + 1;  // more keys than K holds
  if (!c.varlen) {
    try {
      cpu::attention(cpu::no_encoding{16}, c.args);
      FAIL() << "no error";
    } catch (const input_error& e) {
      EXPECT_NE(std::string(e.what()).find("k: the strides address"), std::string::npos) << e.what();
    }
  }
  c.keys.seq_len = c.k_len;
  c.keys.offsets = c.k_cu.data();
  EXPECT_THROW(cpu::attention(cpu::no_encoding{16}, c.args), input_error);  // ids and offsets both
}

}  // namespace
}  // namespace grape
