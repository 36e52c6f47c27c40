// The element-level math must compile as CUDA device code unchanged (design: kernels reuse it).
// Built with nvcc by tests/cuda/CMakeLists.txt whenever nvcc is present; nothing runs on a GPU.
#include "grape/math/bias.hpp"
#include "grape/math/gated_path_bias.hpp"
#include "grape/math/phase.hpp"
#include "grape/math/rank2.hpp"
#include "grape/math/rotate.hpp"
#include "grape/math/sincos.hpp"

__global__ void exercise_math(const float* x, float* y, const grape::math::phase_t* turns, const long long* pos, int planes) {
  using namespace grape::math;
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= planes) return;
  const auto sc = sincos_of_phase(phase_at(pos[0], turns[i]) + phase_of_turns(0.001 * pos[1]));
  const auto r = rotate_pair(x[2 * i], x[2 * i + 1], sc.sin, sc.cos);
  y[2 * i] = r.first + alibi_bias(0.5f, pos[0], i) + static_cast<float>(t5_bucket(i - pos[0], true, 32, 128));
  y[2 * i + 1] = r.second + static_cast<float>(alibi_slope(i, planes)) + static_cast<float>(phase_to_radians(turns[i]));
  float out[4];
  rank2_apply(x, x + 4, sc.sin, sc.cos, x + 8, out, 4);
  const double xd[2] = {x[0], x[1]}, yd[2] = {x[2], x[3]};
  y[1] += static_cast<float>(path_integral_term(xd, yd, 2, sc.cos, sc.sin, 0.5) + gated_linear_value(i, 0.25, 1.5));
  y[0] += out[0] + static_cast<float>(first_channel(layout_kind::half_split, i, 8) + second_channel(layout_kind::interleaved, i, 8));
}

// The representation views (what every kernel takes) must be device code too.
#include "grape/view/lift.hpp"
#include "grape/view/planes.hpp"
#include "grape/view/rank2.hpp"
#include "grape/view/scaled_planes.hpp"
#include "grape/view/skew.hpp"

template <class View>
__device__ void exercise(const View& v, const std::int64_t* c, bool key, const float* x, float* y, float* scratch) {
  v.prepare(c, key, scratch);
  v.apply(scratch, key, x, y, scratch + v.state_floats());
}

__global__ void exercise_views(grape::planes_view<2> planes, grape::scaled_planes_view scaled, grape::rank2_view rank2,
                               grape::skew_view<2> skew, grape::lift_view lift, const std::int64_t* pos, const float* x,
                               float* y, float* scratch) {
  const std::int64_t c[2] = {pos[0], pos[1]};
  exercise(planes, c, false, x, y, scratch);
  exercise(scaled, c, true, x, y, scratch);
  exercise(rank2, c, false, x, y, scratch);
  exercise(skew, c, true, x, y, scratch);
  exercise(lift, c, true, x, y, scratch);
}
