#pragma once
// A random rotate_qk call on an encoding instance, for the laws that run the compiled kernels
// (check/kernel_laws.hpp) and for the kernel tests: padded or packed varlen tokens, gaps in every
// stride, GQA, int32/int64 ids or per-sequence offsets, in or out of place, any storage type; and
// its distance from a float64 reference of each encoded head.
#include <Eigen/Core>
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <type_traits>
#include <vector>

#include "cpu/rotate_qk.hpp"
#include "grape/inject/compose.hpp"
#include "grape/inject/rotate_qk.hpp"

namespace grape {

/// What one storage type holds a kernel to, relative to the largest reference value (a float32
/// result is a few roundings; f16 and bf16 are one storage rounding of it).
template <class T>
constexpr double storage_tolerance() {
  if constexpr (std::is_same_v<T, float>) return 4e-6;
  else if constexpr (std::is_same_v<T, Eigen::half>) return 2e-3;
  else return 1.6e-2;
}

/// The larger of two errors, keeping a NaN: std::max(x, NaN) is x, which would let a NaN output
/// pass the law that reduces its errors this way (judge then fails it as not finite).
inline double max_keeping_nan(double a, double b) {
  return std::isnan(a) || std::isnan(b) ? std::numeric_limits<double>::quiet_NaN() : std::max(a, b);
}

template <class T>
constexpr cpu::dtype dtype_of() {
  if constexpr (std::is_same_v<T, float>) return cpu::dtype::f32;
  else if constexpr (std::is_same_v<T, Eigen::half>) return cpu::dtype::f16;
  else return cpu::dtype::bf16;
}

template <class I>
struct layouts_of;
template <class R, layout_kind Q, layout_kind K>
struct layouts_of<rotate_instance<R, Q, K>> {
  static constexpr layout_kind q = Q, k = K;
};

/// Where a call's positions come from: base + uniform [0, spread) per token and axis.
struct position_draw {
  std::int64_t base = 0;
  std::int64_t spread = std::int64_t{1} << 20;
};

/// A random call's sequences on args: `batch` packed ones of pick(0, max_len) tokens each
/// (cu_seqlens) or padded ones of `seq` tokens; returns the tokens in all.
template <class Pick>
std::int64_t place_sequences(bool varlen, std::int64_t batch, std::int64_t seq, int max_len, Pick&& pick,
                             std::vector<std::int64_t>& cu_seqlens, cpu::rotate_qk_args& args) {
  args.batch = batch;
  if (!varlen) {
    args.seq_len = seq;
    return batch * seq;
  }
  cu_seqlens.assign(1, 0);
  for (std::int64_t b = 0; b < batch; ++b) cu_seqlens.push_back(cu_seqlens.back() + pick(0, max_len));
  args.cu_seqlens = cu_seqlens.data();
  return cu_seqlens.back();
}

/// A random call: its tokens, positions and Q/K buffers with gaps in every stride.
template <class I, class T>
struct kernel_case {
  static constexpr int rank = std::remove_cvref_t<decltype(rotation_part(std::declval<I>()).representation(0))>::rank;
  I inst;
  int d = 0;
  std::int64_t total = 0, q_heads = 0, k_heads = 0;
  std::vector<std::int64_t> cu_seqlens, offsets;
  std::vector<std::array<std::int64_t, rank>> coords;
  std::vector<std::int64_t> ids64;
  std::vector<std::int32_t> ids32;
  std::vector<T> q, k, q_out, k_out;
  cpu::rotate_qk_args args;

  /// fixed_q_heads > 0: that many query heads and a K head count that divides it (GQA), as a
  /// kernel with one encoding per query head (lift_qk) needs.
  kernel_case(std::mt19937_64& rng, I i, position_draw positions = {}, std::int64_t fixed_q_heads = 0)
      : inst(std::move(i)), d(inst.content_dim()) {
    std::uniform_int_distribution<int> u(0, 1 << 20);
    const auto pick = [&](int lo, int hi) { return lo + u(rng) % (hi - lo + 1); };
    q_heads = fixed_q_heads > 0 ? fixed_q_heads : pick(1, 6);
    k_heads = pick(1, 3);
    if (fixed_q_heads > 0)
      while (q_heads % k_heads != 0) --k_heads;
    const bool varlen = pick(0, 1) == 1;
    const std::int64_t batch = pick(1, 3), seq = pick(1, 9);
    const std::int64_t head_gap = pick(0, 3), token_gap = pick(0, 5);
    const std::int64_t q_token = q_heads * (d + head_gap) + token_gap;
    const std::int64_t k_token = k_heads * (d + head_gap) + token_gap;
    total = place_sequences(varlen, batch, seq, 9, pick, cu_seqlens, args);
    const std::int64_t rows = total + 1;  // one spare row: sizes are not exact multiples
    std::normal_distribution<double> g(0.0, 1.0);
    q.resize(rows * q_token);
    k.resize(rows * k_token);
    for (auto& v : q) v = static_cast<T>(g(rng));
    for (auto& v : k) v = static_cast<T>(g(rng));
    const bool in_place = pick(0, 1) == 1;
    q_out = in_place ? q : std::vector<T>(q.size(), T(0));
    k_out = in_place ? k : std::vector<T>(k.size(), T(0));
    T* qo = q_out.data();
    T* ko = k_out.data();
    args.type = dtype_of<T>();
    args.q = {in_place ? qo : q.data(), qo, q_heads, static_cast<std::int64_t>(q.size()),
              varlen ? 0 : seq * q_token, q_token, d + head_gap};
    args.k = {in_place ? ko : k.data(), ko, k_heads, static_cast<std::int64_t>(k.size()),
              varlen ? 0 : seq * k_token, k_token, d + head_gap};
    // Positions: ids (int32 or int64, one row per axis) or per-sequence offsets.
    std::uniform_int_distribution<std::int64_t> pos(positions.base, positions.base + positions.spread - 1);
    coords.resize(total);
    args.max_position = positions.base + positions.spread + 20;
    const int mode = pick(0, 2);
    if (mode == 2) {
      for (std::int64_t b = 0; b < batch; ++b) offsets.push_back(positions.base + (pos(rng) - positions.base) / 2);
      args.offsets = offsets.data();
      for (std::int64_t b = 0; b < batch; ++b) {
        const std::int64_t first = varlen ? cu_seqlens[b] : b * seq;
        const std::int64_t len = varlen ? cu_seqlens[b + 1] - cu_seqlens[b] : seq;
        for (std::int64_t s = 0; s < len; ++s) coords[first + s].fill(offsets[b] + s);
      }
    } else {
      for (auto& c : coords)
        for (auto& v : c) v = pos(rng);
      for (int a = 0; a < rank; ++a)
        for (std::int64_t t = 0; t < total; ++t) {
          ids64.push_back(coords[t][a]);
          ids32.push_back(static_cast<std::int32_t>(coords[t][a]));
        }
      args.position_ids = mode == 0 ? static_cast<const void*>(ids64.data()) : ids32.data();
      args.position_type = mode == 0 ? cpu::index_type::i64 : cpu::index_type::i32;
    }
  }

  /// After a copy: points args at this call's own buffers (in or out of place as before).
  void repoint() {
    const bool q_in_place = args.q.in == args.q.out, k_in_place = args.k.in == args.k.out;
    args.q.out = q_out.data();
    args.q.in = q_in_place ? q_out.data() : q.data();
    args.k.out = k_out.data();
    args.k.in = k_in_place ? k_out.data() : k.data();
    if (!cu_seqlens.empty()) args.cu_seqlens = cu_seqlens.data();
    if (!offsets.empty()) args.offsets = offsets.data();
    if (!ids64.empty())
      args.position_ids = args.position_type == cpu::index_type::i64 ? static_cast<const void*>(ids64.data())
                                                                      : ids32.data();
  }

  /// Where head h of token t starts in an operand.
  std::int64_t at(const cpu::qk_tensor& o, std::int64_t t, std::int64_t h) const {
    if (!cu_seqlens.empty()) return t * o.token_stride + h * o.head_stride;
    return (t / args.seq_len) * o.batch_stride + (t % args.seq_len) * o.token_stride + h * o.head_stride;
  }

  /// The entry where a result is furthest from the reference, over every head of Q and K.
  struct worst_entry {
    double got = 0, want = 0, error = 0;
    double scale = 1;  // the largest |reference| value (at least 1): the errors are relative to it
    std::int64_t token = 0, head = 0;
    int channel = 0;
    bool key = false;
    double relative() const { return error / scale; }

    /// Keeps the entry furthest from its reference; a NaN counts as infinitely far, so that it
    /// cannot hide behind a comparison that is false.
    void take(double g, double r, std::int64_t t, std::int64_t h, int c, bool k) {
      const double e = std::isnan(g - r) ? std::numeric_limits<double>::infinity() : std::abs(g - r);
      if (e > error) *this = {g, r, e, scale, t, h, c, k};
      scale = std::max(scale, std::abs(r));
    }
  };

  /// reference(is_key, coords, x) is one head encoded in float64 (all head_dim channels).
  template <class Reference>
  worst_entry worst(const std::vector<T>& q_result, const std::vector<T>& k_result, Reference&& reference) const {
    worst_entry w;
    const auto compare = [&](const std::vector<T>& in, const std::vector<T>& out, const cpu::qk_tensor& o,
                             bool key) {
      std::vector<double> x(d);
      for (std::int64_t t = 0; t < total; ++t)
        for (std::int64_t h = 0; h < o.heads; ++h) {
          const std::int64_t base = at(o, t, h);
          for (int c = 0; c < d; ++c) x[c] = static_cast<double>(in[base + c]);
          const std::vector<double> ref = reference(key, coords[t], x);
          for (int c = 0; c < d; ++c) w.take(static_cast<double>(out[base + c]), ref[c], t, h, c, key);
        }
    };
    compare(q, q_result, args.q, false);
    compare(k, k_result, args.k, true);
    return w;
  }

  /// Worst |out − reference| relative to the largest reference value.
  template <class Reference>
  double worst_relative_error(const std::vector<T>& q_result, const std::vector<T>& k_result,
                              Reference&& reference) const {
    return worst(q_result, k_result, reference).relative();
  }

  /// The same against the instance's own float64 encode (its representation's apply).
  worst_entry worst_vs_apply(const std::vector<T>& q_result, const std::vector<T>& k_result) const {
    return worst(q_result, k_result, [&](bool key, const auto& c, const std::vector<double>& x) {
      std::vector<double> y(d);
      rotation_part(inst).encode(key, c, x.data(), y.data());
      return y;
    });
  }
};

}  // namespace grape
