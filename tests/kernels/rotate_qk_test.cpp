// rotate_qk against the float64 reference in rope_reference.hpp: every layout, stride, GQA shape,
// position source, dtype and tail size; every element of the output buffers is checked (rotated
// channels within tolerance, pass-through channels and gaps exactly).
#include <gtest/gtest.h>

#include <vector>

#include "rope_reference.hpp"

namespace grape::test {
namespace {

using cpu::dtype;
using math::layout_kind;

void expect_ok(const rope_case& c) {
  const rope_result r = run_rope_case(c);
  EXPECT_LE(r.max_error, r.tolerance);
  EXPECT_EQ(r.other_mismatches, 0);
}

TEST(rotate_qk, every_layout_kind_and_specialised_dim) {
  for (auto tl : {tensor_layout::bshd, tensor_layout::bhsd, tensor_layout::varlen})
    for (auto lk : {layout_kind::half_split, layout_kind::interleaved})
      for (int d : {64, 128, 256, 80}) {
        rope_case c;
        c.tl = tl;
        c.layout = lk;
        c.head_dim = c.rotary_dim = d;
        c.batch = 2;
        c.seq_len = 3;
        c.lens = {3, 0, 4};
        SCOPED_TRACE(::testing::Message() << "tl " << int(tl) << " layout " << int(lk) << " d " << d);
        expect_ok(c);
      }
}

TEST(rotate_qk, partial_rotary_in_and_out_of_place) {
  for (bool inplace : {true, false})
    for (auto lk : {layout_kind::half_split, layout_kind::interleaved})
      for (auto [hd, rd] : {std::pair{128, 64}, std::pair{96, 32}, std::pair{64, 2}, std::pair{6, 4}}) {
        rope_case c;
        c.inplace = inplace;
        c.layout = lk;
        c.head_dim = hd;
        c.rotary_dim = rd;
        SCOPED_TRACE(::testing::Message() << "inplace " << inplace << " hd " << hd << " rd " << rd);
        expect_ok(c);
      }
}

TEST(rotate_qk, gqa_mqa_and_single_operand) {
  for (auto [hq, hk] : {std::pair<std::int64_t, std::int64_t>{8, 2}, {4, 1}, {3, 0}, {0, 5}, {1, 1}}) {
    rope_case c;
    c.hq = hq;
    c.hk = hk;
    c.tl = tensor_layout::bhsd;
    c.seq_len = 4;
    SCOPED_TRACE(::testing::Message() << "hq " << hq << " hk " << hk);
    expect_ok(c);
  }
}

TEST(rotate_qk, position_sources) {
  for (auto tl : {tensor_layout::bshd, tensor_layout::varlen})
    for (auto pm : {pos_mode::none, pos_mode::ids32, pos_mode::ids64, pos_mode::offsets}) {
      rope_case c;
      c.tl = tl;
      c.pm = pm;
      c.batch = 3;
      c.seq_len = 5;
      c.lens = {1, 6, 2};
      SCOPED_TRACE(::testing::Message() << "tl " << int(tl) << " pm " << int(pm));
      expect_ok(c);
    }
}

TEST(rotate_qk, multi_axis_positions) {
  for (bool cached : {false, true})
    for (int axes : {2, 3}) {
      rope_case c;
      c.num_axes = axes;
      c.cached = cached;
      c.head_dim = c.rotary_dim = 128;
      c.seq_len = 6;
      expect_ok(c);
      c.pm = pos_mode::offsets;  // text tokens: every axis at the same position
      expect_ok(c);
    }
}

TEST(rotate_qk, storage_types) {
  for (auto t : {dtype::f32, dtype::f16, dtype::bf16})
    for (bool inplace : {true, false})
      for (auto lk : {layout_kind::half_split, layout_kind::interleaved}) {
        rope_case c;
        c.type = t;
        c.inplace = inplace;
        c.layout = lk;
        c.head_dim = 128;
        c.rotary_dim = 96;
        c.hq = 3;
        SCOPED_TRACE(::testing::Message() << "dtype " << int(t) << " inplace " << inplace);
        expect_ok(c);
      }
}

TEST(rotate_qk, padded_strides_tails_and_threads) {
  for (auto tl : {tensor_layout::bshd, tensor_layout::bhsd, tensor_layout::varlen})
    for (int threads : {1, 2}) {
      rope_case c;
      c.tl = tl;
      c.pad = 5;
      c.threads = threads;
      c.hq = 5;
      c.hk = 3;
      c.seq_len = 7;
      c.batch = 2;
      c.lens = {7, 11};
      c.inplace = threads == 1;
      expect_ok(c);
    }
}

TEST(rotate_qk, attention_factor_and_cache) {
  for (bool cached : {false, true})
    for (auto t : {dtype::f32, dtype::bf16}) {
      rope_case c;
      c.factor = 1.3;
      c.cached = cached;
      c.type = t;
      c.seq_len = 9;
      expect_ok(c);
    }
}

TEST(rotate_qk, backward_is_the_inverse_rotation) {
  for (bool cached : {false, true})
    for (auto lk : {layout_kind::half_split, layout_kind::interleaved}) {
      rope_case c;
      c.backward = true;
      c.cached = cached;
      c.layout = lk;
      c.factor = 0.8;
      c.num_axes = cached ? 1 : 2;
      c.inplace = false;
      c.head_dim = 96;
      c.rotary_dim = 64;
      expect_ok(c);
    }
}

TEST(rotate_qk, cached_and_on_the_fly_are_bitwise_equal) {
  rotary_spec spec = spec_of(rope_case{});
  spec.head_dim = spec.rotary_dim = 64;
  const std::int64_t tokens = 37, heads = 3;
  std::vector<float> x(tokens * heads * 64);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 7919) % 1000) / 500.0f - 1.0f;
  std::vector<std::int64_t> pos(tokens);
  for (std::int64_t t = 0; t < tokens; ++t) pos[t] = (t * 104729) % 50000;
  std::vector<float> a(x.size()), b(x.size());
  cpu::apply_rotary(spec, dtype::f32, x.data(), a.data(), tokens, heads, pos.data());
  const cpu::rotary_cache cache = cpu::rotary_cache::build(spec, 50000);
  cpu::rotate_qk_args args;
  args.q = {x.data(), b.data(), heads, static_cast<std::int64_t>(x.size()), 0, heads * 64, 64};
  args.seq_len = tokens;
  args.position_ids = pos.data();
  args.cache = &cache;
  cpu::rotate_qk(spec, args);
  EXPECT_EQ(a, b);
}

TEST(rotate_qk, apply_rotary_in_place_matches_out_of_place) {
  rotary_spec spec = spec_of(rope_case{});
  const std::int64_t tokens = 19, heads = 5;
  std::vector<float> x(tokens * heads * 64);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(static_cast<float>(i));
  std::vector<std::int64_t> pos(tokens);
  for (std::int64_t t = 0; t < tokens; ++t) pos[t] = 3 * t + 1;
  std::vector<float> out(x.size());
  cpu::apply_rotary(spec, dtype::f32, x.data(), out.data(), tokens, heads, pos.data());
  cpu::apply_rotary(spec, dtype::f32, x.data(), x.data(), tokens, heads, pos.data());
  EXPECT_EQ(x, out);
}

TEST(rotate_qk, empty_inputs_do_nothing) {
  rope_case c;
  c.seq_len = 0;
  expect_ok(c);
  c.tl = tensor_layout::varlen;
  c.lens = {};
  expect_ok(c);
}

}  // namespace
}  // namespace grape::test
