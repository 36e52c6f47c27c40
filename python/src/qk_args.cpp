// make_qk_args: Q and K arrays as rotate_qk_args (qk_args.hpp).
#include "qk_args.hpp"

#include <fmt/format.h>

#include <string>

#include "grape/detail/error.hpp"

namespace grape::python {

cpu::rotate_qk_args make_qk_args(int head_dim, int num_axes, const qk_arrays& a, const optional_array& positions,
                                 const optional_array& offsets, const optional_array& cu_seqlens,
                                 std::optional<std::int64_t> max_position, int threads, const char* prefix) {
  const auto named = [&](const char* name) { return std::string(prefix) + name; };
  if (!a.q && !a.k) throw input_error("q, k: at least one must be given");
  cpu::rotate_qk_args args;
  std::optional<qk_shape> first;
  std::optional<cpu::dtype> type;
  auto fill = [&](const optional_array& in, const optional_array& out, cpu::qk_tensor& t, const char* name,
                  const char* out_name) {
    if (!in) return;
    const qk_shape s = qk_shape_of(*in, name);
    const cpu::dtype d = storage_type(*in, name);
    if (s.dim != head_dim)
      throw input_error(fmt::format("{}: last dimension must be the encoding's head_dim {} (got {})", name,
                                    head_dim, s.dim));
    if (first && (s.batch != first->batch || s.seq != first->seq))
      throw input_error(fmt::format("{}: batch and sequence extents must match q's ({} x {} vs {} x {})", name, s.batch,
                                    s.seq, first->batch, first->seq));
    if (type && d != *type) throw input_error(fmt::format("{}: dtype must match q's", name));
    if (out) require_same_layout(*in, *out, name, out_name);
    first = s;
    type = d;
    t.in = in->data();
    t.out = out ? out->data() : in->data();
    t.heads = s.heads;
    t.size = s.span;
    t.batch_stride = s.batch_stride;
    t.token_stride = s.token_stride;
    t.head_stride = s.head_stride;
  };
  fill(a.q, a.q_out, args.q, "q", "q_out");
  fill(a.k, a.k_out, args.k, "k", "k_out");
  args.type = *type;
  args.batch = first->batch;
  args.seq_len = first->seq;
  std::int64_t tokens = first->batch * first->seq;
  if (cu_seqlens) {
    if (first->batch != 1)
      throw input_error(fmt::format("{}: {} must be packed [total_tokens, heads, dim] with it", named("cu_seqlens"),
                                    a.q ? "q and k" : "k and v"));
    const std::int64_t n = static_cast<std::int64_t>(cu_seqlens->size());
    if (n < 2) throw input_error(fmt::format("{}: must hold batch + 1 >= 2 offsets", named("cu_seqlens")));
    args.cu_seqlens = int64_values(*cu_seqlens, n, named("cu_seqlens").c_str());
    args.batch = n - 1;
    args.seq_len = 0;
  }
  if (positions && offsets)
    throw input_error(fmt::format("{}, {}: give one or neither", named("positions"), named("offsets")));
  if (positions) {
    const index_array p = positions_of(*positions, num_axes * tokens, named("positions").c_str());
    args.position_ids = p.data;
    args.position_type = p.type;
  }
  if (offsets) args.offsets = int64_values(*offsets, args.batch, named("offsets").c_str());
  if (max_position) args.max_position = *max_position;
  args.threads = threads;
  return args;
}

bool no_tokens(const cpu::qk_args& a) {
  return a.cu_seqlens ? a.cu_seqlens[a.batch] == 0 : a.batch * a.seq_len == 0;
}

}  // namespace grape::python
