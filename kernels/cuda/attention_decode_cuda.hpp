#pragma once
// Decode attention with the encoding inside, over a paged KV cache, on the device:
// cpu::attention_decode's road on CUDA, in host code (C++20):
//
//   const grape::cuda::device_attention enc(E::make(params));
//   grape::cuda::attention_decode(enc, args, max_seq_len, device_error_flag, stream);
//
// args is the CPU call's kernel::decode_args with device pointers (q, the K and V pages, block_table,
// seq_lens, q_positions, out, lse); max_seq_len bounds seq_lens, since device memory is not read on
// the host (a longer sequence flags). The queries are checked and placed (decode_positions), turned
// at their positions into scratch by the instance's rotation (the rotary_spec kernels, the view, or
// contextual GRAPE-M's phases), then the decode blocks and their merge run (decode_program.hpp). The
// cache holds K as rotate_qk's fused KV write stores it (already turned). Host checks throw
// grape::input_error before anything is allocated or launched (the CPU's, less those that read the
// arrays); a bad length, block id or position sets *device_error_flag. A score view of your own
// needs GRAPE_DECODE_SCORE_VIEW(View) in a .cu file (decode_launch.cuh), as attention needs
// GRAPE_FLASH_SCORE_VIEW.
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>
#include <variant>

#include "common/decode_args.hpp"
#include "common/phase_rotation.hpp"
#include "cuda/attention_cuda.hpp"
#include "cuda/decode_launch.hpp"

namespace grape::cuda {

namespace detail {

/// The decode call's shape from the CPU's arguments; chunks of the CPU's size, up to 8 query heads
/// of one KV head per block.
inline decode_shape decode_shape_of(const kernel::decode_args& a, int head_dim, int v_dim, std::int64_t max_seq_len,
                                    int* flag) {
  decode_shape s;
  static_cast<kernel::page_table&>(s) = a;
  s.batch = a.batch;
  s.q_heads = a.q_heads;
  s.kv_heads = a.kv_heads;
  s.head_dim = head_dim;
  s.v_dim = v_dim;
  s.max_seq_len = max_seq_len;
  s.chunk = kernel::decode_chunk(a.block_size);
  s.chunks = (max_seq_len + s.chunk - 1) / s.chunk;
  s.heads_per_block = static_cast<int>(std::min<std::int64_t>(a.q_heads / a.kv_heads, 8));
  s.error = flag;
  return s;
}

/// The call's arrays for the programs: the encoded queries, the pages, the parts' scratch.
inline decode_call decode_call_of(const kernel::decode_args& a, const decode_shape& s, const void* q,
                                  const std::int64_t* q_pos, float* parts, float scale) {
  const auto pages = [](const kernel::paged_cache& p) {
    return device_pages<void>{p.data, p.block_stride, p.slot_stride, p.head_stride};
  };
  const std::int64_t heads = s.batch * s.chunks * s.q_heads;
  return {a.type, s, q, pages(a.k), pages(a.v), q_pos, scale, a.window, parts, parts + heads, parts + 2 * heads,
          a.out, a.lse};
}

/// rotate_qk's arguments for the queries: one token per sequence at its position.
inline kernel::rotate_qk_args decode_queries(const kernel::decode_args& a, int head_dim, const std::int64_t* q_pos) {
  kernel::rotate_qk_args r;
  r.type = a.type;
  const std::int64_t row = a.q_heads * head_dim;
  r.q = {a.q, nullptr, a.q_heads, a.batch * row, row, row, head_dim};
  r.batch = a.batch;
  r.seq_len = 1;
  r.position_ids = q_pos;
  r.position_type = kernel::index_type::i64;
  r.max_position = a.max_position;
  return r;
}

}  // namespace detail

template <class Instance>
void attention_decode(const device_attention<Instance>& enc, const kernel::decode_args& a, std::int64_t max_seq_len,
                      int* device_error_flag, cudaStream_t stream) {
  static_assert(!is_lift_instance<Instance>,
                "grape: cuda::attention_decode takes rotations and score biases; a lift (GRAPE-A) needs lifted keys "
                "in the cache: run it as ALiBi, or through cuda::attention");
  using encoding = device_attention<Instance>;
  constexpr bool by_phase = kernel::rotates_by_phase<Instance>;
  constexpr bool rotates = !std::is_same_v<typename encoding::rotation_type, std::monostate>;
  const int d = enc.head_dim(), v_dim = a.v_dim > 0 ? a.v_dim : d;
  kernel::check_decode_shape(a, d, v_dim);
  detail::require(device_error_flag != nullptr, "device_error_flag: must not be null");
  detail::require(max_seq_len >= 1, fmt::format("max_seq_len: must be >= 1 (got {})", max_seq_len));
  if constexpr (!std::is_same_v<typename encoding::scores_type, no_scores>)
    detail::require(enc.heads() == a.q_heads,
                    "q_heads: must equal the encoding's heads (" + std::to_string(enc.heads()) + ")");
  if constexpr (by_phase) kernel::check_phase_heads(enc.rotation()->shape(), a.q_heads, a.kv_heads);
  const decode_shape s = detail::decode_shape_of(a, d, v_dim, max_seq_len, device_error_flag);
  const std::int64_t smem = decode_smem_of(static_cast<int>(kernel::element_bytes(a.type)), s.heads_per_block, d, v_dim).bytes;
  detail::require(smem <= detail::shared_memory_limit(),
                  fmt::format("head_dim {}, v_dim {}: the decode's tile does not fit the device's shared memory", d,
                              v_dim));
  const std::size_t q_bytes = static_cast<std::size_t>(a.batch * a.q_heads * d) * element_bytes(a.type);
  std::int64_t phase_rows = 0;
  if constexpr (by_phase) phase_rows = enc.rotation()->shape().phase_rows;
  detail::stream_scratch positions(static_cast<std::size_t>(a.batch) * sizeof(std::int64_t), stream),
      q_rot(rotates ? q_bytes : 0, stream), phases(static_cast<std::size_t>(phase_rows * a.batch) * sizeof(double), stream),
      parts(static_cast<std::size_t>(decode_part_floats(s)) * sizeof(float), stream);
  auto* q_pos = static_cast<std::int64_t*>(positions.get());
  detail::launch_decode_positions({s, a.q_positions, a.max_position, q_pos}, stream);
  if constexpr (rotates)
    detail::encode_into(enc, detail::decode_queries(a, d, q_pos), a.batch, q_rot.get(), nullptr,
                        static_cast<double*>(phases.get()), device_error_flag, stream);
  detail::check_bias_positions(q_pos, a.batch, enc.scores(), device_error_flag, stream);
  const float scale = a.scale > 0 ? a.scale : 1.0f / std::sqrt(static_cast<float>(d));
  const decode_call c = detail::decode_call_of(a, s, rotates ? q_rot.get() : a.q, q_pos,
                                               static_cast<float*>(parts.get()), scale);
  detail::launch_decode(c, enc.scores(), smem, stream);
}

}  // namespace grape::cuda
