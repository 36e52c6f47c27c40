#pragma once
// The per-token body of lift_qk on the CPU: rotate_qk's addressing for the token and its
// coordinates, then every head through lift_head (lift_head.hpp, shared with CUDA). The lifted
// key of query head h is key head h / (q.heads / k.heads) under h's lift, so with GQA each key
// head is lifted once per query head of its group, and its gradient sums over the group.
#include <cstdint>

#include "common/lift_head.hpp"
#include "common/lift_plan.hpp"
#include "common/rotate_addressing.hpp"
#include "cpu/kernel_vocabulary.hpp"
#include "cpu/storage_io.hpp"
#include "grape/view/concepts.hpp"

namespace grape::cpu::detail {

template <class Storage, RepresentationView View>
struct lift_token {
  lift_plan lp;
  const View* views;  // one per query head

  /// Per-thread scratch: the lifted input and output, the key gradient's sum, the view's work.
  static int scratch_floats(const lift_plan& plan, const View& v) {
    return 2 * (plan.plan.head_dim + 2) + plan.plan.head_dim + lift_work_floats(v);
  }

  void operator()(std::int64_t token, float* scratch) const {
    const rotate_plan& p = lp.plan;
    const token_place place = locate_token(p, token);
    std::int64_t c[View::rank];
    for (int a = 0; a < View::rank; ++a) c[a] = position_of(p, token, place, a);
    const int d = p.head_dim, w = d + 2;
    float* in = scratch;
    float* out = in + w;
    float* sum = out + w;
    float* work = sum + d;
    const std::int64_t group = p.q.heads / p.k.heads;
    const auto row = [&](const qk_operand& t, const void* data) {
      return static_cast<const Storage*>(data) + token_offset(t, p, token, place);
    };
    const auto out_row = [&](const qk_operand& t, void* data) {
      return static_cast<Storage*>(data) + token_offset(t, p, token, place);
    };
    if (!lp.backward) {
      const Storage* q = row(p.q, p.q.in);
      const Storage* k = row(p.k, p.k.in);
      Storage* ql = out_row(lp.q_lifted, lp.q_lifted.out);
      Storage* kl = out_row(lp.k_lifted, lp.k_lifted.out);
      for (std::int64_t h = 0; h < p.q.heads; ++h) {
        widen_n(q + h * p.q.head_stride, in, d);
        lift_head(views[h], c, /*key=*/false, /*backward=*/false, in, out, work);
        narrow_n(out, ql + h * lp.q_lifted.head_stride, w);
        widen_n(k + (h / group) * p.k.head_stride, in, d);
        lift_head(views[h], c, /*key=*/true, /*backward=*/false, in, out, work);
        narrow_n(out, kl + h * lp.k_lifted.head_stride, w);
      }
      return;
    }
    // Backward: each lifted head's gradient through its lift's transpose into `out`.
    const auto lift_back = [&](const qk_operand& lifted, std::int64_t h, bool key) {
      widen_n(row(lifted, lifted.in) + h * lifted.head_stride, in, w);
      lift_head(views[h], c, key, /*backward=*/true, in, out, work);
    };
    Storage* dq = out_row(p.q, p.q.out);
    Storage* dk = out_row(p.k, p.k.out);
    for (std::int64_t h = 0; h < p.q.heads; ++h) {
      lift_back(lp.q_lifted, h, /*key=*/false);
      narrow_n(out, dq + h * p.q.head_stride, d);
    }
    for (std::int64_t g = 0; g < p.k.heads; ++g) {
      for (int j = 0; j < d; ++j) sum[j] = 0.0f;
      for (std::int64_t h = g * group; h < (g + 1) * group; ++h) {
        lift_back(lp.k_lifted, h, /*key=*/true);
        for (int j = 0; j < d; ++j) sum[j] += out[j];
      }
      narrow_n(sum, dk + g * p.k.head_stride, d);
    }
  }
};

}  // namespace grape::cpu::detail
