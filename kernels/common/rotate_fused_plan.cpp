// Host-side validation of the fused extras of rotate_qk (QK-norm, KV-cache write). Every check
// names the argument; the fused body (rotate_qk_fused_item.hpp) then trusts the plan.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/rotate_plan.hpp"
#include "grape/detail/error.hpp"

namespace grape::kernel {
namespace {

[[noreturn]] void fail(const std::string& what) { throw input_error(what); }

/// The norm multipliers of one operand: weight[c], or 1 + weight[c] (unit offset), all finite.
std::vector<float> norm_multipliers(const char* name, const float* weight, int head_dim,
                                    bool unit_offset) {
  std::vector<float> w(static_cast<std::size_t>(head_dim));
  for (int c = 0; c < head_dim; ++c) {
    if (!std::isfinite(weight[c]))
      fail(std::string("qk_norm.") + name + "[" + std::to_string(c) + "] is not finite");
    w[c] = unit_offset ? 1.0f + weight[c] : weight[c];
  }
  return w;
}

void plan_norm(const qk_rms_norm& n, const rotate_qk_args& args, owned_plan& o) {
  if (n.q_weight == nullptr && n.k_weight == nullptr)
    fail("qk_norm: q_weight and k_weight are both null; pass at least one, or no qk_norm");
  if (!(std::isfinite(n.eps) && n.eps > 0.0f))
    fail("qk_norm.eps must be finite and > 0 (got " + std::to_string(n.eps) + ")");
  const int d = o.plan.head_dim;
  fused_plan& f = o.plan.fused;
  if (n.q_weight != nullptr && args.q.heads > 0) {
    o.q_norm = norm_multipliers("q_weight", n.q_weight, d, n.unit_offset);
    f.q_norm = o.q_norm.data();
  }
  if (n.k_weight != nullptr && args.k.heads > 0) {
    o.k_norm = norm_multipliers("k_weight", n.k_weight, d, n.unit_offset);
    f.k_norm = o.k_norm.data();
  }
  f.norm_eps = n.eps;
}

/// A byte range [begin, end) of memory an operand may touch.
struct byte_range {
  std::string name;
  std::uintptr_t begin, end;
};

byte_range range_of(std::string name, const void* p, std::int64_t elements, std::size_t eb) {
  const auto b = reinterpret_cast<std::uintptr_t>(p);
  return {std::move(name), b, b + static_cast<std::uintptr_t>(elements) * eb};
}

/// Checks one cache tensor's strides and size for `heads` heads of `slots` slots; returns the
/// elements it spans.
std::int64_t check_cache(const std::string& name, const paged_cache& c, std::int64_t heads,
                         std::int64_t blocks, std::int64_t block_size, int head_dim) {
  if (c.size < 0) fail(name + ".size is negative");
  if (c.block_stride < 0) fail(name + ".block_stride is negative");
  if (c.slot_stride < 0) fail(name + ".slot_stride is negative");
  if (c.head_stride < 0) fail(name + ".head_stride is negative");
  if (blocks == 0) return 0;
  const std::array<extent_stride, 4> dims{extent_stride{heads, c.head_stride},
                                          extent_stride{block_size, c.slot_stride},
                                          extent_stride{blocks, c.block_stride},
                                          extent_stride{1, 0}};
  const std::int64_t span = distinct_span(name, "slots or heads", dims, 3, head_dim);
  if (span > c.size)
    fail(name + ".size (" + std::to_string(c.size) + ") is smaller than the " +
         std::to_string(span) + " elements the strides address");
  return span;
}

/// Slots in [−1, slots) and no slot written twice (two threads would race on it).
void check_slots(const std::int64_t* slot_mapping, std::int64_t tokens, std::int64_t slots) {
  std::vector<std::pair<std::int64_t, std::int64_t>> used;  // (slot, token)
  used.reserve(static_cast<std::size_t>(tokens));
  for (std::int64_t t = 0; t < tokens; ++t) {
    const std::int64_t s = slot_mapping[t];
    if (s < -1 || s >= slots)
      fail("kv_cache.slot_mapping[" + std::to_string(t) + "] = " + std::to_string(s) +
           " is outside [-1, " + std::to_string(slots) + ") (blocks * block_size slots; -1 skips)");
    if (s >= 0) used.emplace_back(s, t);
  }
  std::sort(used.begin(), used.end());
  for (std::size_t i = 1; i < used.size(); ++i)
    if (used[i].first == used[i - 1].first)
      fail("kv_cache.slot_mapping[" + std::to_string(used[i].second) + "] repeats slot " +
           std::to_string(used[i].first) + " of slot_mapping[" +
           std::to_string(used[i - 1].second) + "]");
}

void plan_cache(const kv_cache_write& w, const rotate_qk_args& args, std::int64_t max_seq,
                operand_spans spans, owned_plan& o) {
  rotate_plan& p = o.plan;
  const std::size_t eb = element_bytes(args.type);
  if (args.k.heads == 0) fail("kv_cache is set but k.heads is 0 (the cache stores K)");
  if (w.blocks < 0) fail("kv_cache.blocks is negative");
  if (w.block_size <= 0) fail("kv_cache.block_size must be positive");
  std::int64_t slots = 0;
  if (__builtin_mul_overflow(w.blocks, w.block_size, &slots))
    fail("kv_cache.blocks * kv_cache.block_size overflows 64 bits");
  if (w.k.data == nullptr) fail("kv_cache.k.data is null");
  if (p.total_tokens > 0 && w.slot_mapping == nullptr) fail("kv_cache.slot_mapping is null");
  if (w.v.data == nullptr && w.values.in != nullptr)
    fail("kv_cache.values.in is set but kv_cache.v.data is null (nowhere to write V)");
  if (w.v.data != nullptr && w.values.in == nullptr)
    fail("kv_cache.v.data is set but kv_cache.values.in is null (no V to write)");
  const bool with_v = w.v.data != nullptr;
  if (with_v && w.values.heads != args.k.heads)
    fail("kv_cache.values.heads (" + std::to_string(w.values.heads) + ") differs from k.heads (" +
         std::to_string(args.k.heads) + ")");

  std::vector<byte_range> inputs, caches;
  inputs.push_back(range_of("q", args.q.in, spans.q, eb));
  if (args.q.out != args.q.in)
    inputs.push_back(range_of("q.out", args.q.out, spans.q, eb));
  inputs.push_back(range_of("k", args.k.in, spans.k, eb));
  if (args.k.out != nullptr && args.k.out != args.k.in)
    inputs.push_back(range_of("k.out", args.k.out, spans.k, eb));
  caches.push_back(range_of("kv_cache.k", w.k.data,
                            check_cache("kv_cache.k", w.k, args.k.heads, w.blocks, w.block_size,
                                        p.head_dim), eb));
  if (with_v) {
    qk_tensor values = w.values;
    values.out = nullptr;
    inputs.push_back(range_of("kv_cache.values", values.in,
                              check_operand("kv_cache.values", values, p, max_seq, args.type, true),
                              eb));
    caches.push_back(range_of("kv_cache.v", w.v.data,
                              check_cache("kv_cache.v", w.v, args.k.heads, w.blocks, w.block_size,
                                          p.head_dim), eb));
  }
  // A cache shares no byte with another cache or with any input or output.
  for (std::size_t i = 0; i < caches.size(); ++i) {
    const byte_range& c = caches[i];
    for (std::size_t j = 0; j < inputs.size() + i; ++j) {
      const byte_range& r = j < inputs.size() ? inputs[j] : caches[j - inputs.size()];
      if (c.begin < c.end && r.begin < r.end && c.begin < r.end && r.begin < c.end)
        fail(c.name + ".data overlaps " + r.name);
    }
  }
  if (p.total_tokens > 0) check_slots(w.slot_mapping, p.total_tokens, slots);

  fused_plan& f = p.fused;
  f.write_cache = true;
  f.slots = w.slot_mapping;
  f.block_size = w.block_size;
  f.k_cache = {w.k.data, w.k.block_stride, w.k.slot_stride, w.k.head_stride};
  if (with_v) {
    f.v_cache = {w.v.data, w.v.block_stride, w.v.slot_stride, w.v.head_stride};
    f.v = {w.values.in, nullptr, w.values.heads, w.values.batch_stride, w.values.token_stride,
           w.values.head_stride};
  }
}

}  // namespace

void plan_fused(const rotate_qk_args& args, std::int64_t max_seq, operand_spans spans,
                owned_plan& o) {
  if (args.qk_norm != nullptr) plan_norm(*args.qk_norm, args, o);
  if (args.kv_cache != nullptr) plan_cache(*args.kv_cache, args, max_seq, spans, o);
}

}  // namespace grape::kernel
