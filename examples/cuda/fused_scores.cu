// Using grape's device functions inside your own kernel: attention logits for one head with RoPE
// applied on the fly to the query and the keys and an ALiBi bias added — no rotated copies of Q or
// K are written. Plane by plane, so nothing leaves registers. Compiled by the tests whenever nvcc is
// present (docs/cuda.md).
#include <cstdint>

#include "grape/math/bias.hpp"
#include "grape/math/phase.hpp"
#include "grape/math/rotate.hpp"
#include "grape/math/sincos.hpp"

constexpr int head_dim = 128;  // half-split layout: plane i = channels (i, i + 64)

// logits[j] = <rope(q, q_pos), rope(k_j, k_pos[j])> / sqrt(d) + ALiBi(slope, q_pos, k_pos[j])
__global__ void rope_alibi_logits(const float* q, const float* keys, const std::int64_t* key_positions,
                                  std::int64_t q_position, const std::uint64_t* turn_fractions, float slope,
                                  int num_keys, float* logits) {
  using namespace grape::math;
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= num_keys) return;
  const float* k = keys + static_cast<std::int64_t>(j) * head_dim;
  const std::int64_t k_position = key_positions[j];
  float dot = 0.0f;
#pragma unroll 4
  for (int i = 0; i < head_dim / 2; ++i) {
    const sin_cos a = sincos_of_phase(phase_at(q_position, turn_fractions[i]));  // exact phase
    const sin_cos b = sincos_of_phase(phase_at(k_position, turn_fractions[i]));
    const auto qr = rotate_pair(q[i], q[i + head_dim / 2], a.sin, a.cos);
    const auto kr = rotate_pair(k[i], k[i + head_dim / 2], b.sin, b.cos);
    dot += qr.first * kr.first + qr.second * kr.second;
  }
  logits[j] = dot * rsqrtf(static_cast<float>(head_dim)) + alibi_bias(slope, q_position, k_position);
}
