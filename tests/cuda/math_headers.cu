// The element-level math must compile as CUDA device code unchanged (design: kernels reuse it).
// Built with nvcc by tests/cuda/CMakeLists.txt whenever nvcc is present; nothing runs on a GPU.
#include "grape/math/bias.hpp"
#include "grape/math/phase.hpp"
#include "grape/math/rank2.hpp"
#include "grape/math/rotate.hpp"
#include "grape/math/sincos.hpp"

__global__ void exercise_math(const float* x, float* y, const grape::math::phase_t* turns, const long long* pos, int planes) {
  using namespace grape::math;
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= planes) return;
  const auto sc = sincos_of_phase(phase_at(pos[0], turns[i]));
  const auto r = rotate_pair(x[2 * i], x[2 * i + 1], sc.sin, sc.cos);
  y[2 * i] = r.first + alibi_bias(0.5f, pos[0], i) + static_cast<float>(t5_bucket(i - pos[0], true, 32, 128));
  y[2 * i + 1] = r.second + static_cast<float>(alibi_slope(i, planes)) + static_cast<float>(phase_to_radians(turns[i]));
  float out[4];
  const rank2_invariants inv{1.0, 1.0, 0.0, 1.0};
  rank2_apply(x, x + 4, inv, sc.sin, sc.cos, x + 8, out, 4);
  y[0] += out[0] + static_cast<float>(first_channel(layout_kind::half_split, i, 8) + second_channel(layout_kind::interleaved, i, 8));
}
