// One decode step of a Qwen3-style layer on the CPU (docs/cpu-kernels.md): QK-norm, RoPE and the
// paged KV-cache write in one rotate_qk call; then the new query's logits against the cached
// keys, computed twice, with every position shifted by 1000 the second time: RoPE's scores depend
// only on the offset, so both agree.
#include <cmath>
#include <cstdio>
#include <vector>

#include "cpu/rotate_qk.hpp"

namespace {

constexpr int head_dim = 64, q_heads = 4, kv_heads = 2, block_size = 4, blocks = 4;

grape::rotary_spec rope_spec() {  // RoPE, base 1e6, half-split (Qwen3's)
  grape::rotary_spec s;
  s.head_dim = s.rotary_dim = head_dim;
  for (int i = 0; i < head_dim / 2; ++i) s.inv_freq.push_back(std::pow(1e6, -2.0 * i / head_dim));
  return s;
}

/// Writes 6 tokens at positions first..first+5 into slots 0..5, then returns the logits of a 7th
/// token's query (head 0) against the 6 cached keys of KV head 0.
std::vector<float> logits_after_decode(std::int64_t first) {
  const grape::rotary_spec spec = rope_spec();
  std::vector<float> q(7 * q_heads * head_dim), k(7 * kv_heads * head_dim), v(k.size());
  for (std::size_t i = 0; i < q.size(); ++i) q[i] = std::sin(0.37f * i);
  for (std::size_t i = 0; i < k.size(); ++i) k[i] = std::cos(0.11f * i), v[i] = 0.5f;
  std::vector<float> k_cache(blocks * block_size * kv_heads * head_dim, 0.0f), v_cache(k_cache.size());
  std::vector<float> weight(head_dim, 1.0f);  // RMSNorm weights (learned in a real model)
  const std::int64_t slot_stride = kv_heads * head_dim, size = std::int64_t(k_cache.size());

  grape::cpu::qk_rms_norm norm;               // x / rms(x) · w over each head, before the rotation
  norm.q_weight = norm.k_weight = weight.data();
  grape::cpu::kv_cache_write kv;              // NHD pages [blocks, block_size, kv_heads, head_dim]
  kv.blocks = blocks;
  kv.block_size = block_size;
  kv.k = {k_cache.data(), size, block_size * slot_stride, slot_stride, head_dim};
  kv.v = {v_cache.data(), size, block_size * slot_stride, slot_stride, head_dim};

  // Tokens 0..5 (the prompt), then token 6 (the decode step): [tokens, heads, head_dim].
  for (auto [begin, count] : {std::pair{0, 6}, std::pair{6, 1}}) {
    std::vector<std::int64_t> positions, slots;
    for (int t = begin; t < begin + count; ++t) {
      positions.push_back(first + t);
      slots.push_back(t < 6 ? t : -1);  // the decode token's K is not needed again here
    }
    float* q_in = q.data() + begin * q_heads * head_dim;
    const float* k_in = k.data() + begin * kv_heads * head_dim;
    const float* v_in = v.data() + begin * kv_heads * head_dim;
    const std::int64_t q_row = q_heads * head_dim, row = kv_heads * head_dim;
    grape::cpu::rotate_qk_args args;
    args.q = {q_in, q_in, q_heads, count * q_row, 0, q_row, head_dim};  // Q in place
    args.k = {k_in, nullptr, kv_heads, count * row, 0, row, head_dim};  // K only to the cache
    args.seq_len = count;
    args.position_ids = positions.data();
    kv.values = {v_in, nullptr, kv_heads, count * row, 0, row, head_dim};
    kv.slot_mapping = slots.data();             // one slot per token, -1 skips it
    args.qk_norm = &norm;
    args.kv_cache = &kv;
    grape::cpu::rotate_qk(spec, args);
  }
  std::vector<float> logits;
  const float* q_new = q.data() + 6 * q_heads * head_dim;  // head 0 of the decode token
  for (int slot = 0; slot < 6; ++slot) {
    const float* key = k_cache.data() + slot * slot_stride;  // KV head 0 of that slot
    float dot = 0;
    for (int c = 0; c < head_dim; ++c) dot += q_new[c] * key[c];
    logits.push_back(dot / std::sqrt(float(head_dim)));
  }
  return logits;
}

}  // namespace

int main() {
  const std::vector<float> a = logits_after_decode(0), b = logits_after_decode(1000);
  float worst = 0;
  for (std::size_t j = 0; j < a.size(); ++j) {
    std::printf("key %zu: logit %+.6f at positions 0.., %+.6f at positions 1000..\n", j, a[j], b[j]);
    worst = std::fmax(worst, std::fabs(a[j] - b[j]));
  }
  std::printf("largest difference: %.2e\n", worst);
  return worst < 1e-5f ? 0 : 1;
}
