// Host-side validation of rotate_qk arguments. Every check names the argument; the per-token
// body then trusts the plan (no access outside the ranges proved here).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>

#include "common/rotate_plan.hpp"
#include "grape/detail/error.hpp"

namespace grape::kernel {
namespace {

__extension__ typedef __int128 wide_int;  // sizes and spans without overflow

[[noreturn]] void fail(const std::string& what) { throw input_error(what); }

}  // namespace

std::int64_t distinct_span(const std::string& name, const char* entries,
                           std::array<extent_stride, 4> dims, int count, std::int64_t inner) {
  // Sorted by stride, each dimension must step over everything spanned by the smaller ones
  // (starting from the `inner` contiguous channels): then no two entries share an element, so
  // in-place writes and parallel tokens never collide.
  // Insertion sort of at most 4 entries (std::sort of a run-time prefix draws a false
  // -Warray-bounds from GCC 12).
  for (int i = 1; i < count; ++i)
    for (int j = i; j > 0 && dims[j].stride < dims[j - 1].stride; --j) std::swap(dims[j], dims[j - 1]);
  wide_int span = inner;
  for (int i = 0; i < count; ++i) {
    if (dims[i].extent <= 1) continue;
    if (static_cast<wide_int>(dims[i].stride) < span)
      fail(name + ": strides make " + entries + " overlap (stride " +
           std::to_string(dims[i].stride) + " < " + std::to_string(static_cast<std::int64_t>(span)) +
           " elements)");
    span += static_cast<wide_int>(dims[i].extent - 1) * dims[i].stride;
    if (span > std::numeric_limits<std::int64_t>::max())
      fail(name + ": strides address more than 2^63 elements");
  }
  return static_cast<std::int64_t>(span);
}

std::int64_t check_operand(const std::string& name, const qk_tensor& t, const rotate_plan& p,
                           std::int64_t max_seq, dtype type, bool out_optional) {
  if (t.heads < 0) fail(name + ".heads is negative");
  if (t.heads == 0) return 0;
  if (t.in == nullptr) fail(name + ".in is null");
  if (t.out == nullptr && !out_optional) fail(name + ".out is null");
  if (t.size < 0) fail(name + ".size is negative");
  if (t.token_stride < 0) fail(name + ".token_stride is negative");
  if (t.head_stride < 0) fail(name + ".head_stride is negative");
  if (t.batch_stride < 0) fail(name + ".batch_stride is negative");
  if (p.total_tokens == 0) return 0;
  std::array<extent_stride, 4> dims{};
  int count = 0;
  dims[count++] = {t.heads, t.head_stride};
  if (p.cu_seqlens != nullptr) {
    dims[count++] = {p.total_tokens, t.token_stride};
  } else {
    dims[count++] = {max_seq, t.token_stride};
    dims[count++] = {p.batch, t.batch_stride};
  }
  const std::int64_t span = distinct_span(name, "heads or tokens", dims, count, p.head_dim);
  if (span > t.size)
    fail(name + ".size (" + std::to_string(t.size) + ") is smaller than the " +
         std::to_string(span) + " elements the strides address");
  if (t.out != nullptr && t.out != t.in) {
    const auto a = reinterpret_cast<std::uintptr_t>(t.in);
    const auto b = reinterpret_cast<std::uintptr_t>(t.out);
    const auto bytes = static_cast<std::uintptr_t>(span) * element_bytes(type);
    if ((a < b ? b - a : a - b) < bytes)
      fail(name + ".out overlaps " + name + ".in without being equal to it");
  }
  return span;
}


std::vector<math::phase_t> turn_fractions_of(const std::vector<double>& inv_freq) {
  std::vector<math::phase_t> f(inv_freq.size());
  for (std::size_t i = 0; i < f.size(); ++i) f[i] = math::turn_fraction_of(inv_freq[i]);
  return f;
}

namespace {

/// Positions a call may use: [lowest, limit).
struct position_window {
  std::int64_t lowest;
  std::int64_t limit;
};

/// Everything but the angles: threads, dtype, tokens, positions, Q/K operands, fused extras.
void plan_call(const encoding_shape& shape, const rotate_qk_args& args, position_window window,
               const device_indices* device, owned_plan& o) {
  rotate_plan& p = o.plan;
  p.head_dim = shape.head_dim;
  p.rotary_dim = shape.rotary_dim;
  p.layout = shape.q_layout;
  p.num_axes = shape.num_axes;
  p.attention_factor = static_cast<float>(shape.attention_factor);
  p.threads = args.threads;
  if (args.threads < 0) fail("threads is negative");
  if (args.type != dtype::f32 && args.type != dtype::f16 && args.type != dtype::bf16)
    fail("type is not a known dtype");

  if (window.limit <= 0) fail("max_position must be positive");

  // Tokens.
  if (args.batch < 0) fail("batch is negative");
  p.batch = args.batch;
  p.cu_seqlens = args.cu_seqlens;
  std::int64_t max_seq = 0;
  if (args.cu_seqlens != nullptr && device != nullptr) {
    // Device lengths: the operand checks below bound every token by total_tokens instead.
    if (device->total_tokens < 0) fail("total_tokens is negative");
    p.total_tokens = device->total_tokens;
  } else if (args.cu_seqlens != nullptr) {
    if (args.cu_seqlens[0] != 0) fail("cu_seqlens[0] must be 0");
    for (std::int64_t b = 0; b < args.batch; ++b) {
      if (args.cu_seqlens[b + 1] < args.cu_seqlens[b])
        fail("cu_seqlens decreases at index " + std::to_string(b + 1));
      max_seq = std::max(max_seq, args.cu_seqlens[b + 1] - args.cu_seqlens[b]);
    }
    p.total_tokens = args.batch > 0 ? args.cu_seqlens[args.batch] : 0;
  } else {
    if (args.seq_len < 0) fail("seq_len is negative");
    p.seq_len = args.seq_len;
    max_seq = args.seq_len;
    if (__builtin_mul_overflow(args.batch, args.seq_len, &p.total_tokens))
      fail("batch * seq_len overflows 64 bits");
  }

  // Positions must lie in [lowest, limit).
  const std::int64_t lowest = window.lowest, limit = window.limit;
  std::string range = "[";  // built by appends: GCC 12 warns falsely (-Wrestrict) on "[" + string
  range.append(std::to_string(lowest)).append(", ").append(std::to_string(limit)).append(")");
  if (args.position_ids != nullptr && args.offsets != nullptr)
    fail("position_ids and offsets are both set; pass one");
  if (args.position_type != index_type::i32 && args.position_type != index_type::i64)
    fail("position_type is not a known index type");
  if (device != nullptr) {
    // Positions are device memory: the kernel checks them against [lowest, limit).
  } else if (args.position_ids != nullptr) {
    const std::int64_t n = static_cast<std::int64_t>(shape.num_axes) * p.total_tokens;
    for (std::int64_t i = 0; i < n; ++i) {
      const std::int64_t v = args.position_type == index_type::i64
                                 ? static_cast<const std::int64_t*>(args.position_ids)[i]
                                 : static_cast<const std::int32_t*>(args.position_ids)[i];
      if (v < lowest || v >= limit)
        fail("position_ids[" + std::to_string(i) + "] = " + std::to_string(v) +
             " is outside " + range);
    }
  } else if (args.offsets != nullptr) {
    for (std::int64_t b = 0; b < args.batch; ++b) {
      const std::int64_t len =
          args.cu_seqlens != nullptr ? args.cu_seqlens[b + 1] - args.cu_seqlens[b] : args.seq_len;
      const std::int64_t off = args.offsets[b];
      if (len == 0) continue;
      if (off < lowest || off > limit - len)
        fail("offsets[" + std::to_string(b) + "] = " + std::to_string(off) + " puts positions of a " +
             std::to_string(len) + "-token sequence outside " + range);
    }
  } else if (max_seq > 0 && (lowest > 0 || max_seq > limit)) {
    fail("positions 0.." + std::to_string(max_seq - 1) +
         " (sequence indices: no position_ids or offsets) are outside the max_position/cache range " +
         range);
  }
  p.position_ids = args.position_ids;
  p.position_type = args.position_type;
  p.offsets = args.offsets;

  p.q = {args.q.in, args.q.out, args.q.heads, args.q.batch_stride, args.q.token_stride,
         args.q.head_stride};
  p.k = {args.k.in, args.k.out, args.k.heads, args.k.batch_stride, args.k.token_stride,
         args.k.head_stride};
  const operand_spans spans{
      check_operand("q", args.q, p, max_seq, args.type),
      check_operand("k", args.k, p, max_seq, args.type, /*out_optional=*/args.kv_cache != nullptr)};
  if (args.stores != store_policy::automatic && args.stores != store_policy::streaming &&
      args.stores != store_policy::cached)
    fail("stores is not a known store_policy");
  plan_fused(args, max_seq, spans, o);
}

}  // namespace

owned_plan make_rotate_plan(const rotary_spec& spec, const rotate_qk_args& args,
                            const device_indices* device) {
  owned_plan o;
  rotate_plan& p = o.plan;
  check_rotary_spec(spec);
  const encoding_shape shape = shape_of(spec);
  o.plane_axis = spec.plane_axis;
  o.turn_fractions = turn_fractions_of(spec.inv_freq);

  position_window window{0, args.max_position};
  if (args.cache != nullptr) {
    const rotary_cache& c = *args.cache;
    if (c.rotary_dim != spec.rotary_dim) fail("cache.rotary_dim differs from spec.rotary_dim");
    if (c.turn_fractions != o.turn_fractions) fail("cache was built from other inv_freq values");
    if (c.attention_factor != spec.attention_factor)
      fail("cache.attention_factor differs from spec.attention_factor");
    if (c.first_position < 0 || c.max_position <= c.first_position ||
        static_cast<wide_int>(c.rows.size()) !=
            static_cast<wide_int>(c.max_position - c.first_position) * c.rotary_dim)
      fail("cache.rows does not hold (max_position - first_position) * rotary_dim values");
    window = {c.first_position, std::min(window.limit, c.max_position)};
    p.cache = c.rows.data();
    p.cache_first = c.first_position;
  }
  plan_call(shape, args, window, device, o);
  p.turn_fractions = o.turn_fractions.data();
  p.plane_axis = o.plane_axis.empty() ? nullptr : o.plane_axis.data();
  return o;
}

void require_forward_extras_absent(const rotate_qk_args& args) {
  if (args.qk_norm != nullptr || args.kv_cache != nullptr)
    fail("qk_norm and kv_cache are forward-only: pass null to rotate_qk_backward");
}

owned_plan make_instance_plan(const encoding_shape& shape, const rotate_qk_args& args,
                              const device_indices* device) {
  check_shape(shape);
  if (args.cache != nullptr)
    fail("cache: a cos/sin cache serves rotation-plane encodings only; pass null for this encoding");
  owned_plan o;
  plan_call(shape, args, {0, args.max_position}, device, o);
  return o;
}

}  // namespace grape::kernel
