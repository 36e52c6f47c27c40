#pragma once
// Test harness for rotate_qk: builds Q/K buffers for a described case (layout, strides, GQA,
// positions, dtype, ...), runs the kernel and compares every element of the output buffers with
// an independent float64 rotation (cos/sin of m·θ in double, no phase arithmetic).
#include <Eigen/Core>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <new>
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

/// Allocates on 64-byte lines whatever the vector ISA (Eigen::aligned_allocator aligns only to
/// EIGEN_MAX_ALIGN_BYTES: 32 on an AVX2 machine, where some buffers then missed the line).
template <class T>
struct line_allocator {
  using value_type = T;
  line_allocator() = default;
  template <class U>
  line_allocator(const line_allocator<U>&) {}
  T* allocate(std::size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t{64})); }
  void deallocate(T* p, std::size_t) { ::operator delete(p, std::align_val_t{64}); }
  template <class U>
  bool operator==(const line_allocator<U>&) const { return true; }
};

/// 64-byte-aligned bytes, so that contiguous out-of-place cases can take the streaming-store path.
using byte_buffer = std::vector<unsigned char, line_allocator<unsigned char>>;

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

/// The buffers, positions and arguments of one case, ready for a kernel call (pointers in
/// `args` point into this object, hence not copyable).
struct rope_setup {
  rope_case c;
  rotary_spec spec;
  bool varlen = false;
  std::int64_t batch = 0, seq_len = 0, total = 0;
  std::vector<std::int64_t> cu{0};
  std::vector<std::int64_t> pos;      // [num_axes, total]: what the reference uses
  std::vector<std::int32_t> pos32;
  std::vector<std::int64_t> offsets;
  operand_layout ol[2];
  byte_buffer in[2], out[2];          // Q, K
  byte_buffer in_before[2], out_before[2];
  cpu::rotary_cache cache;
  cpu::rotate_qk_args args;
  std::mt19937_64 rng;

  explicit rope_setup(const rope_case& rc) : c(rc), spec(spec_of(rc)), rng(rc.seed) {
    std::uniform_real_distribution<double> unit(-1.0, 1.0);
    varlen = c.tl == tensor_layout::varlen;
    batch = varlen ? static_cast<std::int64_t>(c.lens.size()) : c.batch;
    for (std::int64_t b = 0; b < batch; ++b) cu.push_back(cu.back() + (varlen ? c.lens[b] : c.seq_len));
    total = cu.back();

    // Positions: per token and axis (what the reference uses), and what the kernel is given.
    pos.resize(static_cast<std::size_t>(c.num_axes) * total);
    offsets.assign(batch, 0);
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
    pos32.assign(pos.begin(), pos.end());

    seq_len = varlen ? 0 : c.seq_len;
    ol[0] = layout_of(c, c.hq, total, seq_len);
    ol[1] = layout_of(c, c.hk, total, seq_len);
    for (int o = 0; o < 2; ++o) {
      in[o] = random_buffer(ol[o].size, unit);
      out[o].resize(in[o].size());
      for (std::int64_t i = 0; i < ol[o].size; ++i) store_value(c.type, out[o], i, 7.0);
      in_before[o] = in[o];
      out_before[o] = out[o];
    }

    args.type = c.type;
    cpu::qk_tensor* t[2] = {&args.q, &args.k};
    for (int o = 0; o < 2; ++o) {
      t[o]->in = in[o].data();
      t[o]->out = c.inplace ? static_cast<void*>(in[o].data()) : out[o].data();
      set_strides(*t[o], ol[o]);
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
    if (c.cached) {
      cache = cpu::rotary_cache::build(spec, c.max_pos);
      args.cache = &cache;
    }
  }
  rope_setup(const rope_setup&) = delete;
  rope_setup& operator=(const rope_setup&) = delete;

  byte_buffer random_buffer(std::int64_t elements, std::uniform_real_distribution<double>& unit) {
    byte_buffer b(elements * dtype_bytes(c.type));
    for (std::int64_t i = 0; i < elements; ++i) store_value(c.type, b, i, unit(rng));
    return b;
  }

  static void set_strides(cpu::qk_tensor& t, const operand_layout& o) {
    t.heads = o.heads;
    t.size = o.size;
    t.token_stride = o.token_stride;
    t.head_stride = o.head_stride;
    t.batch_stride = o.batch_stride;
  }

  /// Element offset of (token, head) in operand o's buffers (sequence b, index s of the token).
  std::int64_t head_base(int o, std::int64_t b, std::int64_t s, std::int64_t h) const {
    const std::int64_t tok = cu[b] + s;
    const std::int64_t row = varlen ? tok * ol[o].token_stride
                                    : b * ol[o].batch_stride + s * ol[o].token_stride;
    return row + h * ol[o].head_stride;
  }

  /// The rotation angle of plane i at flat token tok, in double (no phase arithmetic).
  double angle(std::int64_t tok, int i) const {
    const int axis = spec.plane_axis.empty() ? 0 : spec.plane_axis[i];
    return static_cast<double>(pos[axis * total + tok]) * spec.inv_freq[i];
  }

  /// Rotates head_dim channels x (double) of flat token tok in place: planes by their angle
  /// (times `sign`), times the attention factor; pass-through channels untouched.
  void rotate_reference(std::vector<double>& x, std::int64_t tok, double sign) const {
    const int half = c.rotary_dim / 2;
    for (int i = 0; i < half; ++i) {
      const int c0 = c.layout == math::layout_kind::half_split ? i : 2 * i;
      const int c1 = c.layout == math::layout_kind::half_split ? i + half : 2 * i + 1;
      const double a = angle(tok, i);
      const double cs = c.factor * std::cos(a), sn = sign * c.factor * std::sin(a);
      const double x0 = x[c0], x1 = x[c1];
      x[c0] = x0 * cs - x1 * sn;
      x[c1] = x1 * cs + x0 * sn;
    }
  }
};

/// Compares a buffer with its expectation: r.max_error gathers the error of the elements marked
/// `owned` (absolute, or relative to max(1, |expected|) with `relative`); every other element
/// must be exactly as expected (r.other_mismatches counts those that are not).
inline void compare_buffer(cpu::dtype type, const byte_buffer& got, const std::vector<double>& expect,
                           const std::vector<char>& owned, bool relative, rope_result& r) {
  for (std::size_t i = 0; i < expect.size(); ++i) {
    const double g = load_value(type, got, static_cast<std::int64_t>(i));
    const double scale = relative ? std::max(1.0, std::abs(expect[i])) : 1.0;
    if (owned[i]) r.max_error = std::max(r.max_error, std::abs(g - expect[i]) / scale);
    else if (!(g == expect[i])) ++r.other_mismatches;
  }
}

inline rope_result run_rope_case(const rope_case& c) {
  rope_setup s(c);
  rope_result r;
  r.streamed = cpu::detail::plan_cpu_rotation(s.spec, s.args).plan.stream_stores;
  if (c.backward) cpu::rotate_qk_backward(s.spec, s.args);
  else cpu::rotate_qk(s.spec, s.args);

  // Expected buffer contents: start from what the output buffer held, then set every element the
  // kernel owns.
  r.tolerance = default_tolerance(c.type, c.factor);
  const double sign = c.backward ? -1.0 : 1.0;
  for (int o = 0; o < 2; ++o) {
    const byte_buffer& before = c.inplace ? s.in_before[o] : s.out_before[o];
    const byte_buffer& got = c.inplace ? s.in[o] : s.out[o];
    std::vector<double> expect(s.ol[o].size);
    std::vector<char> rotated(s.ol[o].size, 0);
    for (std::int64_t i = 0; i < s.ol[o].size; ++i) expect[i] = load_value(c.type, before, i);
    std::vector<double> x(c.head_dim);
    for (std::int64_t b = 0; b < s.batch; ++b)
      for (std::int64_t t = 0; t < s.cu[b + 1] - s.cu[b]; ++t)
        for (std::int64_t h = 0; h < s.ol[o].heads; ++h) {
          const std::int64_t base = s.head_base(o, b, t, h);
          for (int ch = 0; ch < c.head_dim; ++ch) x[ch] = load_value(c.type, s.in_before[o], base + ch);
          s.rotate_reference(x, s.cu[b] + t, sign);
          for (int ch = 0; ch < c.head_dim; ++ch) {
            expect[base + ch] = x[ch];
            rotated[base + ch] = ch < c.rotary_dim;  // pass-through channels: exact copies
          }
        }
    compare_buffer(c.type, got, expect, rotated, /*relative=*/false, r);
  }
  return r;
}

}  // namespace grape::test
