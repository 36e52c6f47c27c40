#pragma once
// A random lift_qk call on a GRAPE-A instance for the kernel-law and emulation tests: padded or
// packed varlen tokens, gaps in every stride (the lifted tensors with strides of their own), GQA,
// int32/int64 ids, per-sequence offsets or sequence indices, any storage type.
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "common/lift_plan.hpp"
#include "dense_reference.hpp"

namespace grape {

template <class T>
struct lift_call {
  grape_a::params params;
  grape_a::instance inst;
  int d = 0;
  std::int64_t total = 0, q_heads = 0, k_heads = 0;
  std::vector<std::int64_t> cu_seqlens, offsets, positions;  // positions: per flat token
  std::vector<std::int64_t> ids64;
  std::vector<std::int32_t> ids32;
  std::vector<T> q, k, q_lifted, k_lifted;
  cpu::rotate_qk_args args;
  cpu::lifted_tensor ql, kl;

  lift_call(const lift_call&) = delete;  // args point into this call's own buffers
  lift_call& operator=(const lift_call&) = delete;

  /// position_limit: positions are drawn below it (keep it small for f16/bf16: lifted coordinates
  /// grow like slope·position). general: every head gets a random nilpotent u vᵀ (vᵀu = 0, unit
  /// vectors over all d + 2 channels) instead of ALiBi's, so the content channels move too.
  lift_call(std::mt19937_64& rng, std::int64_t position_limit, bool general = false) {
    std::uniform_int_distribution<int> u(0, 1 << 20);
    const auto pick = [&](int lo, int hi) { return lo + u(rng) % (hi - lo + 1); };
    const int log_heads = pick(0, 3);
    q_heads = std::int64_t{1} << log_heads;  // 1..8: ALiBi's power-of-two slope rule
    k_heads = std::int64_t{1} << pick(0, log_heads);
    d = 2 * pick(1, 6);
    params = {static_cast<int>(q_heads), d, 8.0};
    inst = grape_a::make(params);
    if (general)
      for (auto& rep : inst.reps) rep = random_lift(rng, d + 2);
    const bool varlen = pick(0, 1) == 1;
    const std::int64_t batch = pick(1, 3), seq = pick(1, 7);
    const std::int64_t gap = pick(0, 3), token_gap = pick(0, 5);
    total = place_sequences(varlen, batch, seq, 7, pick, cu_seqlens, args);
    args.type = dtype_of<T>();
    const auto tensor = [&](std::vector<T>& buf, std::int64_t heads, int width, bool fill) {
      const std::int64_t token = heads * (width + gap) + token_gap;
      buf.assign(static_cast<std::size_t>((total + 1) * token), T(0));
      std::normal_distribution<double> g(0.0, 1.0);
      if (fill)
        for (auto& v : buf) v = static_cast<T>(g(rng));
      return cpu::lifted_tensor{buf.data(), static_cast<std::int64_t>(buf.size()), varlen ? 0 : seq * token, token,
                                width + gap};
    };
    const auto qt = tensor(q, q_heads, d, true), kt = tensor(k, k_heads, d, true);
    ql = tensor(q_lifted, q_heads, d + 2, false);
    kl = tensor(k_lifted, q_heads, d + 2, false);
    args.q = {q.data(), nullptr, q_heads, qt.size, qt.batch_stride, qt.token_stride, qt.head_stride};
    args.k = {k.data(), nullptr, k_heads, kt.size, kt.batch_stride, kt.token_stride, kt.head_stride};
    args.max_position = position_limit + 8;  // offsets put positions up to limit / 2 + 7
    std::uniform_int_distribution<std::int64_t> pos(0, position_limit - 1);
    positions.resize(total);
    const int mode = pick(0, 3);
    if (mode == 3) {  // sequence indices
      for (std::int64_t b = 0, t = 0; b < batch; ++b)
        for (std::int64_t s = 0; s < (varlen ? cu_seqlens[b + 1] - cu_seqlens[b] : seq); ++s) positions[t++] = s;
    } else if (mode == 2) {
      for (std::int64_t b = 0; b < batch; ++b) offsets.push_back(pos(rng) / 2);
      args.offsets = offsets.data();
      for (std::int64_t b = 0, t = 0; b < batch; ++b)
        for (std::int64_t s = 0; s < (varlen ? cu_seqlens[b + 1] - cu_seqlens[b] : seq); ++s)
          positions[t++] = offsets[b] + s;
    } else {
      for (auto& p : positions) p = pos(rng);
      ids64 = positions;
      ids32.assign(positions.begin(), positions.end());
      args.position_ids = mode == 0 ? static_cast<const void*>(ids64.data()) : ids32.data();
      args.position_type = mode == 0 ? cpu::index_type::i64 : cpu::index_type::i32;
    }
  }

  static unipotent_lift random_lift(std::mt19937_64& rng, int n) {
    std::normal_distribution<double> g(0.0, 1.0);
    std::vector<double> u(n), v(n);
    for (auto& x : u) x = g(rng);
    for (auto& x : v) x = g(rng);
    const auto dot = [&](const std::vector<double>& a, const std::vector<double>& b) {
      double s = 0;
      for (int i = 0; i < n; ++i) s += a[i] * b[i];
      return s;
    };
    const double uu = dot(u, u), vu = dot(v, u);
    for (int i = 0; i < n; ++i) v[i] -= vu / uu * u[i];  // vᵀu = 0: A = u vᵀ is nilpotent
    const double nu = std::sqrt(dot(u, u)), nv = std::sqrt(dot(v, v));
    for (int i = 0; i < n; ++i) u[i] /= nu, v[i] /= nv;
    return {std::move(u), std::move(v)};
  }

  /// Where head h of flat token t starts in a tensor with these strides.
  std::int64_t at(std::int64_t batch_stride, std::int64_t token_stride, std::int64_t head_stride, std::int64_t t,
                  std::int64_t h) const {
    if (!cu_seqlens.empty()) return t * token_stride + h * head_stride;
    return (t / args.seq_len) * batch_stride + (t % args.seq_len) * token_stride + h * head_stride;
  }
  std::int64_t at(const cpu::qk_tensor& o, std::int64_t t, std::int64_t h) const {
    return at(o.batch_stride, o.token_stride, o.head_stride, t, h);
  }
  std::int64_t at(const cpu::lifted_tensor& o, std::int64_t t, std::int64_t h) const {
    return at(o.batch_stride, o.token_stride, o.head_stride, t, h);
  }
};

}  // namespace grape
