// cpu::attention against a float64 dense reference built from the encoding's own score
// (instance.score: the encoded q·k plus the bias, one pair at a time), softmax materialized:
// every injection kind, padded and varlen batches crossing the 64-token tiles, causal and not,
// sliding windows, GQA, ids and offsets, f32/f16/bf16; shift invariance of the output for the
// relative encodings; bad arguments.
#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "../kernel_laws/random_call.hpp"
#include "cpu/attention.hpp"
#include "grape/builtins.hpp"

namespace grape {
namespace {

/// A random attention call: contiguous [tokens, heads, d] operands, padded or varlen.
template <class I, class T>
struct attention_case {
  I inst;
  int d = 0;
  std::int64_t heads = 0, kv_heads = 0, total = 0;
  std::vector<std::int64_t> cu, offsets, ids, first, len;
  std::vector<T> q, k, v, out;
  std::vector<float> lse;
  cpu::attention_args args;

  attention_case(std::mt19937_64& rng, I i, std::int64_t encoding_heads, std::int64_t max_len, std::int64_t position_base)
      : inst(std::move(i)), d(inst.content_dim()) {
    std::uniform_int_distribution<int> u(0, 1 << 20);
    const auto pick = [&](int lo, int hi) { return lo + u(rng) % (hi - lo + 1); };
    heads = encoding_heads > 0 ? encoding_heads : pick(1, 4) * 2;
    kv_heads = heads;
    for (std::int64_t g = pick(1, 4); g > 0; --g)
      if (heads % g == 0) { kv_heads = heads / g; break; }
    const std::int64_t batch = pick(1, 2);
    const bool varlen = pick(0, 1) == 1;
    const std::int64_t seq = pick(1, static_cast<int>(max_len));
    std::int64_t at = 0;
    for (std::int64_t b = 0; b < batch; ++b) {
      first.push_back(at);
      len.push_back(varlen ? pick(0, static_cast<int>(max_len)) : seq);
      at += len.back();
    }
    total = at;
    cu = first;
    cu.push_back(total);
    std::normal_distribution<double> g(0.0, 1.0);
    const auto fill = [&](std::vector<T>& x, std::int64_t n) {
      x.resize(static_cast<std::size_t>(n));
      for (auto& e : x) e = static_cast<T>(g(rng));
    };
    fill(q, total * heads * d);
    fill(k, total * kv_heads * d);
    fill(v, total * kv_heads * d);
    out.assign(static_cast<std::size_t>(total * heads * d), T(0));
    lse.assign(static_cast<std::size_t>(total * heads), 0.0f);
    auto& a = args.qk;
    a.type = dtype_of<T>();
    a.batch = batch;
    if (varlen) a.cu_seqlens = cu.data();
    else a.seq_len = seq;
    const auto tensor = [&](const std::vector<T>& x, std::int64_t h) {
      return cpu::qk_tensor{x.data(), nullptr, h, static_cast<std::int64_t>(x.size()), seq * h * d, h * d, d};
    };
    a.q = tensor(q, heads);
    a.k = tensor(k, kv_heads);
    args.v = tensor(v, kv_heads);
    const int mode = pick(0, 2);
    if (mode == 1) {
      for (std::int64_t b = 0; b < batch; ++b) offsets.push_back(position_base + pick(0, 50));
      a.offsets = offsets.data();
    } else if (mode == 2) {
      for (std::int64_t t = 0; t < total; ++t) ids.push_back(position_base + pick(0, 3 * static_cast<int>(max_len)));
      a.position_ids = ids.data();
    }
    args.out = out.data();
    args.lse = lse.data();
    args.causal = pick(0, 1) == 1;
    args.window = pick(0, 2) == 0 ? pick(1, 80) : 0;
  }

  std::int64_t position(std::int64_t b, std::int64_t i) const {
    if (!ids.empty()) return ids[first[b] + i];
    return offsets.empty() ? i : offsets[b] + i;
  }

  /// Worst |out − reference| (and |lse − reference|) over every row, in float64.
  double worst_error() const {
    const double scale = 1.0 / std::sqrt(static_cast<double>(d));
    double worst = 0;
    std::vector<double> qs(d), kj(d), logits;
    for (std::size_t b = 0; b < first.size(); ++b)
      for (std::int64_t h = 0; h < heads; ++h) {
        const std::int64_t kh = h / (heads / kv_heads);
        const int eh = inst.heads() == 1 ? 0 : static_cast<int>(h);
        for (std::int64_t i = 0; i < len[b]; ++i) {
          const std::int64_t ti = first[b] + i;
          for (int c = 0; c < d; ++c) qs[c] = scale * static_cast<double>(q[(ti * heads + h) * d + c]);
          logits.assign(static_cast<std::size_t>(len[b]), -INFINITY);
          double top = -INFINITY;
          for (std::int64_t j = 0; j < len[b]; ++j) {
            const bool seen = (!args.causal || j <= i) && (args.window == 0 || std::abs(i - j) < args.window);
            if (!seen) continue;
            const std::int64_t tj = first[b] + j;
            for (int c = 0; c < d; ++c) kj[c] = static_cast<double>(k[(tj * kv_heads + kh) * d + c]);
            logits[j] = inst.score(eh, qs.data(), kj.data(), std::array<std::int64_t, 1>{position(b, i)},
                                   std::array<std::int64_t, 1>{position(b, j)});
            top = std::max(top, logits[j]);
          }
          double sum = 0;
          for (double x : logits) sum += std::isinf(x) ? 0.0 : std::exp(x - top);
          for (int c = 0; c < d; ++c) {
            double o = 0;
            for (std::int64_t j = 0; j < len[b]; ++j)
              if (!std::isinf(logits[j]))
                o += std::exp(logits[j] - top) / sum * static_cast<double>(v[((first[b] + j) * kv_heads + kh) * d + c]);
            worst = std::max(worst, std::abs(static_cast<double>(out[(ti * heads + h) * d + c]) - o));
          }
          if (sum > 0) worst = std::max(worst, std::abs(static_cast<double>(lse[h * total + ti]) - (top + std::log(sum))) / 8);
        }
      }
    return worst;
  }
};

/// The instance types' score in float64 for no encoding: qᵀk.
struct plain {
  cpu::no_encoding enc;
  int content_dim() const { return enc.head_dim; }
  int heads() const { return 1; }
  double score(int, const double* q, const double* k, const std::array<std::int64_t, 1>&,
               const std::array<std::int64_t, 1>&) const {
    double s = 0;
    for (int c = 0; c < enc.head_dim; ++c) s += q[c] * k[c];
    return s;
  }
};

template <class T>
double output_tolerance() {
  if constexpr (std::is_same_v<T, float>) return 2e-5;
  else if constexpr (std::is_same_v<T, Eigen::half>) return 4e-3;
  else return 3e-2;
}

/// Query heads an encoding fixes (a bias or a lift per head), or 0: any.
template <class I>
std::int64_t encoding_heads(const I& inst) {
  if constexpr (requires { inst.bias; } || requires { inst.reps; }) return inst.heads();
  else return 0;
}

template <class E, class T>
void matches_reference(std::uint64_t seed, std::int64_t position_base) {
  std::mt19937_64 rng(seed);
  const auto inst = E::make(E::random_params(rng));
  attention_case<typename E::instance, T> c(rng, inst, encoding_heads(inst), 150, position_base);
  cpu::attention(c.inst, c.args);
  const double error = c.worst_error();
  RC_LOG() << "tokens " << c.total << " heads " << c.heads << "/" << c.kv_heads << " causal " << c.args.causal
           << " window " << c.args.window << " error " << error << "\n";
  RC_ASSERT(error <= output_tolerance<T>());
}

TEST(Attention, NoEncodingMatchesTheDenseReference) {
  property("plain", 41, 20, [](std::uint64_t s) {
    std::mt19937_64 rng(s);
    attention_case<plain, float> c(rng, plain{{std::array{16, 64, 24}[s % 3]}}, 0, 150, 0);
    cpu::attention(cpu::no_encoding{c.d}, c.args);
    RC_ASSERT(c.worst_error() <= output_tolerance<float>());
  });
}

TEST(Attention, RopeMatchesTheDenseReferenceInEveryDtype) {
  property("f32", 42, 15, [](std::uint64_t s) { matches_reference<rope, float>(s, 1000); });
  property("f16", 43, 8, [](std::uint64_t s) { matches_reference<rope, Eigen::half>(s, 1000); });
  property("bf16", 44, 8, [](std::uint64_t s) { matches_reference<rope, Eigen::bfloat16>(s, 1000); });
}

TEST(Attention, ScoreBiasesMatchTheDenseReference) {
  property("alibi", 45, 15, [](std::uint64_t s) { matches_reference<alibi, float>(s, 100000); });
  property("t5", 46, 15, [](std::uint64_t s) { matches_reference<t5_buckets, float>(s, 0); });
}

TEST(Attention, LiftsAndCompositionsMatchTheDenseReference) {
  property("grape_a", 47, 15, [](std::uint64_t s) { matches_reference<grape_a, float>(s, 200); });
  property("rope_alibi", 48, 15, [](std::uint64_t s) { matches_reference<rope_alibi, float>(s, 5000); });
  property("grape_m", 49, 10, [](std::uint64_t s) { matches_reference<grape_m, float>(s, 300); });
}

/// Moving every position by t (up to max_shift) leaves the output of a relative encoding
/// unchanged, within tol.
template <class E>
void shift_invariant(std::uint64_t seed, std::int64_t max_shift, float tol) {
  std::mt19937_64 rng(seed);
  const auto inst = E::make(E::random_params(rng));
  attention_case<typename E::instance, float> c(rng, inst, encoding_heads(inst), 100, 10);
  const std::int64_t t = 1 + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(max_shift));
  auto shifted = c;
  for (auto& m : shifted.ids) m += t;
  for (auto& m : shifted.offsets) m += t;
  if (shifted.ids.empty() && shifted.offsets.empty()) {
    shifted.offsets.assign(shifted.first.size(), t);
    shifted.args.qk.offsets = shifted.offsets.data();
  }
  shifted.args.qk.position_ids = shifted.ids.empty() ? nullptr : shifted.ids.data();
  if (!shifted.offsets.empty()) shifted.args.qk.offsets = shifted.offsets.data();
  shifted.args.qk.cu_seqlens = c.args.qk.cu_seqlens ? shifted.cu.data() : nullptr;
  shifted.args.qk.q.in = shifted.q.data();
  shifted.args.qk.k.in = shifted.k.data();
  shifted.args.v.in = shifted.v.data();
  shifted.args.out = shifted.out.data();
  shifted.args.lse = shifted.lse.data();
  cpu::attention(c.inst, c.args);
  cpu::attention(shifted.inst, shifted.args);
  for (std::size_t i = 0; i < c.out.size(); ++i) RC_ASSERT(std::abs(c.out[i] - shifted.out[i]) <= tol);
}

TEST(Attention, RelativeEncodingsAreShiftInvariant) {
  // RoPE: exact phases, so the rotated operands differ by float32 rounding only. ALiBi: the bias
  // is formed from the offset in double, so a shift changes nothing. GRAPE-A: the bias is the
  // difference of two lifted coordinates slope·m and slope·n held in float32, so a shift t costs
  // about eps32·slope·(m + t) in each logit, 1e-4 here (docs/attention.md).
  property("rope", 51, 10, [](std::uint64_t s) { shift_invariant<rope>(s, 1 << 20, 2e-5f); });
  property("alibi", 52, 10, [](std::uint64_t s) { shift_invariant<alibi>(s, 1 << 30, 0.0f); });
  property("grape_a", 53, 10, [](std::uint64_t s) { shift_invariant<grape_a>(s, 1 << 10, 2e-4f); });
}

TEST(Attention, BadArgumentsThrowBeforeAnyWrite) {
  std::mt19937_64 rng(5);
  attention_case<plain, float> c(rng, plain{{8}}, 4, 20, 0);
  const auto expect_error = [&](cpu::attention_args a, const char* what) {
    std::fill(c.out.begin(), c.out.end(), 7.0f);
    try {
      cpu::attention(cpu::no_encoding{8}, a);
      ADD_FAILURE() << "no error for " << what;
    } catch (const input_error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
    EXPECT_TRUE(std::all_of(c.out.begin(), c.out.end(), [](float x) { return x == 7.0f; }));
  };
  auto a = c.args;
  a.qk.k.heads = 3;
  expect_error(a, "must be a multiple of k.heads (3)");
  a = c.args;
  a.v.size -= 1;
  expect_error(a, "v: the strides address");
  a = c.args;
  a.out = nullptr;
  expect_error(a, "out must not be null");
  a = c.args;
  a.qk.max_position = 1;
  if (c.total > 1) expect_error(a, "max_position = 1");
}

}  // namespace
}  // namespace grape
