#pragma once
// The per-thread body of the CUDA rotate_qk kernel, in two phases that the launcher separates with
// __syncthreads(): one block per token (the grid is sized by tokens, never max_seqlen × batch);
//   fill_table: threads share the token's cos/sin table in shared memory (exact phase, computed
//               once per token for all heads of Q and K);
//   rotate:     each thread turns V planes of one head, moving whole chunks of V elements
//               (16-byte loads and stores when aligned), and copies pass-through channels.
// Plain arithmetic on plain data (the validated kernel::rotate_plan, device pointers): the
// same body runs on the host in tests/kernels_cuda_emulation over the same grid.
#include <cstdint>

#include "common/rotate_addressing.hpp"
#include "cuda/storage.hpp"
#include "grape/config.hpp"
#include "grape/math/rotate.hpp"

namespace grape::cuda {

using kernel::rotate_plan;

/// Work units of one token: (heads of Q + heads of K) × (rotation units + copy units) per head.
struct unit_counts {
  int rotate_per_head;  // rotary_dim / (2V)
  int copy_per_head;    // (head_dim − rotary_dim) / V when out of place, else 0
  GRAPE_HOST_DEVICE int per_head() const { return rotate_per_head + copy_per_head; }
};

template <class T, int V, math::layout_kind Layout>
struct rotate_token_thread {
  rotate_plan p;
  unit_counts units;
  std::int64_t max_position;  // positions must lie in [0, max_position) (and inside the cache)
  std::int64_t cache_rows;    // rows of p.cache
  int* error_flag;            // set to 1 for a bad position; that token is left untouched

  GRAPE_HOST_DEVICE std::int64_t position(std::int64_t token, kernel::token_place place, int axis) const {
    return kernel::position_of(p, token, place, axis);
  }
  GRAPE_HOST_DEVICE bool token_ok(std::int64_t token, kernel::token_place place) const {
    for (int a = 0; a < p.num_axes; ++a) {
      const std::int64_t m = position(token, place, a);
      if (m < 0 || m >= max_position) return false;
      if (p.cache != nullptr && (m < p.cache_first || m >= p.cache_first + cache_rows)) return false;
    }
    return true;
  }

  /// Phase 1: table[i] = af·cos, table[half + i] = ±af·sin for the token's planes.
  GRAPE_HOST_DEVICE void fill_table(std::int64_t token, int tid, int nthreads, float* table) const {
    const auto place = kernel::locate_token(p, token);
    if (!token_ok(token, place)) {
      if (tid == 0) *error_flag = 1;
      return;
    }
    const int half = p.rotary_dim / 2;
    for (int i = tid; i < half; i += nthreads) {
      const int axis = p.plane_axis ? p.plane_axis[i] : 0;
      kernel::fill_table_plane(p, i, position(token, place, axis), table);
    }
  }

  /// Phase 2: every unit of the token.
  GRAPE_HOST_DEVICE void rotate(std::int64_t token, int tid, int nthreads, const float* table) const {
    const auto place = kernel::locate_token(p, token);
    if (!token_ok(token, place)) return;  // reported by fill_table
    const int half = p.rotary_dim / 2;
    const int per_head = units.per_head();
    const int total = static_cast<int>(p.q.heads + p.k.heads) * per_head;
    for (int u = tid; u < total; u += nthreads) {
      const int head_all = u / per_head, j = u % per_head;
      const bool is_q = head_all < p.q.heads;
      const kernel::qk_operand& t = is_q ? p.q : p.k;
      const std::int64_t h = is_q ? head_all : head_all - p.q.heads;
      const std::int64_t base = kernel::token_offset(t, p, token, place) + h * t.head_stride;
      const T* in = static_cast<const T*>(t.in) + base;
      T* out = static_cast<T*>(t.out) + base;
      if (j >= units.rotate_per_head) {  // pass-through channels, out of place only
        if (t.in == t.out) continue;
        const int c = p.rotary_dim + (j - units.rotate_per_head) * V;
        *reinterpret_cast<chunk<T, V>*>(out + c) = *reinterpret_cast<const chunk<T, V>*>(in + c);
        continue;
      }
      const int plane = j * V;
      const int c0 = Layout == math::layout_kind::half_split ? plane : 2 * plane;
      if constexpr (Layout == math::layout_kind::half_split) {
        const chunk<T, V> a = *reinterpret_cast<const chunk<T, V>*>(in + c0);
        const chunk<T, V> b = *reinterpret_cast<const chunk<T, V>*>(in + c0 + half);
        chunk<T, V> ra, rb;
        for (int e = 0; e < V; ++e) {
          const float x0 = storage<T>::load(a.v[e]), x1 = storage<T>::load(b.v[e]);
          const math::pair2<float> r = math::rotate_pair(x0, x1, table[half + plane + e], table[plane + e]);
          ra.v[e] = storage<T>::store(r.first);
          rb.v[e] = storage<T>::store(r.second);
        }
        *reinterpret_cast<chunk<T, V>*>(out + c0) = ra;
        *reinterpret_cast<chunk<T, V>*>(out + c0 + half) = rb;
      } else {
        // 2V channels = V planes, as two chunks when V > 1 (one when V == 1 would split a plane).
        T x[2 * V];
        for (int e = 0; e < 2 * V; e += V) {
          const chunk<T, V> a = *reinterpret_cast<const chunk<T, V>*>(in + c0 + e);
          for (int f = 0; f < V; ++f) x[e + f] = a.v[f];
        }
        for (int e = 0; e < V; ++e) {
          const float x0 = storage<T>::load(x[2 * e]), x1 = storage<T>::load(x[2 * e + 1]);
          const math::pair2<float> r = math::rotate_pair(x0, x1, table[half + plane + e], table[plane + e]);
          x[2 * e] = storage<T>::store(r.first);
          x[2 * e + 1] = storage<T>::store(r.second);
        }
        for (int e = 0; e < 2 * V; e += V) {
          chunk<T, V> a;
          for (int f = 0; f < V; ++f) a.v[f] = x[e + f];
          *reinterpret_cast<chunk<T, V>*>(out + c0 + e) = a;
        }
      }
    }
  }
};

}  // namespace grape::cuda
