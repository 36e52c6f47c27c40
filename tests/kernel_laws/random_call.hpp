#pragma once
// A random rotate_qk call on an encoding instance for the kernel-law and emulation tests: padded
// or packed varlen tokens, gaps in every stride, GQA, int32/int64 ids or per-sequence offsets,
// in or out of place, any storage type; and its distance from the dense float64 reference.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include "cpu/rotate_qk.hpp"
#include "dense_reference.hpp"

namespace grape {

/// A random call: its tokens, positions and Q/K buffers with gaps in every stride.
template <class E, class T>
struct random_call {
  typename E::instance inst;
  int d = 0;
  std::int64_t total = 0, q_heads = 0, k_heads = 0;
  std::vector<std::int64_t> cu_seqlens, offsets, token_of;  // token_of: flat token -> row
  std::vector<std::array<std::int64_t, E::group::rank>> coords;
  std::vector<std::int64_t> ids64;
  std::vector<std::int32_t> ids32;
  std::vector<T> q, k, q_out, k_out;
  cpu::rotate_qk_args args;

  random_call(std::mt19937_64& rng, typename E::instance i) : inst(std::move(i)), d(inst.content_dim()) {
    constexpr int rank = E::group::rank;
    std::uniform_int_distribution<int> u(0, 1 << 20);
    const auto pick = [&](int lo, int hi) { return lo + u(rng) % (hi - lo + 1); };
    q_heads = pick(1, 6);
    k_heads = pick(1, 3);
    const bool varlen = pick(0, 1) == 1;
    const std::int64_t batch = pick(1, 3), seq = pick(1, 9);
    const std::int64_t head_gap = pick(0, 3), token_gap = pick(0, 5);
    const std::int64_t q_token = q_heads * (d + head_gap) + token_gap;
    const std::int64_t k_token = k_heads * (d + head_gap) + token_gap;
    if (varlen) {
      cu_seqlens.push_back(0);
      for (std::int64_t b = 0; b < batch; ++b) cu_seqlens.push_back(cu_seqlens.back() + pick(0, 9));
      total = cu_seqlens.back();
      token_of.resize(total);
      std::iota(token_of.begin(), token_of.end(), 0);
      args.cu_seqlens = cu_seqlens.data();
    } else {
      total = batch * seq;
      args.seq_len = seq;
      for (std::int64_t t = 0; t < total; ++t) token_of.push_back(t);
    }
    args.batch = batch;
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
    const std::int64_t limit = std::min<std::int64_t>(E::position_limit, std::int64_t{1} << 20);
    std::uniform_int_distribution<std::int64_t> pos(0, limit - 1);
    coords.resize(total);
    const int mode = pick(0, 2);
    if (mode == 2) {
      for (std::int64_t b = 0; b < batch; ++b) offsets.push_back(pos(rng) / 2);
      args.offsets = offsets.data();
      args.max_position = limit + 20;
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

  /// Worst |kernel − reference| over every head of Q and K, relative to the largest value.
  double worst_relative_error() const {
    double worst = 0, scale = 1;
    const auto compare = [&](const std::vector<T>& in, const std::vector<T>& out, const cpu::qk_tensor& o,
                             bool key) {
      for (std::int64_t t = 0; t < total; ++t)
        for (std::int64_t h = 0; h < o.heads; ++h) {
          const std::int64_t base = at(o, t, h);
          std::vector<double> x(d);
          for (int c = 0; c < d; ++c) x[c] = static_cast<double>(in[base + c]);
          const auto ref = reference_head<E>(inst, key, coords[t], x);
          for (int c = 0; c < d; ++c) {
            worst = std::max(worst, std::abs(static_cast<double>(out[base + c]) - ref[c]));
            scale = std::max(scale, std::abs(ref[c]));
          }
        }
    };
    compare(q, q_out, args.q, false);
    compare(k, k_out, args.k, true);
    return worst / scale;
  }
};

/// Runs body(seed) for `trials` seeds drawn from a fixed `seed`: reproducible, reported by name.
template <class Body>
void property(const char* what, std::uint64_t seed, int trials, Body body) {
  rc::detail::TestParams params;
  params.seed = seed;
  params.maxSuccess = trials;
  const auto result = rc::detail::checkProperty(
      rc::detail::toProperty([&] { body(*rc::gen::arbitrary<std::uint64_t>()); }), rc::detail::TestMetadata{}, params);
  rc::detail::FailureResult failure;
  if (result.match(failure))
    ADD_FAILURE() << what << ": " << failure.description;
  else
    EXPECT_TRUE(result.template is<rc::detail::SuccessResult>()) << what;
}

}  // namespace grape
