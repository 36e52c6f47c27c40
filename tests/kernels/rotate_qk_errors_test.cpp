// Bad arguments: each is refused with grape::input_error naming the argument, before any access.
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

struct fixture {
  rotary_spec spec;
  std::vector<float> q, k;
  std::vector<std::int64_t> pos{0, 1, 2, 3};
  cpu::rotate_qk_args args;

  fixture() {
    spec.head_dim = spec.rotary_dim = 8;
    spec.inv_freq = {1.0, 0.1, 0.01, 0.001};
    q.assign(4 * 2 * 8, 0.5f);
    k.assign(4 * 1 * 8, 0.25f);
    args.q = {q.data(), q.data(), 2, static_cast<std::int64_t>(q.size()), 0, 16, 8};
    args.k = {k.data(), k.data(), 1, static_cast<std::int64_t>(k.size()), 0, 8, 8};
    args.seq_len = 4;
    args.position_ids = pos.data();
  }
  std::vector<std::vector<float>> buffers() const { return {q, k}; }
};

void expect_error(const std::function<void(fixture&)>& mutate, const std::string& names) {
  expect_input_error<fixture>(mutate, names);
}

TEST(rotate_qk_errors, spec) {
  expect_error([](fixture& f) { f.spec.rotary_dim = 7; }, "rotary_dim");
  expect_error([](fixture& f) { f.spec.rotary_dim = 10; }, "rotary_dim");
  expect_error([](fixture& f) { f.spec.rotary_dim = 0; }, "rotary_dim");
  expect_error([](fixture& f) { f.spec.head_dim = -1; }, "head_dim");
  expect_error([](fixture& f) { f.spec.inv_freq.pop_back(); }, "inv_freq");
  expect_error([](fixture& f) { f.spec.inv_freq[2] = NAN; }, "inv_freq[2]");
  expect_error([](fixture& f) { f.spec.attention_factor = INFINITY; }, "attention_factor");
  expect_error([](fixture& f) { f.spec.num_axes = 0; }, "num_axes");
  expect_error([](fixture& f) { f.spec.plane_axis = {0, 0, 1, 0}; }, "plane_axis[2]");
  expect_error([](fixture& f) { f.spec.plane_axis = {0}; }, "plane_axis");
}

TEST(rotate_qk_errors, tensors) {
  expect_error([](fixture& f) { f.args.q.in = nullptr; }, "q.in");
  expect_error([](fixture& f) { f.args.k.out = nullptr; }, "k.out");
  expect_error([](fixture& f) { f.args.q.heads = -1; }, "q.heads");
  expect_error([](fixture& f) { f.args.q.token_stride = -16; }, "q.token_stride");
  expect_error([](fixture& f) { f.args.k.head_stride = -8; }, "k.head_stride");
  expect_error([](fixture& f) { f.args.q.size = 63; }, "q.size");
  expect_error([](fixture& f) { f.args.q.heads = 3; }, "q");  // heads overlap the next token
  expect_error([](fixture& f) { f.args.q.head_stride = 4; }, "overlap");
  expect_error([](fixture& f) { f.args.q.out = f.q.data() + 1; }, "q.out overlaps");
  expect_error([](fixture& f) { f.args.seq_len = -1; }, "seq_len");
  expect_error(
      [](fixture& f) {
        f.pos.push_back(4);
        f.args.position_ids = f.pos.data();
        f.args.seq_len = 5;
      },
      "q.size");
  expect_error([](fixture& f) { f.args.batch = -2; }, "batch");
  expect_error([](fixture& f) { f.args.threads = -1; }, "threads");
  expect_error([](fixture& f) { f.args.type = static_cast<cpu::dtype>(9); }, "type");
}

TEST(rotate_qk_errors, positions) {
  expect_error([](fixture& f) { f.pos[2] = -1; }, "position_ids[2]");
  expect_error([](fixture& f) { f.args.max_position = 3; }, "position_ids[3]");
  expect_error([](fixture& f) { f.args.max_position = 0; }, "max_position");
  static std::int64_t offsets[1] = {10};
  expect_error([](fixture& f) { f.args.offsets = offsets; }, "both set");
  expect_error([](fixture& f) { f.args.position_ids = nullptr; f.args.offsets = offsets; f.args.max_position = 13; },
               "offsets[0]");
  expect_error([](fixture& f) { f.args.position_ids = nullptr; f.args.max_position = 3; }, "max_position");
  expect_error([](fixture& f) { f.args.position_type = static_cast<cpu::index_type>(5); }, "position_type");
  static std::int64_t bad_cu[3] = {0, 3, 2};
  expect_error([](fixture& f) { f.args.cu_seqlens = bad_cu; f.args.batch = 2; }, "cu_seqlens");
  static std::int64_t bad_cu0[2] = {1, 4};
  expect_error([](fixture& f) { f.args.cu_seqlens = bad_cu0; }, "cu_seqlens[0]");
}

TEST(rotate_qk_errors, cache) {
  static cpu::rotary_cache small;
  expect_error(
      [](fixture& f) {
        small = cpu::rotary_cache::build(f.spec, 3);
        f.args.cache = &small;
      },
      "position_ids[3]");
  static cpu::rotary_cache other;
  expect_error(
      [](fixture& f) {
        rotary_spec s = f.spec;
        s.inv_freq[0] = 2.0;
        other = cpu::rotary_cache::build(s, 8);
        f.args.cache = &other;
      },
      "inv_freq");
  static cpu::rotary_cache window;
  expect_error(
      [](fixture& f) {
        window = cpu::rotary_cache::build(f.spec, 8, 1);
        f.args.cache = &window;
      },
      "position_ids[0]");
  fixture f;
  EXPECT_THROW(cpu::rotary_cache::build(f.spec, 0), input_error);
  EXPECT_THROW(cpu::rotary_cache::build(f.spec, 5, 5), input_error);
  EXPECT_THROW(cpu::rotary_cache::build(f.spec, 5, -1), input_error);
}

TEST(rotate_qk_errors, apply_rotary) {
  fixture f;
  EXPECT_THROW(cpu::apply_rotary(f.spec, cpu::dtype::f32, f.q.data(), f.q.data(), 4, 2, nullptr),
               input_error);
  EXPECT_THROW(cpu::apply_rotary(f.spec, cpu::dtype::f32, nullptr, f.q.data(), 4, 2, f.pos.data()),
               input_error);
  EXPECT_THROW(cpu::apply_rotary(f.spec, cpu::dtype::f32, f.q.data(), f.q.data(), -4, 2, f.pos.data()),
               input_error);
  EXPECT_THROW(cpu::apply_rotary(f.spec, cpu::dtype::f32, f.q.data(), f.q.data(), 4, -2, f.pos.data()),
               input_error);
  std::int64_t huge = std::int64_t{1} << 62;
  EXPECT_THROW(cpu::apply_rotary(f.spec, cpu::dtype::f32, f.q.data(), f.q.data(), huge, huge, f.pos.data()),
               input_error);
}

}  // namespace
}  // namespace grape::test
