#pragma once
// The per-thread body of the CUDA rotate_qk for any representation view (the rotation-plane
// encodings keep their chunked body, rotate_qk_thread.hpp). One block per token, in the two
// phases two_phase_kernel separates with a barrier:
//   fill_table: the view's per-token state for Q's action and for K's (threads 0 and 1), into
//               shared memory: computed once per token for all heads, as on the CPU;
//   rotate:     each thread encodes whole heads (head tid, tid + blockDim, ...): it gathers the
//               rotary window in the view's order (math::window_channel) from storage into its
//               own slice of shared memory, applies the view, and scatters the result times the
//               attention factor; pass-through channels are copied when out of place.
// The same plan, addressing and view functions as the CPU's generic body (encode_qk_item.hpp);
// backward is the same body at −c with the query and key actions swapped. Plain arithmetic on
// plain data: tests/cuda_emulation runs it on the host over the same grid.
#include <cstdint>

#include "common/rotate_addressing.hpp"
#include "cuda/storage.hpp"
#include "grape/config.hpp"
#include "grape/math/rotate.hpp"

namespace grape::cuda {

/// Shared memory of one block, in floats: the state of ρ, the state of κ, then per thread its
/// window in, its window out and the view's scratch.
struct view_shared_layout {
  int state = 0;
  int per_thread = 0;
  GRAPE_HOST_DEVICE std::int64_t floats(int threads) const {
    return 2 * static_cast<std::int64_t>(state) + static_cast<std::int64_t>(threads) * per_thread;
  }
};

template <class View>
view_shared_layout shared_layout_of(const View& v) {
  return {v.state_floats(), 2 * v.dim() + v.scratch_floats()};
}

template <class T, class View, math::layout_kind QLayout, math::layout_kind KLayout>
struct encode_token_thread {
  kernel::rotate_plan p;
  View view;  // its arrays in device memory (device_view)
  view_shared_layout shared;
  std::int64_t max_position;  // positions must lie in [0, max_position)
  int* error_flag;            // set to 1 for a bad position; that token is left untouched

  GRAPE_HOST_DEVICE bool coordinates(std::int64_t token, kernel::token_place place,
                                     std::int64_t* c) const {
    const bool backward = p.sin_sign < 0.0f;
    for (int a = 0; a < View::rank; ++a) {
      const std::int64_t m = kernel::position_of(p, token, place, a);
      if (m < 0 || m >= max_position) return false;
      c[a] = backward ? -m : m;
    }
    return true;
  }

  /// Phase 1: the state of Q's action at smem[0, state), of K's at smem[state, 2·state).
  GRAPE_HOST_DEVICE void fill_table(std::int64_t token, int tid, int nthreads, float* smem) const {
    const auto place = kernel::locate_token(p, token);
    std::int64_t c[View::rank];
    if (!coordinates(token, place, c)) {
      if (tid == 0) *error_flag = 1;
      return;
    }
    const bool backward = p.sin_sign < 0.0f;  // ρ(c)ᵀ = κ(−c), κ(c)ᵀ = ρ(−c)
    if (tid == 0) view.prepare(c, /*key=*/backward, smem);
    if (tid == (nthreads > 1 ? 1 : 0)) view.prepare(c, /*key=*/!backward, smem + shared.state);
  }

  /// Phase 2: every head of Q and K at this token, one head per thread at a time.
  GRAPE_HOST_DEVICE void rotate(std::int64_t token, int tid, int nthreads, float* smem) const {
    const auto place = kernel::locate_token(p, token);
    std::int64_t c[View::rank];
    if (!coordinates(token, place, c)) return;  // reported by fill_table
    const bool backward = p.sin_sign < 0.0f;
    float* in = smem + 2 * shared.state + static_cast<std::int64_t>(tid) * shared.per_thread;
    const std::int64_t heads = p.q.heads + p.k.heads;
    for (std::int64_t head = tid; head < heads; head += nthreads) {
      const bool is_q = head < p.q.heads;
      if (is_q)
        encode_head<QLayout>(p.q, head, token, place, smem, /*key=*/backward, in);
      else
        encode_head<KLayout>(p.k, head - p.q.heads, token, place, smem + shared.state, !backward, in);
    }
  }

  template <math::layout_kind Layout>
  GRAPE_HOST_DEVICE void encode_head(const kernel::qk_operand& t, std::int64_t h, std::int64_t token,
                                     kernel::token_place place, const float* state, bool key,
                                     float* in) const {
    const std::int64_t base = kernel::token_offset(t, p, token, place) + h * t.head_stride;
    const T* x = static_cast<const T*>(t.in) + base;
    T* y = static_cast<T*>(t.out) + base;
    const int rd = p.rotary_dim;
    float* out = in + rd;
    for (int j = 0; j < rd; ++j) in[j] = storage<T>::load(x[math::window_channel(Layout, j, rd)]);
    view.apply(state, key, in, out, out + rd);
    for (int j = 0; j < rd; ++j)
      y[math::window_channel(Layout, j, rd)] = storage<T>::store(p.attention_factor * out[j]);
    if (t.in != t.out)
      for (int ch = rd; ch < p.head_dim; ++ch) y[ch] = x[ch];
  }
};

}  // namespace grape::cuda
