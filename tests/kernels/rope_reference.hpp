#pragma once
// Test harness for rotate_qk: builds Q/K buffers for a described case (layout, strides, GQA,
// positions, dtype, ...), runs the kernel and compares every element of the output buffers with
// an independent float64 rotation (cos/sin of m·θ in double, no phase arithmetic).
#include <Eigen/Core>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cpu/rotate_qk.hpp"
#include "cpu/rotate_qk_plan.hpp"
#include "grape/detail/error.hpp"
#include "grape/schedule/rotary_spec.hpp"

namespace grape::test {

enum class tensor_layout { bshd, bhsd, varlen };
enum class pos_mode { none, ids32, ids64, offsets };

/// 64-byte-aligned bytes, so that contiguous out-of-place cases can take the streaming-store path.
using byte_buffer = std::vector<unsigned char, Eigen::aligned_allocator<unsigned char>>;

struct rope_case {
  tensor_layout tl = tensor_layout::bshd;
  std::int64_t batch = 1;
  std::int64_t seq_len = 5;             // padded layouts
  std::vector<std::int64_t> lens;       // varlen: one length per sequence (batch = lens.size())
  std::int64_t hq = 2;
  std::int64_t hk = 1;
  int head_dim = 64;
  int rotary_dim = 64;
  math::layout_kind layout = math::layout_kind::half_split;
  pos_mode pm = pos_mode::ids64;
  int num_axes = 1;
  bool inplace = true;
  bool cached = false;
  bool backward = false;
  cpu::dtype type = cpu::dtype::f32;
  double factor = 1.0;
  std::int64_t pad = 0;                 // extra elements per token row (non-contiguous strides)
  int threads = 0;
  std::int64_t max_pos = 4096;
  std::uint32_t seed = 1;
  cpu::store_policy stores = cpu::store_policy::automatic;
};

struct rope_result {
  double max_error = 0;          // over rotated channels
  double tolerance = 0;
  std::int64_t other_mismatches = 0;  // pass-through channels and gaps that changed
  bool streamed = false;              // the plan chose streaming stores
};

inline std::size_t dtype_bytes(cpu::dtype t) { return t == cpu::dtype::f32 ? 4 : 2; }

inline double load_value(cpu::dtype t, const byte_buffer& buf, std::int64_t i) {
  const unsigned char* p = buf.data() + i * dtype_bytes(t);
  if (t == cpu::dtype::f32) { float v; std::memcpy(&v, p, 4); return v; }
  if (t == cpu::dtype::f16) { Eigen::half v; std::memcpy(&v, p, 2); return static_cast<float>(v); }
  Eigen::bfloat16 v; std::memcpy(&v, p, 2); return static_cast<float>(v);
}

inline void store_value(cpu::dtype t, byte_buffer& buf, std::int64_t i, double x) {
  unsigned char* p = buf.data() + i * dtype_bytes(t);
  if (t == cpu::dtype::f32) { const float v = static_cast<float>(x); std::memcpy(p, &v, 4); }
  else if (t == cpu::dtype::f16) { const Eigen::half v(static_cast<float>(x)); std::memcpy(p, &v, 2); }
  else { const Eigen::bfloat16 v(static_cast<float>(x)); std::memcpy(p, &v, 2); }
}

inline double default_tolerance(cpu::dtype t, double factor) {
  const double scale = std::max(1.0, std::abs(factor)) * 1.5;
  return scale * (t == cpu::dtype::f32 ? 2e-6 : t == cpu::dtype::f16 ? 1e-3 : 8e-3);
}

/// The spec of a case: default RoPE frequencies (base 10000), M-RoPE-like sections for axes > 1.
inline rotary_spec spec_of(const rope_case& c) {
  rotary_spec s;
  s.head_dim = c.head_dim;
  s.rotary_dim = c.rotary_dim;
  s.layout = c.layout;
  s.attention_factor = c.factor;
  const int half = c.rotary_dim / 2;
  for (int i = 0; i < half; ++i) s.inv_freq.push_back(std::pow(10000.0, -2.0 * i / c.rotary_dim));
  s.num_axes = c.num_axes;
  if (c.num_axes > 1)
    for (int i = 0; i < half; ++i) s.plane_axis.push_back((i * c.num_axes) / half);
  return s;
}

struct operand_layout {
  std::int64_t heads, token_stride, head_stride, batch_stride, size;
};

inline operand_layout layout_of(const rope_case& c, std::int64_t heads, std::int64_t total,
                                std::int64_t seq_len) {
  operand_layout o{heads, 0, 0, 0, 0};
  const std::int64_t d = c.head_dim;
  if (c.tl == tensor_layout::bhsd) {
    o.token_stride = d + c.pad;
    o.head_stride = seq_len * o.token_stride;
    o.batch_stride = heads * o.head_stride;
    o.size = c.batch * o.batch_stride + 3;
  } else {
    o.token_stride = heads * d + c.pad;
    o.head_stride = d;
    o.batch_stride = seq_len * o.token_stride;
    o.size = (c.tl == tensor_layout::varlen ? total : c.batch * seq_len) * o.token_stride + 3;
  }
  return o;
}

inline rope_result run_rope_case(const rope_case& c) {
  std::mt19937_64 rng(c.seed);
  std::uniform_real_distribution<double> unit(-1.0, 1.0);
  const rotary_spec spec = spec_of(c);
  const bool varlen = c.tl == tensor_layout::varlen;
  const std::int64_t batch = varlen ? static_cast<std::int64_t>(c.lens.size()) : c.batch;
  std::vector<std::int64_t> cu(1, 0);
  for (std::int64_t b = 0; b < batch; ++b) cu.push_back(cu.back() + (varlen ? c.lens[b] : c.seq_len));
  const std::int64_t total = cu.back();

  // Positions: per token and axis (what the reference uses), and what the kernel is given.
  std::vector<std::int64_t> pos(static_cast<std::size_t>(c.num_axes) * total);
  std::vector<std::int64_t> offsets(batch, 0);
  for (std::int64_t b = 0; b < batch; ++b) {
    const std::int64_t len = cu[b + 1] - cu[b];
    if (c.pm == pos_mode::offsets)
      offsets[b] = std::uniform_int_distribution<std::int64_t>(0, c.max_pos - len)(rng);
    for (std::int64_t s = 0; s < len; ++s)
      for (int a = 0; a < c.num_axes; ++a) {
        std::int64_t m = s;
        if (c.pm == pos_mode::offsets) m = offsets[b] + s;
        if (c.pm == pos_mode::ids32 || c.pm == pos_mode::ids64)
          m = std::uniform_int_distribution<std::int64_t>(0, c.max_pos - 1)(rng);
        pos[a * total + cu[b] + s] = m;
      }
  }
  std::vector<std::int32_t> pos32(pos.begin(), pos.end());

  const std::int64_t seq_len = varlen ? 0 : c.seq_len;
  const operand_layout ol[2] = {layout_of(c, c.hq, total, seq_len), layout_of(c, c.hk, total, seq_len)};
  byte_buffer in[2], out[2];
  for (int o = 0; o < 2; ++o) {
    in[o].resize(ol[o].size * dtype_bytes(c.type));
    for (std::int64_t i = 0; i < ol[o].size; ++i) store_value(c.type, in[o], i, unit(rng));
    out[o].resize(in[o].size());
    for (std::int64_t i = 0; i < ol[o].size; ++i) store_value(c.type, out[o], i, 7.0);
  }
  const byte_buffer in_before[2] = {in[0], in[1]};
  const byte_buffer out_before[2] = {out[0], out[1]};

  cpu::rotate_qk_args args;
  args.type = c.type;
  cpu::qk_tensor* t[2] = {&args.q, &args.k};
  for (int o = 0; o < 2; ++o) {
    t[o]->in = in[o].data();
    t[o]->out = c.inplace ? static_cast<void*>(in[o].data()) : out[o].data();
    t[o]->heads = ol[o].heads;
    t[o]->size = ol[o].size;
    t[o]->token_stride = ol[o].token_stride;
    t[o]->head_stride = ol[o].head_stride;
    t[o]->batch_stride = ol[o].batch_stride;
  }
  args.batch = batch;
  args.seq_len = seq_len;
  if (varlen) args.cu_seqlens = cu.data();
  if (c.pm == pos_mode::ids64) { args.position_ids = pos.data(); args.position_type = cpu::index_type::i64; }
  if (c.pm == pos_mode::ids32) { args.position_ids = pos32.data(); args.position_type = cpu::index_type::i32; }
  if (c.pm == pos_mode::offsets) args.offsets = offsets.data();
  args.max_position = c.max_pos;
  args.threads = c.threads;
  args.stores = c.stores;
  cpu::rotary_cache cache;
  if (c.cached) {
    cache = cpu::rotary_cache::build(spec, c.max_pos);
    args.cache = &cache;
  }
  rope_result r;
  r.streamed = cpu::detail::make_rotate_plan(spec, args).plan.stream_stores;
  if (c.backward) cpu::rotate_qk_backward(spec, args);
  else cpu::rotate_qk(spec, args);

  // Expected buffer contents: start from what the output buffer held, then set every element the
  // kernel owns.
  r.tolerance = default_tolerance(c.type, c.factor);
  const int half = c.rotary_dim / 2;
  const double sign = c.backward ? -1.0 : 1.0;
  for (int o = 0; o < 2; ++o) {
    const byte_buffer& before = c.inplace ? in_before[o] : out_before[o];
    const byte_buffer& got = c.inplace ? in[o] : out[o];
    std::vector<double> expect(ol[o].size);
    std::vector<char> rotated(ol[o].size, 0);
    for (std::int64_t i = 0; i < ol[o].size; ++i) expect[i] = load_value(c.type, before, i);
    for (std::int64_t b = 0; b < batch; ++b)
      for (std::int64_t s = 0; s < cu[b + 1] - cu[b]; ++s) {
        const std::int64_t tok = cu[b] + s;
        const std::int64_t row = varlen ? tok * ol[o].token_stride
                                        : b * ol[o].batch_stride + s * ol[o].token_stride;
        for (std::int64_t h = 0; h < ol[o].heads; ++h) {
          const std::int64_t base = row + h * ol[o].head_stride;
          for (int ch = c.rotary_dim; ch < c.head_dim; ++ch)
            expect[base + ch] = load_value(c.type, in_before[o], base + ch);
          for (int i = 0; i < half; ++i) {
            const int c0 = c.layout == math::layout_kind::half_split ? i : 2 * i;
            const int c1 = c.layout == math::layout_kind::half_split ? i + half : 2 * i + 1;
            const int axis = spec.plane_axis.empty() ? 0 : spec.plane_axis[i];
            const double angle = static_cast<double>(pos[axis * total + tok]) * spec.inv_freq[i];
            const double cs = c.factor * std::cos(angle), sn = sign * c.factor * std::sin(angle);
            const double x0 = load_value(c.type, in_before[o], base + c0);
            const double x1 = load_value(c.type, in_before[o], base + c1);
            expect[base + c0] = x0 * cs - x1 * sn;
            expect[base + c1] = x1 * cs + x0 * sn;
            rotated[base + c0] = rotated[base + c1] = 1;
          }
        }
      }
    for (std::int64_t i = 0; i < ol[o].size; ++i) {
      const double g = load_value(c.type, got, i);
      if (rotated[i]) r.max_error = std::max(r.max_error, std::abs(g - expect[i]));
      else if (!(g == expect[i])) ++r.other_mismatches;
    }
  }
  return r;
}

}  // namespace grape::test
