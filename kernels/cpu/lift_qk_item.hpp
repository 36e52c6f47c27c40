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
    // One head of `from` (width n_in) through head h's lift into `out`.
    const auto lift = [&](const Storage* from, int n_in, std::int64_t h, bool key) {
      widen_n(from, in, n_in);
      lift_head(views[h], c, key, lp.backward, in, out, work);
    };
    // Forward: Q and K (d channels) into the lifted (w); backward: the lifted's gradients back.
    const bool back = lp.backward;
    const qk_operand& q_in = back ? lp.q_lifted : p.q;
    const qk_operand& k_in = back ? lp.k_lifted : p.k;
    const qk_operand& q_out = back ? p.q : lp.q_lifted;
    const qk_operand& k_out = back ? p.k : lp.k_lifted;
    const int n_in = back ? w : d, n_out = back ? d : w;
    const Storage* q = row(q_in, q_in.in);
    const Storage* k = row(k_in, k_in.in);
    Storage* q_to = out_row(q_out, q_out.out);
    Storage* k_to = out_row(k_out, k_out.out);
    for (std::int64_t h = 0; h < p.q.heads; ++h) {
      lift(q + h * q_in.head_stride, n_in, h, /*key=*/false);
      narrow_n(out, q_to + h * q_out.head_stride, n_out);
    }
    if (!back) {
      for (std::int64_t h = 0; h < p.q.heads; ++h) {
        lift(k + (h / group) * k_in.head_stride, d, h, /*key=*/true);
        narrow_n(out, k_to + h * k_out.head_stride, w);
      }
      return;
    }
    for (std::int64_t g = 0; g < p.k.heads; ++g) {
      for (int j = 0; j < d; ++j) sum[j] = 0.0f;
      for (std::int64_t h = g * group; h < (g + 1) * group; ++h) {
        lift(k + h * k_in.head_stride, w, h, /*key=*/true);
        for (int j = 0; j < d; ++j) sum[j] += out[j];
      }
      narrow_n(sum, k_to + g * k_out.head_stride, d);
    }
  }
};

}  // namespace grape::cpu::detail
