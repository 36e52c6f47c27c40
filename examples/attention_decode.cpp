// Decode over a paged KV cache (docs/attention.md): rotate_qk's fused write puts 21 tokens' rotated
// K and their V into NHD pages (blocks 2, 0, 3 of a pool of 4), then attention_decode computes the
// 21st token's attention from the cache alone. It must equal the last row of the fused prefill
// attention over the same 21 tokens.
#include <cmath>
#include <cstdio>
#include <vector>

#include "cpu/attention_decode.hpp"
#include "grape/builtins.hpp"

int main() {
  using namespace grape;
  const int q_heads = 4, kv_heads = 2, d = 16;
  const std::int64_t len = 21, block_size = 8, blocks = 4;
  const auto llama_rope_instance = rope::make({d, d, 500000.0, 1.0});  // head_dim, rotary_dim, base, factor
  std::vector<float> q(len * q_heads * d), k(len * kv_heads * d), v(k.size());
  for (std::size_t i = 0; i < q.size(); ++i) q[i] = std::sin(0.37f * i);
  for (std::size_t i = 0; i < k.size(); ++i) k[i] = std::cos(0.11f * i), v[i] = std::sin(0.05f * i);

  // The cache write (what a serving engine does at prefill and at each step).
  const std::vector<std::int32_t> block_table = {2, 0, 3};
  std::vector<std::int64_t> slots;
  for (std::int64_t t = 0; t < len; ++t) slots.push_back(block_table[t / block_size] * block_size + t % block_size);
  const std::int64_t row = kv_heads * d, page = block_size * row, size = blocks * page;
  std::vector<float> k_pages(size), v_pages(size);
  cpu::kv_cache_write kv;
  kv.blocks = blocks;
  kv.block_size = block_size;
  kv.k = {k_pages.data(), size, page, row, d};
  kv.v = {v_pages.data(), size, page, row, d};
  kv.values = {v.data(), nullptr, kv_heads, len * row, 0, row, d};
  kv.slot_mapping = slots.data();
  cpu::rotate_qk_args w;
  w.k = {k.data(), nullptr, kv_heads, len * row, 0, row, d};  // K only to the cache
  w.seq_len = len;
  w.kv_cache = &kv;
  cpu::rotate_qk(llama_rope_instance, w);

  // The decode step for the last token's query.
  const std::int64_t seq_lens[] = {len};
  std::vector<float> out(q_heads * d);
  const std::int64_t max_blocks = 3;
  cpu::decode_args a;
  a.q = q.data() + (len - 1) * q_heads * d;  // [batch, q_heads, head_dim], contiguous
  a.batch = 1;
  a.q_heads = q_heads;
  a.kv_heads = kv_heads;
  a.k = {k_pages.data(), size, page, row, d};  // NHD pages [blocks, block_size, heads, d]
  a.v = {v_pages.data(), size, page, row, d};
  a.blocks = blocks;
  a.block_size = block_size;
  a.block_table = block_table.data();
  a.max_blocks = max_blocks;
  a.seq_lens = seq_lens;  // cached tokens per sequence, the new one included
  a.out = out.data();     // [batch, q_heads, head_dim]
  cpu::attention_decode(llama_rope_instance, a);

  // The same row from the prefill kernel on the unrotated Q and K.
  std::vector<float> full(q.size());
  cpu::attention_args p;
  p.qk.q = {q.data(), nullptr, q_heads, static_cast<std::int64_t>(q.size()), 0, q_heads * d, d};
  p.qk.k = {k.data(), nullptr, kv_heads, len * row, 0, row, d};
  p.v = {v.data(), nullptr, kv_heads, len * row, 0, row, d};
  p.qk.seq_len = len;
  p.out = full.data();
  cpu::attention(llama_rope_instance, p);
  float worst = 0;
  for (int i = 0; i < q_heads * d; ++i) worst = std::max(worst, std::abs(out[i] - full[(len - 1) * q_heads * d + i]));
  std::printf("decode vs prefill, last token: max |difference| %.2e\n", worst);
  return worst < 1e-5f ? 0 : 1;
}
