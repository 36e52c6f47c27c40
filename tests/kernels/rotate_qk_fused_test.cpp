// The fused rotate_qk (per-head RMSNorm before the rotation, rotated K and V written into a paged
// KV cache) against the float64 reference in fused_reference.hpp: every element of Q, K, both
// caches is checked (written elements within tolerance, V copies and everything else exactly).
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "fused_reference.hpp"
#include "rope_case_gen.hpp"

namespace grape::test {
namespace {

using cpu::dtype;
using math::layout_kind;

void expect_ok(const fused_case& f) {
  const fused_result r = run_fused_case(f);
  EXPECT_LE(r.max_error, r.tolerance);
  EXPECT_EQ(r.other_mismatches, 0);
}

TEST(rotate_qk_fused, qk_norm_every_dtype_layout_and_tensor_layout) {
  for (auto type : {dtype::f32, dtype::f16, dtype::bf16})
    for (auto lk : {layout_kind::half_split, layout_kind::interleaved})
      for (auto tl : {tensor_layout::bshd, tensor_layout::bhsd, tensor_layout::varlen})
        for (bool inplace : {true, false}) {
          fused_case f;
          f.rope.type = type;
          f.rope.layout = lk;
          f.rope.tl = tl;
          f.rope.inplace = inplace;
          f.rope.batch = 2;
          f.rope.lens = {3, 0, 5};
          f.rope.head_dim = f.rope.rotary_dim = 128;
          f.rope.hq = 4;
          f.rope.hk = 2;
          f.norm_q = f.norm_k = true;
          SCOPED_TRACE(::testing::Message() << "type " << int(type) << " layout " << int(lk)
                                            << " tl " << int(tl) << " inplace " << inplace);
          expect_ok(f);
        }
}

TEST(rotate_qk_fused, qk_norm_covers_pass_through_channels_and_odd_dims) {
  // Partial rotary: the norm is over all head_dim channels, the rotation over the first
  // rotary_dim; run-time dims and tails that are not a multiple of the vector width.
  for (auto [hd, rd] : {std::pair{128, 64}, std::pair{96, 32}, std::pair{80, 80}, std::pair{6, 4},
                        std::pair{256, 256}, std::pair{64, 64}})
    for (bool unit_offset : {false, true})
      for (bool cached : {false, true}) {
        fused_case f;
        f.rope.head_dim = hd;
        f.rope.rotary_dim = rd;
        f.rope.cached = cached;
        f.rope.factor = 1.3;
        f.norm_q = f.norm_k = true;
        f.unit_offset = unit_offset;
        f.eps = 1e-5f;
        SCOPED_TRACE(::testing::Message() << "hd " << hd << " rd " << rd << " unit_offset "
                                          << unit_offset << " cached " << cached);
        expect_ok(f);
      }
}

TEST(rotate_qk_fused, qk_norm_of_one_operand_only) {
  for (auto [nq, nk] : {std::pair{true, false}, std::pair{false, true}})
    for (bool inplace : {true, false}) {
      fused_case f;
      f.rope.inplace = inplace;
      f.rope.head_dim = 128;
      f.rope.rotary_dim = 64;
      f.norm_q = nq;
      f.norm_k = nk;
      SCOPED_TRACE(::testing::Message() << "norm_q " << nq << " norm_k " << nk);
      expect_ok(f);
    }
}

TEST(rotate_qk_fused, kv_cache_nhd_and_hnd_pages) {
  for (bool hnd : {false, true})
    for (std::int64_t block_size : {1, 4, 16})
      for (auto type : {dtype::f32, dtype::bf16})
        for (std::int64_t pad : {0, 3}) {
          fused_case f;
          f.rope.type = type;
          f.rope.tl = tensor_layout::varlen;
          f.rope.lens = {7, 1, 12};
          f.rope.hq = 4;
          f.rope.hk = 2;
          f.kv_cache = true;
          f.hnd = hnd;
          f.block_size = block_size;
          f.cache_pad = pad;
          SCOPED_TRACE(::testing::Message() << "hnd " << hnd << " block_size " << block_size
                                            << " type " << int(type) << " pad " << pad);
          const fused_result r = run_fused_case(f);
          EXPECT_LE(r.max_error, r.tolerance);
          EXPECT_EQ(r.other_mismatches, 0);
          EXPECT_GT(r.cached_tokens, 0);
        }
}

TEST(rotate_qk_fused, kv_cache_without_v_or_k_out_and_every_position_source) {
  for (bool with_v : {true, false})
    for (bool k_out : {true, false})
      for (auto pm : {pos_mode::none, pos_mode::ids32, pos_mode::offsets})
        for (bool inplace : {true, false}) {
          fused_case f;
          f.rope.pm = pm;
          f.rope.batch = 3;
          f.rope.seq_len = 4;
          f.rope.inplace = inplace;
          f.rope.head_dim = 96;
          f.rope.rotary_dim = 64;
          f.rope.layout = layout_kind::interleaved;
          f.kv_cache = true;
          f.with_v = with_v;
          f.k_out = k_out;
          SCOPED_TRACE(::testing::Message() << "with_v " << with_v << " k_out " << k_out << " pm "
                                            << int(pm) << " inplace " << inplace);
          expect_ok(f);
        }
}

TEST(rotate_qk_fused, decode_step_with_norm_cache_and_gqa_on_two_threads) {
  // Qwen3-like decode: one new token per sequence at its offset, QK-norm, rotated K and V
  // appended to the paged cache; and the same for a prefill of a few hundred tokens.
  for (std::int64_t seq_len : {1, 300})
    for (int threads : {1, 2}) {
      fused_case f;
      f.rope.batch = 4;
      f.rope.seq_len = seq_len;
      f.rope.pm = pos_mode::offsets;
      f.rope.max_pos = 1 << 20;
      f.rope.hq = 8;
      f.rope.hk = 2;
      f.rope.head_dim = f.rope.rotary_dim = 128;
      f.rope.type = dtype::bf16;
      f.rope.threads = threads;
      f.norm_q = f.norm_k = true;
      f.kv_cache = true;
      f.block_size = 16;
      f.skip_percent = seq_len == 1 ? 0 : 10;
      SCOPED_TRACE(::testing::Message() << "seq_len " << seq_len << " threads " << threads);
      expect_ok(f);
    }
}

TEST(rotate_qk_fused, multi_axis_positions) {
  fused_case f;
  f.rope.num_axes = 3;
  f.rope.cached = false;
  f.rope.head_dim = f.rope.rotary_dim = 64;
  f.norm_q = f.norm_k = true;
  f.kv_cache = true;
  expect_ok(f);
}

RC_GTEST_PROP(rotate_qk_fused_property, random_cases_match_the_reference, ()) {
  fused_case f;
  f.rope = draw_rope_case();
  f.norm_q = *rc::gen::arbitrary<bool>();
  f.norm_k = *rc::gen::arbitrary<bool>();
  f.unit_offset = *rc::gen::arbitrary<bool>();
  f.kv_cache = f.rope.hk > 0 && *rc::gen::arbitrary<bool>();
  RC_PRE(f.norm_q || f.norm_k || f.kv_cache);
  f.with_v = *rc::gen::arbitrary<bool>();
  f.k_out = *rc::gen::arbitrary<bool>();
  f.hnd = *rc::gen::arbitrary<bool>();
  f.block_size = *rc::gen::inRange<std::int64_t>(1, 9);
  f.spare_blocks = *rc::gen::inRange<std::int64_t>(0, 3);
  f.cache_pad = *rc::gen::inRange<std::int64_t>(0, 3);
  f.skip_percent = *rc::gen::inRange(0, 60);
  const fused_result r = run_fused_case(f);
  RC_ASSERT(r.max_error <= r.tolerance);
  RC_ASSERT(r.other_mismatches == 0);
}

}  // namespace
}  // namespace grape::test
