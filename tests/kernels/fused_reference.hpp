#pragma once
// Test harness for the fused rotate_qk (QK-norm, KV-cache write): a rope_case plus the fused
// options; the kernel's Q, K, K-cache and V-cache buffers are compared element by element with an
// independent float64 computation (RMSNorm in double, then the rotation by cos/sin of m·θ).
#include <algorithm>
#include <numeric>

#include "rope_reference.hpp"

namespace grape::test {

struct fused_case {
  rope_case rope;
  bool norm_q = false, norm_k = false;
  bool unit_offset = false;
  float eps = 1e-6f;
  bool kv_cache = false;
  bool with_v = true;
  bool k_out = true;                 // K also written to k.out (else k.out is null)
  bool hnd = false;                  // HND pages [blocks, heads, block_size, dim], else NHD
  std::int64_t block_size = 4;
  std::int64_t spare_blocks = 1;     // blocks beyond what the tokens need
  std::int64_t cache_pad = 0;        // extra elements on the cache's innermost non-channel stride
  int skip_percent = 20;             // tokens whose slot is −1
};

struct fused_result : rope_result {
  std::int64_t cached_tokens = 0;    // tokens given a slot
};

struct cache_layout {
  std::int64_t block_stride, slot_stride, head_stride, size;
};

inline cache_layout cache_layout_of(const fused_case& f, std::int64_t heads, std::int64_t blocks) {
  const std::int64_t d = f.rope.head_dim, bs = f.block_size;
  cache_layout l{};
  if (f.hnd) {
    l.slot_stride = d + f.cache_pad;
    l.head_stride = bs * l.slot_stride;
    l.block_stride = heads * l.head_stride;
  } else {
    l.head_stride = d + f.cache_pad;
    l.slot_stride = heads * l.head_stride;
    l.block_stride = bs * l.slot_stride;
  }
  l.size = blocks * l.block_stride + 5;
  return l;
}

inline fused_result run_fused_case(const fused_case& f) {
  const rope_case& c = f.rope;
  rope_setup s(c);
  std::uniform_real_distribution<double> unit(-1.0, 1.0);
  const int d = c.head_dim;

  // Norm weights, around 1 (or around 0 with the unit offset, as Gemma stores them).
  std::vector<float> qw(d), kw(d);
  for (int i = 0; i < d; ++i) {
    qw[i] = static_cast<float>((f.unit_offset ? 0.0 : 1.0) + 0.5 * unit(s.rng));
    kw[i] = static_cast<float>((f.unit_offset ? 0.0 : 1.0) + 0.5 * unit(s.rng));
  }
  cpu::qk_rms_norm norm;
  norm.q_weight = f.norm_q ? qw.data() : nullptr;
  norm.k_weight = f.norm_k ? kw.data() : nullptr;
  norm.eps = f.eps;
  norm.unit_offset = f.unit_offset;
  if (f.norm_q || f.norm_k) s.args.qk_norm = &norm;

  // Slots: a shuffled subset of all slots, −1 for skipped tokens.
  const std::int64_t hk = c.hk;
  const std::int64_t blocks = (s.total + f.block_size - 1) / f.block_size + f.spare_blocks;
  std::vector<std::int64_t> all_slots(blocks * f.block_size);
  std::iota(all_slots.begin(), all_slots.end(), 0);
  std::shuffle(all_slots.begin(), all_slots.end(), s.rng);
  std::vector<std::int64_t> slots(s.total);
  fused_result r;
  for (std::int64_t t = 0; t < s.total; ++t) {
    const bool skip = std::uniform_int_distribution<int>(0, 99)(s.rng) < f.skip_percent;
    slots[t] = skip ? -1 : all_slots[t];
    r.cached_tokens += !skip;
  }
  const cache_layout cl = cache_layout_of(f, hk, blocks);
  const operand_layout vl = s.ol[1];
  byte_buffer k_cache(cl.size * dtype_bytes(c.type)), v_cache(k_cache.size());
  for (std::int64_t i = 0; i < cl.size; ++i) {
    store_value(c.type, k_cache, i, 5.0);
    store_value(c.type, v_cache, i, 6.0);
  }
  const byte_buffer values = s.random_buffer(vl.size, unit);
  const byte_buffer k_cache_before = k_cache, v_cache_before = v_cache;
  cpu::kv_cache_write kv;
  if (f.kv_cache) {
    kv.slot_mapping = slots.data();
    kv.blocks = blocks;
    kv.block_size = f.block_size;
    kv.k = {k_cache.data(), cl.size, cl.block_stride, cl.slot_stride, cl.head_stride};
    if (f.with_v) {
      kv.v = {v_cache.data(), cl.size, cl.block_stride, cl.slot_stride, cl.head_stride};
      kv.values.in = values.data();
      rope_setup::set_strides(kv.values, vl);
    }
    if (!f.k_out) s.args.k.out = nullptr;
    s.args.kv_cache = &kv;
  }
  cpu::rotate_qk(s.spec, s.args);

  // Expectations, in double.
  r.tolerance = default_tolerance(c.type, c.factor);
  std::vector<double> expect_out[2], expect_kc(cl.size), expect_vc(cl.size);
  std::vector<char> owned_out[2], owned_kc(cl.size, 0), owned_vc(cl.size, 0);
  for (int o = 0; o < 2; ++o) {
    const byte_buffer& before = c.inplace ? s.in_before[o] : s.out_before[o];
    expect_out[o].resize(s.ol[o].size);
    owned_out[o].assign(s.ol[o].size, 0);
    for (std::int64_t i = 0; i < s.ol[o].size; ++i) expect_out[o][i] = load_value(c.type, before, i);
  }
  for (std::int64_t i = 0; i < cl.size; ++i) {
    expect_kc[i] = load_value(c.type, k_cache_before, i);
    expect_vc[i] = load_value(c.type, v_cache_before, i);
  }
  const auto cache_base = [&](std::int64_t slot, std::int64_t h) {
    return (slot / f.block_size) * cl.block_stride + (slot % f.block_size) * cl.slot_stride +
           h * cl.head_stride;
  };
  std::vector<double> x(d);
  for (std::int64_t b = 0; b < s.batch; ++b)
    for (std::int64_t t = 0; t < s.cu[b + 1] - s.cu[b]; ++t) {
      const std::int64_t tok = s.cu[b] + t;
      for (int o = 0; o < 2; ++o)
        for (std::int64_t h = 0; h < s.ol[o].heads; ++h) {
          const std::int64_t base = s.head_base(o, b, t, h);
          for (int ch = 0; ch < d; ++ch) x[ch] = load_value(c.type, s.in_before[o], base + ch);
          const bool norm_this = o == 0 ? f.norm_q : f.norm_k;
          if (norm_this) {
            double squares = 0;
            for (double v : x) squares += v * v;
            const double inv_rms = 1.0 / std::sqrt(squares / d + static_cast<double>(f.eps));
            const std::vector<float>& w = o == 0 ? qw : kw;
            for (int ch = 0; ch < d; ++ch)
              x[ch] *= inv_rms * ((f.unit_offset ? 1.0 : 0.0) + static_cast<double>(w[ch]));
          }
          s.rotate_reference(x, tok, 1.0);
          // Pass-through channels of a head without a norm must come out exactly.
          const bool to_out = o == 0 || !f.kv_cache || f.k_out;
          for (int ch = 0; ch < d; ++ch) {
            const bool exact = ch >= c.rotary_dim && !norm_this;
            if (to_out) {
              expect_out[o][base + ch] = x[ch];
              owned_out[o][base + ch] = !exact;
            }
            if (o == 1 && f.kv_cache && slots[tok] >= 0) {
              expect_kc[cache_base(slots[tok], h) + ch] = x[ch];
              owned_kc[cache_base(slots[tok], h) + ch] = !exact;
            }
          }
        }
      if (f.kv_cache && f.with_v && slots[tok] >= 0)
        for (std::int64_t h = 0; h < hk; ++h)
          for (int ch = 0; ch < d; ++ch)  // V: an exact copy
            expect_vc[cache_base(slots[tok], h) + ch] =
                load_value(c.type, values, s.head_base(1, b, t, h) + ch);
    }
  for (int o = 0; o < 2; ++o)
    compare_buffer(c.type, c.inplace ? s.in[o] : s.out[o], expect_out[o], owned_out[o],
                   /*relative=*/true, r);
  if (!c.inplace)  // the inputs are read only
    for (int o = 0; o < 2; ++o) r.other_mismatches += s.in[o] != s.in_before[o];
  compare_buffer(c.type, k_cache, expect_kc, owned_kc, true, r);
  compare_buffer(c.type, v_cache, expect_vc, owned_vc, true, r);
  return r;
}

}  // namespace grape::test
