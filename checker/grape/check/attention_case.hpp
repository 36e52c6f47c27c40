#pragma once
// A random cpu::attention call on an encoding instance, for the attention laws
// (check/attention_laws.hpp) and the attention tests: contiguous [tokens, heads, d] operands,
// padded or varlen batches, GQA, causal or not, sliding windows, positions as sequence indices,
// per-sequence offsets or ids starting at a chosen base; and its float64 dense reference (the
// instance's own score, one pair at a time, softmax materialized) with a rounding bound for the
// float32 kernel derived from the magnitudes it handles.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "cpu/attention.hpp"
#include "grape/check/kernel_case.hpp"

namespace grape {

/// Query heads an encoding instance fixes (a bias or a lift per head, a phase rotation's rows), or
/// 0: any.
template <class I>
std::int64_t encoding_heads(const I& inst) {
  if constexpr (has_score_bias<I> || is_lift_instance<I> || is_phase_rotation<I>) return inst.heads();
  else return 0;
}

/// Whether the instance turns each K head its own way, so that K heads must match Q heads.
template <class I>
bool pairs_heads(const I& inst) {
  if constexpr (cpu::rotates_by_phase<I>) return inst.per_head();
  else return false;
}

/// The kernel's output against the float64 reference: the worst error, and what the float32
/// kernel may lose (attention_case::compare).
struct attention_comparison {
  double worst = 0;
  double bound = 0;
};

template <class I, class T>
struct attention_case {
  I inst;
  int d = 0;
  std::int64_t heads = 0, kv_heads = 0, total = 0;
  std::vector<std::int64_t> cu, offsets, ids, first, len;
  std::vector<T> q, k, v, out;
  std::vector<float> lse;
  cpu::attention_args args;

  /// Sequences of up to max_len tokens; positions in [base, base + span) (span >= max_len).
  attention_case(std::mt19937_64& rng, I i, std::int64_t encoding_heads, std::int64_t max_len, std::int64_t base,
                 std::int64_t span)
      : inst(std::move(i)), d(inst.content_dim()) {
    std::uniform_int_distribution<int> u(0, 1 << 20);
    const auto pick = [&](std::int64_t lo, std::int64_t hi) { return lo + u(rng) % (hi - lo + 1); };
    heads = encoding_heads > 0 ? encoding_heads : pick(1, 4) * 2;
    kv_heads = heads;
    for (std::int64_t g = pick(1, 4); g > 0 && !pairs_heads(inst); --g)
      if (heads % g == 0) {
        kv_heads = heads / g;
        break;
      }
    const std::int64_t batch = pick(1, 2);
    const bool varlen = pick(0, 1) == 1;
    const std::int64_t seq = pick(1, max_len);
    std::int64_t at = 0;
    for (std::int64_t b = 0; b < batch; ++b) {
      first.push_back(at);
      len.push_back(varlen ? pick(b == 0 ? 1 : 0, max_len) : seq);  // empty sequences, but never no token
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
    args.qk.type = dtype_of<T>();
    args.qk.batch = batch;
    if (!varlen) args.qk.seq_len = seq;
    const int mode = static_cast<int>(pick(0, 2));
    if (mode == 1 || (mode == 0 && base > 0)) {
      for (std::int64_t b = 0; b < batch; ++b) offsets.push_back(base + pick(0, span - max_len));
    } else if (mode == 2) {
      for (std::int64_t t = 0; t < total; ++t) ids.push_back(base + pick(0, span - 1));
    }
    args.causal = pick(0, 1) == 1;
    args.window = pick(0, 2) == 0 ? pick(1, 2 * max_len) : 0;
    repoint();
  }

  attention_case(const attention_case& o)
      : inst(o.inst), d(o.d), heads(o.heads), kv_heads(o.kv_heads), total(o.total), cu(o.cu), offsets(o.offsets),
        ids(o.ids), first(o.first), len(o.len), q(o.q), k(o.k), v(o.v), out(o.out), lse(o.lse), args(o.args) {
    repoint();
  }
  attention_case& operator=(const attention_case&) = delete;

  /// The same call with every position moved by t (sequence indices become offsets t).
  attention_case shifted(std::int64_t t) const {
    attention_case s(*this);
    for (auto& m : s.ids) m += t;
    for (auto& m : s.offsets) m += t;
    if (s.ids.empty() && s.offsets.empty()) s.offsets.assign(first.size(), t);
    s.repoint();
    return s;
  }

  std::int64_t position(std::size_t b, std::int64_t i) const {
    if (!ids.empty()) return ids[static_cast<std::size_t>(first[b] + i)];
    return offsets.empty() ? i : offsets[b] + i;
  }

  /// The output of the kernel (in args.out) against the float64 dense reference, and what float32
  /// arithmetic may cost it. Each logit is off by at most δ_ij = 2(√(d+2) + 4)·eps32·Σ_c|q'_c k'_c|
  /// (the dot product of the encoded operands, whose entries a lift makes grow with the position,
  /// and their own float32 rounding) + 4·eps32·|logit| (the bias and the sum); softmax turns a
  /// row's δ into at most 2(e^(2δ) − 1)·max|V|; the accumulation over the keys and the output's
  /// storage rounding add (4·(keys + 16)·eps32 + tol(storage))·max|V|. Where the products run on
  /// bf16 tiles (cpu/matmul_path.hpp; never for a lift), q' and k' rounded to bf16 (unit roundoff
  /// u = 2⁻⁸) add (2u + u²)·Σ_c|q'_c k'_c| to δ, and P rounded to bf16 adds u·max|V|.
  attention_comparison compare() const {
    const double eps32 = std::numeric_limits<float>::epsilon();
    const double u = bf16_products() ? std::ldexp(1.0, -8) : 0.0;
    const double scale = 1.0 / std::sqrt(static_cast<double>(d));
    const std::vector<double> qe = encoded(false, scale), ke = encoded(true, 1.0);
    const int w = width();
    attention_comparison r;
    double v_max = 0;
    for (const T& x : v) v_max = std::max(v_max, std::abs(static_cast<double>(x)));
    std::vector<double> qs(d), kj(d), logits;
    for (std::size_t b = 0; b < first.size(); ++b)
      for (std::int64_t h = 0; h < heads; ++h) {
        const std::int64_t kh = h / (heads / kv_heads);
        const int eh = inst.heads() == 1 ? 0 : static_cast<int>(h);
        for (std::int64_t i = 0; i < len[b]; ++i) {
          const std::int64_t ti = first[b] + i;
          for (int c = 0; c < d; ++c) qs[c] = scale * static_cast<double>(q[(ti * heads + h) * d + c]);
          logits.assign(static_cast<std::size_t>(len[b]), -INFINITY);
          double top = -INFINITY, delta = 0;
          for (std::int64_t j = 0; j < len[b]; ++j) {
            const bool seen = (!args.causal || j <= i) && (args.window == 0 || std::abs(i - j) < args.window);
            if (!seen) continue;
            const std::int64_t tj = first[b] + j;
            for (int c = 0; c < d; ++c) kj[c] = static_cast<double>(k[(tj * kv_heads + kh) * d + c]);
            logits[j] = inst.score(eh, qs.data(), kj.data(), std::array<std::int64_t, 1>{position(b, i)},
                                   std::array<std::int64_t, 1>{position(b, j)});
            top = std::max(top, logits[j]);
            double absdot = 0;
            for (int c = 0; c < w; ++c)
              absdot += std::abs(qe[(ti * heads + h) * w + c] * ke[(tj * heads + h) * w + c]);
            const double logit = std::isfinite(logits[j]) ? std::abs(logits[j]) : 0.0;
            delta = max_keeping_nan(delta, (2 * (std::sqrt(w) + 4) * eps32 + 2 * u + u * u) * absdot + 4 * eps32 * logit);
          }
          double sum = 0;
          for (double x : logits) sum += std::isinf(x) ? 0.0 : std::exp(x - top);
          for (int c = 0; c < d; ++c) {
            double o = 0;
            for (std::int64_t j = 0; j < len[b]; ++j)
              if (!std::isinf(logits[j]))
                o += std::exp(logits[j] - top) / sum * static_cast<double>(v[((first[b] + j) * kv_heads + kh) * d + c]);
            r.worst = max_keeping_nan(r.worst, std::abs(static_cast<double>(out[(ti * heads + h) * d + c]) - o));
          }
          if (!(sum == 0))  // a row with every key masked has no log-sum-exp to compare; a NaN sum does
            r.worst = max_keeping_nan(r.worst, std::abs(static_cast<double>(lse[h * total + ti]) - (top + std::log(sum))) / 8);
          r.bound = max_keeping_nan(r.bound, v_max * (2 * std::expm1(2 * delta) + 4 * (len[b] + 16) * eps32 + u +
                                               storage_tolerance<T>()));
        }
      }
    return r;
  }

 private:
  /// Whether cpu::attention multiplies this call's tiles in bf16 (its storage and the path asked for).
  bool bf16_products() const {
    if constexpr (is_lift_instance<I>) return false;
    else return cpu::matmul_path_for(args.qk.type) == cpu::matmul_path::avx512_bf16;
  }

  /// Channels of an encoded operand: d, or d + 2 for a lift.
  int width() const {
    if constexpr (is_lift_instance<I>) return d + 2;
    else return d;
  }

  /// Every token's encoded query (times `scale`) or key in float64, [total, query heads, width]:
  /// rotated, lifted ([q; 1; 0] by ρ_h, [k; 0; 1] by κ_h) or as given.
  std::vector<double> encoded(bool key, double scale) const {
    const int w = width();
    std::vector<double> all(static_cast<std::size_t>(total * heads * w));
    std::vector<double> in(w);
    for (std::size_t b = 0; b < first.size(); ++b)
      for (std::int64_t i = 0; i < len[b]; ++i)
        for (std::int64_t h = 0; h < heads; ++h) {
          const std::int64_t t = first[b] + i;
          const auto at = [&](int c) {
            return key ? static_cast<double>(k[(t * kv_heads + h / (heads / kv_heads)) * d + c])
                       : scale * static_cast<double>(q[(t * heads + h) * d + c]);
          };
          for (int c = 0; c < d; ++c) in[c] = at(c);
          double* y = all.data() + (t * heads + h) * w;
          const std::array<std::int64_t, 1> m{position(b, i)};
          if constexpr (is_lift_instance<I>) {
            in[d] = key ? 0.0 : 1.0;
            in[d + 1] = key ? 1.0 : 0.0;
            const auto& rep = inst.representation(static_cast<int>(h));
            key ? rep.apply_key(m, in.data(), y) : rep.apply(m, in.data(), y);
          } else if constexpr (rotates_qk_part<I>) {
            rotation_part(inst).encode(key, m, in.data(), y);
          } else if constexpr (cpu::rotates_by_phase<I>) {
            inst.encode(static_cast<int>(h), inst.phase(static_cast<int>(h), m[0]), in.data(), y);
          } else {
            std::copy(in.begin(), in.end(), y);
          }
        }
    return all;
  }

  void repoint() {
    const std::int64_t seq = args.qk.seq_len;
    const auto tensor = [&](const std::vector<T>& x, std::int64_t h) {
      return cpu::qk_tensor{x.data(), nullptr, h, static_cast<std::int64_t>(x.size()), seq * h * d, h * d, d};
    };
    args.qk.q = tensor(q, heads);
    args.qk.k = tensor(k, kv_heads);
    args.v = tensor(v, kv_heads);
    args.qk.cu_seqlens = seq == 0 ? cu.data() : nullptr;
    args.qk.offsets = offsets.empty() ? nullptr : offsets.data();
    args.qk.position_ids = ids.empty() ? nullptr : ids.data();
    args.out = out.data();
    args.lse = lse.data();
  }
};

}  // namespace grape
