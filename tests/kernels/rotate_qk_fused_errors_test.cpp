// Bad fused arguments (QK-norm, KV-cache write): each is refused with grape::input_error naming
// the argument, and nothing is written to Q, K or either cache.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "cpu/rotate_qk.hpp"
#include "expect_input_error.hpp"
#include "grape/detail/error.hpp"

namespace grape::test {
namespace {

// 4 tokens, Q 2 heads, K 1 head, head_dim 8; a flat cache of 6 slots (block_size 2, 3 blocks).
struct fixture {
  rotary_spec spec;
  std::vector<float> q, k, v, k_cache, v_cache;
  std::vector<float> q_weight = std::vector<float>(8, 1.0f), k_weight = std::vector<float>(8, 0.5f);
  std::vector<std::int64_t> pos{0, 1, 2, 3};
  std::vector<std::int64_t> slots{5, -1, 0, 2};
  cpu::qk_rms_norm norm;
  cpu::kv_cache_write kv;
  cpu::rotate_qk_args args;

  fixture() {
    spec.head_dim = spec.rotary_dim = 8;
    spec.inv_freq = {1.0, 0.1, 0.01, 0.001};
    q.assign(4 * 2 * 8, 0.5f);
    k.assign(4 * 1 * 8, 0.25f);
    v.assign(4 * 1 * 8, 0.75f);
    k_cache.assign(6 * 8, 9.0f);
    v_cache.assign(6 * 8, 9.0f);
    args.q = {q.data(), q.data(), 2, static_cast<std::int64_t>(q.size()), 0, 16, 8};
    args.k = {k.data(), k.data(), 1, static_cast<std::int64_t>(k.size()), 0, 8, 8};
    args.seq_len = 4;
    args.position_ids = pos.data();
    norm.q_weight = q_weight.data();
    norm.k_weight = k_weight.data();
    kv.slot_mapping = slots.data();
    kv.blocks = 3;
    kv.block_size = 2;
    kv.k = {k_cache.data(), static_cast<std::int64_t>(k_cache.size()), 16, 8, 8};
    kv.v = {v_cache.data(), static_cast<std::int64_t>(v_cache.size()), 16, 8, 8};
    kv.values = {v.data(), nullptr, 1, static_cast<std::int64_t>(v.size()), 0, 8, 8};
    args.qk_norm = &norm;
    args.kv_cache = &kv;
  }
  std::vector<std::vector<float>> buffers() const { return {q, k, k_cache, v_cache}; }
};

void expect_error(const std::function<void(fixture&)>& mutate, const std::string& names) {
  expect_input_error<fixture>(mutate, names);
}

TEST(rotate_qk_fused_errors, the_fixture_is_valid) {
  fixture f;
  cpu::rotate_qk(f.spec, f.args);
  EXPECT_NE(f.k_cache[5 * 8], 9.0f);  // slot 5 written
  EXPECT_EQ(f.k_cache[1 * 8], 9.0f);  // slot 1 not
  EXPECT_EQ(f.v_cache[2 * 8 + 3], 0.75f);
}

TEST(rotate_qk_fused_errors, qk_norm) {
  expect_error([](fixture& f) { f.norm.q_weight = f.norm.k_weight = nullptr; }, "qk_norm");
  expect_error([](fixture& f) { f.norm.eps = 0.0f; }, "qk_norm.eps");
  expect_error([](fixture& f) { f.norm.eps = -1e-6f; }, "qk_norm.eps");
  expect_error([](fixture& f) { f.norm.eps = NAN; }, "qk_norm.eps");
  expect_error([](fixture& f) { f.q_weight[3] = INFINITY; }, "qk_norm.q_weight[3]");
  expect_error([](fixture& f) { f.k_weight[7] = NAN; }, "qk_norm.k_weight[7]");
}

TEST(rotate_qk_fused_errors, kv_cache_arguments) {
  expect_error([](fixture& f) { f.kv.slot_mapping = nullptr; }, "kv_cache.slot_mapping");
  expect_error([](fixture& f) { f.slots[1] = 6; }, "kv_cache.slot_mapping[1] = 6");
  expect_error([](fixture& f) { f.slots[3] = -2; }, "kv_cache.slot_mapping[3]");
  expect_error([](fixture& f) { f.slots[3] = 5; }, "repeats slot 5");
  expect_error([](fixture& f) { f.kv.block_size = 0; }, "kv_cache.block_size");
  expect_error([](fixture& f) { f.kv.blocks = -1; }, "kv_cache.blocks");
  expect_error([](fixture& f) { f.kv.blocks = std::int64_t{1} << 62; f.kv.block_size = 8; },
               "overflows");
  expect_error([](fixture& f) { f.kv.k.data = nullptr; }, "kv_cache.k.data");
  expect_error([](fixture& f) { f.kv.k.size = 47; }, "kv_cache.k.size");
  expect_error([](fixture& f) { f.kv.v.size = 40; }, "kv_cache.v.size");
  expect_error([](fixture& f) { f.kv.k.slot_stride = 4; }, "kv_cache.k: strides make slots or heads overlap");
  expect_error([](fixture& f) { f.kv.v.block_stride = -16; }, "kv_cache.v.block_stride");
  expect_error([](fixture& f) { f.kv.v.data = nullptr; }, "kv_cache.v.data is null");
  expect_error([](fixture& f) { f.kv.values.in = nullptr; }, "kv_cache.values.in is null");
  expect_error([](fixture& f) { f.kv.values.heads = 2; }, "kv_cache.values.heads");
  expect_error([](fixture& f) { f.kv.values.size = 31; }, "kv_cache.values.size");
  expect_error([](fixture& f) { f.args.k.heads = 0; }, "k.heads is 0");
}

TEST(rotate_qk_fused_errors, overlapping_buffers) {
  expect_error([](fixture& f) { f.kv.v.data = f.k_cache.data(); }, "kv_cache.v.data overlaps kv_cache.k");
  expect_error([](fixture& f) { f.kv.k.data = f.k.data(); f.kv.k.size = 100; }, "kv_cache.k.data overlaps k");
  expect_error([](fixture& f) { f.kv.v.data = f.v.data(); f.kv.v.size = 100; }, "kv_cache.v.data overlaps");
  expect_error([](fixture& f) { f.kv.k.data = f.q.data() + 8; f.kv.k.size = 48; }, "kv_cache.k.data overlaps q");
}

TEST(rotate_qk_fused_errors, forward_only) {
  fixture f;
  EXPECT_THROW(cpu::rotate_qk_backward(f.spec, f.args), input_error);
  std::vector<double> grad(4);
  EXPECT_THROW(cpu::rotate_qk_inv_freq_grad(f.spec, f.args, f.q.data(), f.k.data(), grad.data()),
               input_error);
  // k.out may be null only with a KV cache.
  f.args.kv_cache = nullptr;
  f.args.k.out = nullptr;
  EXPECT_THROW(cpu::rotate_qk(f.spec, f.args), input_error);
}

}  // namespace
}  // namespace grape::test
