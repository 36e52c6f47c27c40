// Host-side validation of lift_qk arguments: rotate_qk's plan for Q and K, then the lifted
// operands (their own strides, bounds, and no overlap with what the call reads).
#include "common/lift_plan.hpp"

#include <array>
#include <cstdint>
#include <string>

#include "grape/detail/error.hpp"

namespace grape::kernel {
namespace {

[[noreturn]] void fail(const std::string& what) { throw input_error(what); }

struct extent {
  const char* name;
  const void* data;
  std::int64_t elements;
};

void require_disjoint(const extent& a, const extent& b, dtype type) {
  if (a.data == nullptr || b.data == nullptr || a.elements == 0 || b.elements == 0) return;
  const auto x = reinterpret_cast<std::uintptr_t>(a.data), y = reinterpret_cast<std::uintptr_t>(b.data);
  const auto bytes = static_cast<std::uintptr_t>(element_bytes(type));
  const bool apart = x < y ? y - x >= static_cast<std::uintptr_t>(a.elements) * bytes
                           : x - y >= static_cast<std::uintptr_t>(b.elements) * bytes;
  if (!apart) fail(std::string(a.name) + " overlaps " + b.name);
}

}  // namespace

lift_plan make_lift_plan(const lift_shape& shape, const rotate_qk_args& args, const lifted_tensor& q_lifted,
                         const lifted_tensor& k_lifted, bool backward, const device_indices* device) {
  if (shape.view_dim != shape.head_dim + 2)
    fail("encoding: a lift acts on head_dim + 2 = " + std::to_string(shape.head_dim + 2) +
         " channels, its representation on " + std::to_string(shape.view_dim));
  // f16 ends at 65504: a lifted entry of size scale·position would become infinite (no silent inf).
  const double reach = shape.generator_scale * static_cast<double>(args.max_position - 1);
  if (args.type == dtype::f16 && reach > 65504.0)
    fail("type: f16 cannot hold the lifted coordinates (generator entry " + std::to_string(shape.generator_scale) +
         " times position up to max_position - 1 = " + std::to_string(args.max_position - 1) +
         " exceeds 65504); pass a smaller max_position or use f32");
  if (args.qk_norm != nullptr) fail("qk_norm: lift_qk does not fuse a QK-norm; pass null");
  if (args.kv_cache != nullptr)
    fail("kv_cache: lift_qk writes no KV cache (a lifted key depends on the query head); pass null");
  if (args.q.heads != shape.heads)
    fail("q.heads is " + std::to_string(args.q.heads) + " but the encoding has " + std::to_string(shape.heads) +
         " heads (one lift per query head)");
  if (args.k.heads <= 0 || args.q.heads % args.k.heads != 0)
    fail("k.heads (" + std::to_string(args.k.heads) + ") must divide q.heads (" + std::to_string(args.q.heads) +
         "): each key head serves q.heads / k.heads query heads");

  // The d-channel operands: the forward reads `in` (no `out`), the backward writes `out` (no `in`).
  rotate_qk_args call = args;
  for (qk_tensor* t : {&call.q, &call.k}) {
    const std::string name = t == &call.q ? "q" : "k";
    if (!backward && t->out != nullptr)
      fail(name + ".out must be null: lift_qk writes the lifted " + name + " to " + name + "_lifted");
    if (backward && t->in != nullptr)
      fail(name + ".in must be null: lift_qk_backward reads " + name + "_lifted and writes " + name + ".out");
    if (backward) t->in = t->out;
    else t->out = const_cast<void*>(t->in);  // checked as in place; never written
  }
  const encoding_shape rows{"encoding", shape.head_dim, shape.head_dim, math::layout_kind::interleaved,
                            math::layout_kind::interleaved, shape.num_axes, 1.0};
  lift_plan lp;
  lp.plan = make_instance_plan(rows, call, device).plan;  // no owned arrays without qk_norm
  lp.backward = backward;

  // The lifted operands: q.heads heads of d + 2 channels, their own strides.
  rotate_plan wide = lp.plan;
  wide.head_dim = shape.head_dim + 2;
  const auto lifted = [&](const char* name, const lifted_tensor& t, qk_operand& o) {
    const qk_tensor as_operand{t.data, t.data, args.q.heads, t.size, t.batch_stride, t.token_stride, t.head_stride};
    if (t.data == nullptr) fail(std::string(name) + ".data is null");
    o = {t.data, t.data, args.q.heads, t.batch_stride, t.token_stride, t.head_stride};
    return extent{name, t.data, check_operand(name, as_operand, wide, args.seq_len, args.type)};
  };
  const extent ql = lifted("q_lifted", q_lifted, lp.q_lifted), kl = lifted("k_lifted", k_lifted, lp.k_lifted);
  const auto span = [&](const char* name, const qk_tensor& t) {
    return extent{name, backward ? t.out : t.in, check_operand(name, t, lp.plan, args.seq_len, args.type)};
  };
  const extent q = span(backward ? "q.out" : "q.in", call.q), k = span(backward ? "k.out" : "k.in", call.k);
  require_disjoint(ql, kl, args.type);
  const std::array<extent, 2> written = backward ? std::array{q, k} : std::array{ql, kl};
  const std::array<extent, 2> read = backward ? std::array{ql, kl} : std::array{q, k};
  for (const extent& w : written)
    for (const extent& r : read) require_disjoint(w, r, args.type);
  if (backward) require_disjoint(q, k, args.type);
  return lp;
}

}  // namespace grape::kernel
