#pragma once
// The per-thread body of the CUDA lift_qk (GRAPE-A and any lift_qk representation). One block
// per token, in two_phase_kernel's two phases:
//   fill_table: checks the token's positions (a bad one sets the error flag; the token is skipped);
//   rotate:     each thread takes whole heads — forward: the q.heads lifted queries, then the
//               q.heads lifted keys (key head h / group under query head h's lift); backward: the
//               q.heads query gradients, then the k.heads key gradients, each summed over its
//               group — through lift_head (common/lift_head.hpp), as the CPU item does, in its own
//               slice of shared memory.
// The same plan, addressing and head function as the CPU body (cpu/lift_qk_item.hpp); plain
// arithmetic on plain data, so tests/cuda_emulation runs it on the host over the same grid.
#include <cstdint>

#include "common/lift_head.hpp"
#include "common/lift_plan.hpp"
#include "common/rotate_addressing.hpp"
#include "cuda/storage.hpp"
#include "grape/config.hpp"

namespace grape::cuda {

/// Shared floats one thread needs: the lifted input and output, the key gradient's sum, the view's work.
template <class View>
int lift_thread_floats(int head_dim, const View& v) {
  return 2 * (head_dim + 2) + head_dim + kernel::lift_work_floats(v);
}

template <class T, class View>
struct lift_token_thread {
  kernel::lift_plan lp;
  const View* views;          // one per query head, in device memory
  int per_thread;             // lift_thread_floats
  std::int64_t max_position;  // positions must lie in [0, max_position)
  int* error_flag;            // set to 1 for a bad position; that token is left untouched

  GRAPE_HOST_DEVICE bool coordinates(std::int64_t token, kernel::token_place place, std::int64_t* c) const {
    for (int a = 0; a < View::rank; ++a) {
      c[a] = kernel::position_of(lp.plan, token, place, a);
      if (c[a] < 0 || c[a] >= max_position) return false;
    }
    return true;
  }

  GRAPE_HOST_DEVICE void fill_table(std::int64_t token, int tid, int, float*) const {
    std::int64_t c[View::rank];
    if (tid == 0 && !coordinates(token, kernel::locate_token(lp.plan, token), c)) *error_flag = 1;
  }

  GRAPE_HOST_DEVICE void rotate(std::int64_t token, int tid, int nthreads, float* smem) const {
    const kernel::rotate_plan& p = lp.plan;
    const auto place = kernel::locate_token(p, token);
    std::int64_t c[View::rank];
    if (!coordinates(token, place, c)) return;  // reported by fill_table
    float* in = smem + static_cast<std::int64_t>(tid) * per_thread;
    const std::int64_t units = p.q.heads + (lp.backward ? p.k.heads : p.q.heads);
    for (std::int64_t u = tid; u < units; u += nthreads) {
      if (lp.backward) backward_head(u, token, place, c, in);
      else forward_head(u, token, place, c, in);
    }
  }

  /// Unit u < q.heads: lifted query u; else lifted key u − q.heads.
  GRAPE_HOST_DEVICE void forward_head(std::int64_t u, std::int64_t token, kernel::token_place place,
                                      const std::int64_t* c, float* in) const {
    const kernel::rotate_plan& p = lp.plan;
    const bool key = u >= p.q.heads;
    const std::int64_t h = key ? u - p.q.heads : u;
    const kernel::qk_operand& src = key ? p.k : p.q;
    const kernel::qk_operand& dst = key ? lp.k_lifted : lp.q_lifted;
    const std::int64_t src_head = key ? h / (p.q.heads / p.k.heads) : h;
    const T* x = static_cast<const T*>(src.in) + kernel::token_offset(src, p, token, place) + src_head * src.head_stride;
    T* y = static_cast<T*>(dst.out) + kernel::token_offset(dst, p, token, place) + h * dst.head_stride;
    const int d = p.head_dim;
    float* out = in + d + 2;
    for (int j = 0; j < d; ++j) in[j] = storage<T>::load(x[j]);
    kernel::lift_head(views[h], c, key, /*backward=*/false, in, out, out + d + 2 + d);
    for (int j = 0; j < d + 2; ++j) y[j] = storage<T>::store(out[j]);
  }

  /// Unit u < q.heads: dL/dq of head u; else dL/dk of key head u − q.heads, summed over its group.
  GRAPE_HOST_DEVICE void backward_head(std::int64_t u, std::int64_t token, kernel::token_place place,
                                       const std::int64_t* c, float* in) const {
    const kernel::rotate_plan& p = lp.plan;
    const bool key = u >= p.q.heads;
    const std::int64_t h = key ? u - p.q.heads : u;
    const std::int64_t group = key ? p.q.heads / p.k.heads : 1;
    const kernel::qk_operand& src = key ? lp.k_lifted : lp.q_lifted;
    const kernel::qk_operand& dst = key ? p.k : p.q;
    const T* g = static_cast<const T*>(src.in) + kernel::token_offset(src, p, token, place);
    T* y = static_cast<T*>(dst.out) + kernel::token_offset(dst, p, token, place) + h * dst.head_stride;
    const int d = p.head_dim;
    float* out = in + d + 2;
    float* sum = out + d + 2;
    for (int j = 0; j < d; ++j) sum[j] = 0.0f;
    for (std::int64_t q = h * group; q < (h + 1) * group; ++q) {
      for (int j = 0; j < d + 2; ++j) in[j] = storage<T>::load(g[q * src.head_stride + j]);
      kernel::lift_head(views[q], c, key, /*backward=*/true, in, out, sum + d);
      for (int j = 0; j < d; ++j) sum[j] += out[j];
    }
    for (int j = 0; j < d; ++j) y[j] = storage<T>::store(sum[j]);
  }
};

}  // namespace grape::cuda
