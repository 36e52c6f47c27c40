#pragma once
// A random paged KV cache and a decode call on it (cpu::decode_args), with the float64 dense
// reference of the call from the instance's own score: NHD or HND pages, blocks in shuffled order,
// block sizes that do and do not divide the sequence, K encoded at its positions as rotate_qk's
// KV write stores it, one query per sequence at the last position or at one given, windows, GQA.
// Shared by the CPU decode tests and the CUDA decode's emulation.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "cpu/attention_decode.hpp"
#include "grape/check/attention_case.hpp"

namespace grape::decode_test {

/// The shape of a case's cache: query and KV heads, slots per block, NHD or HND pages, and the
/// length of each sequence.
struct decode_layout {
  std::int64_t heads = 0, kv_heads = 0, block_size = 0;
  bool hnd = false;
  std::vector<std::int64_t> lens;
};

/// A paged cache holding `batch` sequences, and a decode call on it.
template <class I, class T>
struct decode_case {
  I inst;
  int d = 0;
  std::int64_t batch = 0, heads = 0, kv_heads = 0, block_size = 0, blocks = 0, max_blocks = 0;
  bool hnd = false;
  std::vector<std::int64_t> lens, q_pos;
  std::vector<std::vector<float>> keys, values;  // per sequence [len, kv_heads, d], as given (not encoded)
  std::vector<T> q, k_pages, v_pages, out;
  std::vector<std::int32_t> table;
  std::vector<float> lse;
  cpu::decode_args args;

  decode_case(const decode_case&) = delete;  // args points into the arrays
  decode_case& operator=(const decode_case&) = delete;

  /// A random layout: 2, 4, 6 or 8 heads (or fixed_heads), GQA 2:1 half the time, 1 to 3 sequences
  /// of up to max_len tokens, blocks of 1, 5, 16 or 32 slots, NHD or HND pages; the query at the
  /// last position or (given_positions) up to 40 past it; a window a third of the time.
  decode_case(std::mt19937_64& rng, I i, std::int64_t fixed_heads, std::int64_t max_len, bool given_positions)
      : decode_case(rng, i, random_layout(rng, pairs_heads(i), fixed_heads, max_len), given_positions,
                    max_len) {}

  /// A case of that shape (blocks shuffled through the pool, K encoded at positions 0 .. len − 1, K, V
  /// and Q random); with max_len > 0 the query positions and the window drawn as above, else the
  /// query at each sequence's last position and no window.
  decode_case(std::mt19937_64& rng, I i, decode_layout shape, bool given_positions = false, std::int64_t max_len = 0)
      : inst(std::move(i)), d(inst.content_dim()), batch(static_cast<std::int64_t>(shape.lens.size())),
        heads(shape.heads), kv_heads(shape.kv_heads), block_size(shape.block_size), hnd(shape.hnd),
        lens(std::move(shape.lens)) {
    std::normal_distribution<float> g(0.0f, 1.0f);
    for (const std::int64_t len : lens) max_blocks = std::max(max_blocks, (len + block_size - 1) / block_size);
    blocks = batch * max_blocks + 3;  // spare blocks nobody uses
    std::vector<std::int32_t> order(static_cast<std::size_t>(blocks));
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    table.assign(static_cast<std::size_t>(batch * max_blocks), -1);
    for (std::size_t i = 0; i < table.size(); ++i) table[i] = order[i];
    const std::int64_t page = block_size * kv_heads * d;
    k_pages.assign(static_cast<std::size_t>(blocks * page), T(99.0f));
    v_pages.assign(k_pages.size(), T(99.0f));
    for (std::int64_t b = 0; b < batch; ++b) {
      std::vector<float> k(static_cast<std::size_t>(lens[b] * kv_heads * d)), v(k.size());
      for (auto& x : k) x = static_cast<float>(static_cast<T>(g(rng)));
      for (auto& x : v) x = static_cast<float>(static_cast<T>(g(rng)));
      keys.push_back(k);
      values.push_back(v);
      encode_keys(k, lens[b]);
      for (std::int64_t j = 0; j < lens[b]; ++j)
        for (std::int64_t h = 0; h < kv_heads; ++h)
          for (int c = 0; c < d; ++c) {
            const std::size_t at = static_cast<std::size_t>(address(table[b * max_blocks + j / block_size], j % block_size, h) + c);
            k_pages[at] = static_cast<T>(k[(j * kv_heads + h) * d + c]);
            v_pages[at] = static_cast<T>(v[(j * kv_heads + h) * d + c]);
          }
      q_pos.push_back(given_positions && max_len > 0 ? pick(rng, lens[b] - 1, lens[b] + 40) : lens[b] - 1);
    }
    q.resize(static_cast<std::size_t>(batch * heads * d));
    for (auto& x : q) x = static_cast<T>(g(rng));
    out.assign(static_cast<std::size_t>(batch * heads * d), T(7.0f));
    lse.assign(static_cast<std::size_t>(batch * heads), 0.0f);
    args.type = dtype_of<T>();
    args.q = q.data();
    args.batch = batch;
    args.q_heads = heads;
    args.kv_heads = kv_heads;
    const std::int64_t size = static_cast<std::int64_t>(k_pages.size());
    const cpu::paged_cache layout = hnd ? cpu::paged_cache{nullptr, size, page, d, block_size * d}
                                        : cpu::paged_cache{nullptr, size, page, kv_heads * d, d};
    args.k = layout;
    args.k.data = k_pages.data();
    args.v = layout;
    args.v.data = v_pages.data();
    args.blocks = blocks;
    args.block_size = block_size;
    args.block_table = table.data();
    args.max_blocks = max_blocks;
    args.seq_lens = lens.data();
    args.q_positions = given_positions ? q_pos.data() : nullptr;
    args.out = out.data();
    args.lse = lse.data();
    args.window = max_len > 0 && pick(rng, 0, 2) == 0 ? pick(rng, 1, max_len) : 0;
  }

  /// An integer in [lo, hi].
  static std::int64_t pick(std::mt19937_64& rng, std::int64_t lo, std::int64_t hi) {
    return lo + std::uniform_int_distribution<int>(0, 1 << 20)(rng) % (hi - lo + 1);
  }

  static decode_layout random_layout(std::mt19937_64& rng, bool pairs_heads, std::int64_t fixed_heads,
                                     std::int64_t max_len) {
    decode_layout l;
    l.heads = fixed_heads > 0 ? fixed_heads : pick(rng, 1, 4) * 2;
    l.kv_heads = l.heads % 2 == 0 && pick(rng, 0, 1) && !pairs_heads ? l.heads / 2 : l.heads;
    const std::int64_t batch = pick(rng, 1, 3);
    l.block_size = std::array<std::int64_t, 4>{1, 5, 16, 32}[pick(rng, 0, 3)];
    l.hnd = pick(rng, 0, 1) == 1;
    for (std::int64_t b = 0; b < batch; ++b) l.lens.push_back(pick(rng, 1, max_len));
    return l;
  }

  std::int64_t address(std::int64_t block, std::int64_t slot, std::int64_t h) const {
    return block * block_size * kv_heads * d + (hnd ? h * block_size * d + slot * d : slot * kv_heads * d + h * d);
  }

  /// K encoded at positions 0..len − 1, as rotate_qk's KV-cache write stores it.
  void encode_keys(std::vector<float>& k, std::int64_t len) const {
    cpu::rotate_qk_args r;  // K alone, [len, kv_heads, d], at positions 0 .. len − 1
    r.k = {k.data(), k.data(), kv_heads, static_cast<std::int64_t>(k.size()), len * kv_heads * d, kv_heads * d, d};
    r.seq_len = len;
    if constexpr (rotates_qk_part<I>) cpu::rotate_qk(rotation_part(inst), r);
    if constexpr (cpu::rotates_by_phase<I>) {  // each key turned by the phase of its position
      std::vector<std::int64_t> positions(static_cast<std::size_t>(len));
      std::iota(positions.begin(), positions.end(), 0);
      cpu::grape_m_rotate_qk(cpu::detail::phase_call_of(inst, positions, kv_heads, kv_heads).spec, r);
    }
  }

  /// The worst difference of the output (and lse / 8) from the float64 dense reference.
  double error() const {
    const double scale = 1.0 / std::sqrt(static_cast<double>(d));
    double worst = 0;
    std::vector<double> qs(d), kj(d);
    for (std::int64_t b = 0; b < batch; ++b)
      for (std::int64_t h = 0; h < heads; ++h) {
        const std::int64_t kh = h / (heads / kv_heads);
        for (int c = 0; c < d; ++c) qs[c] = scale * static_cast<double>(static_cast<float>(q[(b * heads + h) * d + c]));
        std::vector<double> logits;
        std::vector<std::int64_t> seen;
        for (std::int64_t j = 0; j < lens[b]; ++j) {
          if (j > q_pos[b] || (args.window > 0 && q_pos[b] - j >= args.window)) continue;
          for (int c = 0; c < d; ++c) kj[c] = keys[b][(j * kv_heads + kh) * d + c];
          logits.push_back(inst.score(inst.heads() == 1 ? 0 : static_cast<int>(h), qs.data(), kj.data(),
                                      std::array<std::int64_t, 1>{q_pos[b]}, std::array<std::int64_t, 1>{j}));
          seen.push_back(j);
        }
        if (seen.empty()) {  // the window ends before the first cached key: the output is 0
          for (int c = 0; c < d; ++c) worst = std::max(worst, std::abs(static_cast<double>(out[(b * heads + h) * d + c])));
          continue;
        }
        const double top = *std::max_element(logits.begin(), logits.end());
        double sum = 0;
        for (double x : logits) sum += std::exp(x - top);
        for (int c = 0; c < d; ++c) {
          double o = 0;
          for (std::size_t n = 0; n < seen.size(); ++n)
            o += std::exp(logits[n] - top) / sum * values[b][(seen[n] * kv_heads + kh) * d + c];
          worst = std::max(worst, std::abs(static_cast<double>(out[(b * heads + h) * d + c]) - o));
        }
        worst = std::max(worst, std::abs(lse[h * batch + b] - (top + std::log(sum))) / 8);
      }
    return worst;
  }
};

/// A random instance of E and a decode case on it (the encoding's heads where it fixes them).
/// Returned as a prvalue: a case's arguments point into its own arrays, so it is never copied.
template <class E, class T>
decode_case<typename E::instance, T> random_case(std::mt19937_64& rng, std::int64_t max_len, bool given_positions) {
  const auto inst = E::make(E::random_params(rng));
  std::int64_t heads = 0;
  if constexpr (requires { inst.bias; } || cpu::rotates_by_phase<typename E::instance>) heads = inst.heads();
  return decode_case<typename E::instance, T>(rng, inst, heads, max_len, given_positions);
}

}  // namespace grape::decode_test
