// cpu::attention's argument checks and the parts that do not depend on the encoding.
#include "cpu/attention.hpp"

#include "cpu/attention_backward.hpp"

#include <fmt/format.h>

namespace grape::cpu::detail {

sequences sequences_of(const qk_args& a, const char* what) {
  sequences s;
  if (a.batch < 1) throw input_error(fmt::format("batch must be >= 1 (got {})", a.batch));
  for (std::int64_t b = 0; b < a.batch; ++b) {
    const std::int64_t first = a.cu_seqlens ? a.cu_seqlens[b] : b * a.seq_len;
    const std::int64_t len = a.cu_seqlens ? a.cu_seqlens[b + 1] - a.cu_seqlens[b] : a.seq_len;
    if (a.cu_seqlens && (len < 0 || (b == 0 && first != 0)))
      throw input_error(fmt::format("{}cu_seqlens must start at 0 and not decrease", what));
    if (len < 0) throw input_error(fmt::format("{}seq_len must be >= 0 (got {})", what, a.seq_len));
    s.first.push_back(first);
    s.len.push_back(len);
  }
  s.total = a.cu_seqlens ? a.cu_seqlens[a.batch] : a.batch * a.seq_len;
  return s;
}

void check_operand(const qk_tensor& t, const sequences& s, const qk_args& a, int dim, const char* name) {
  if (t.in == nullptr) throw input_error(fmt::format("{}.in must not be null", name));
  if (t.heads < 1) throw input_error(fmt::format("{}.heads must be >= 1 (got {})", name, t.heads));
  if (t.token_stride < 0 || t.head_stride < 0 || t.batch_stride < 0)
    throw input_error(fmt::format("{}: strides must be >= 0", name));
  std::int64_t last = 0;  // one past the last element read
  for (std::size_t b = 0; b < s.first.size(); ++b) {
    if (s.len[b] == 0) continue;
    const std::int64_t row = a.cu_seqlens ? (s.first[b] + s.len[b] - 1) * t.token_stride
                                          : static_cast<std::int64_t>(b) * t.batch_stride + (s.len[b] - 1) * t.token_stride;
    last = std::max(last, row + (t.heads - 1) * t.head_stride + dim);
  }
  if (last > t.size)
    throw input_error(fmt::format("{}: the strides address {} elements but size is {}", name, last, t.size));
}

std::vector<std::int64_t> positions_of(const qk_args& a, const sequences& s, const char* what) {
  std::vector<std::int64_t> pos(static_cast<std::size_t>(s.total));
  for (std::size_t b = 0; b < s.first.size(); ++b)
    for (std::int64_t i = 0; i < s.len[b]; ++i) {
      const std::int64_t t = s.first[b] + i;
      std::int64_t m = a.offsets ? a.offsets[b] + i : i;
      if (a.position_ids)
        m = a.position_type == index_type::i64 ? static_cast<const std::int64_t*>(a.position_ids)[t]
                                               : static_cast<const std::int32_t*>(a.position_ids)[t];
      if (m < 0 || m >= a.max_position)
        throw input_error(fmt::format("{}position of token {} is {}: must lie in [0, max_position = {})", what, t, m,
                                      a.max_position));
      pos[static_cast<std::size_t>(t)] = m;
    }
  return pos;
}

rotate_qk_args query_args(const attention_args& a) {
  rotate_qk_args q = rotation_of(a.qk);
  q.k = qk_tensor{};
  return q;
}

rotate_qk_args key_args(const attention_args& a) {
  rotate_qk_args k = rotation_of(a.qk);
  k.q = qk_tensor{};
  if (a.keys) {
    k.seq_len = a.keys->seq_len;
    k.cu_seqlens = a.keys->cu_seqlens;
    k.position_ids = a.keys->position_ids;
    k.offsets = a.keys->offsets;
  }
  return k;
}

call_sequences check_attention(const attention_args& a, int head_dim, int v_dim) {
  if (head_dim < 1 || v_dim < 1) throw input_error("head_dim and v_dim must be >= 1");
  if (a.out == nullptr) throw input_error("out must not be null");
  if (a.window < 0) throw input_error(fmt::format("window must be >= 0 (got {})", a.window));
  if (!(a.scale >= 0) || !std::isfinite(a.scale)) throw input_error("scale must be finite and >= 0");
  if (a.keys && a.keys->position_ids && a.keys->offsets)
    throw input_error("keys: give position_ids or offsets, not both");
  call_sequences s{sequences_of(a.qk), {}};
  const rotate_qk_args ka = key_args(a);
  s.k = a.keys ? sequences_of(ka, "keys.") : s.q;
  check_operand(a.qk.q, s.q, a.qk, head_dim, "q");
  check_operand(a.qk.k, s.k, ka, head_dim, "k");
  check_operand(a.v, s.k, ka, v_dim, "v");
  if (a.qk.q.heads % a.qk.k.heads != 0 || a.qk.q.heads % a.v.heads != 0)
    throw input_error(fmt::format("q.heads ({}) must be a multiple of k.heads ({}) and v.heads ({})", a.qk.q.heads,
                                  a.qk.k.heads, a.v.heads));
  (void)positions_of(a.qk, s.q);  // every position in range before anything runs
  if (a.keys) (void)positions_of(ka, s.k, "keys.");
  return s;
}

rotate_qk_args contiguous_f32(const qk_args& a, float* q, float* k, int d) {
  rotate_qk_args c = rotation_of(a);
  c.type = dtype::f32;
  const auto operand = [&](const qk_tensor& t, float* data, std::int64_t total) {
    if (t.heads == 0) return qk_tensor{};  // absent (query_args' K, key_args' Q)
    const std::int64_t token = t.heads * d;
    return qk_tensor{data, data, t.heads, total * token, a.cu_seqlens ? 0 : a.seq_len * token, token, d};
  };
  const std::int64_t total = a.cu_seqlens ? a.cu_seqlens[a.batch] : a.batch * a.seq_len;
  c.q = operand(a.q, q, total);
  c.k = operand(a.k, k, total);
  return c;
}

void check_attention_backward(const attention_args& a, const attention_grad_args& g) {
  if (a.lse == nullptr) throw input_error("lse must hold the forward's log-sum-exp (it is null)");
  if (g.grad_out == nullptr) throw input_error("grad_out must not be null");
  if (g.grad_q == nullptr || g.grad_k == nullptr || g.grad_v == nullptr)
    throw input_error("grad_q, grad_k and grad_v must not be null");
}

std::vector<float> to_float(dtype type, const void* x, std::size_t count) {
  std::vector<float> out(count);
  with_storage(type, [&]<class T>() {
    const T* in = static_cast<const T*>(x);
    for (std::size_t i = 0; i < count; ++i) out[i] = static_cast<float>(in[i]);
  });
  return out;
}

void from_float(dtype type, const std::vector<float>& x, float scale, void* out) {
  with_storage(type, [&]<class T>() {
    T* o = static_cast<T*>(out);
    for (std::size_t i = 0; i < x.size(); ++i) o[i] = static_cast<T>(scale * x[i]);
  });
}

}  // namespace grape::cpu::detail
