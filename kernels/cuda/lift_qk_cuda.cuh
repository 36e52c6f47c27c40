#pragma once
// CUDA lift_qk for a lift instance (GRAPE-A): the device half of cpu::lift_qk (cpu/lift_qk.hpp),
// with the same arguments and checks (make_lift_plan, without reading device memory). In a .cu
// file compiled as C++20:
//
//   const grape::cuda::device_lift lift(grape_a::make(params));   // per-head views uploaded once
//   grape::cuda::lift_qk(lift, args, q_lifted, k_lifted, total_tokens, device_error_flag, stream);
//
// Bad positions set *device_error_flag and leave that token unwritten.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "common/lift_plan.hpp"
#include "cuda/device_arrays.hpp"
#include "cuda/device_view.hpp"
#include "cuda/encode_qk_cuda.cuh"
#include "cuda/launch.cuh"
#include "cuda/lift_qk_thread.hpp"
#include "cuda/rotate_qk_call.hpp"
#include "grape/detail/error.hpp"
#include "grape/inject/lift_qk.hpp"

namespace grape::cuda {

/// A lift instance on the device: every head's view with its arrays in device memory, and the
/// array of those views the kernel indexes by query head.
template <class R>
class device_lift {
 public:
  using view_type = decltype(std::declval<const R&>().view());

  explicit device_lift(const lift_instance<R>& inst) {
    shape_ = {inst.head_dim, inst.head_dim + 2, static_cast<std::int64_t>(inst.reps.size()), view_type::rank};
    std::vector<view_type> device_views;
    for (const R& rep : inst.reps) {
      heads_.push_back(std::make_unique<device_view<view_type>>(rep.view()));
      device_views.push_back(heads_.back()->view());
      if (device_views.back().dim() != inst.head_dim + 2) shape_.view_dim = device_views.back().dim();
      for (int axis = 0; axis < view_type::rank; ++axis)
        shape_.generator_scale = std::max(shape_.generator_scale, rep.generator(axis).cwiseAbs().maxCoeff());
    }
    views_ = arrays_.copy(device_views, "the lift's views");
    if (!device_views.empty()) per_thread_ = lift_thread_floats(inst.head_dim, device_views.front());
  }

  const kernel::lift_shape& shape() const { return shape_; }
  const view_type* views() const { return views_; }
  int per_thread_floats() const { return per_thread_; }

 private:
  kernel::lift_shape shape_;
  int per_thread_ = 0;
  std::vector<std::unique_ptr<device_view<view_type>>> heads_;
  device_arrays arrays_;
  const view_type* views_ = nullptr;
};

namespace detail {

template <class T, class View>
void launch_lift(const kernel::lift_plan& lp, const View* views, int per_thread, std::int64_t max_position,
                 int* error_flag, cudaStream_t stream) {
  const std::int64_t units = lp.plan.q.heads + (lp.backward ? lp.plan.k.heads : lp.plan.q.heads);
  if (lp.plan.total_tokens == 0 || units == 0) return;
  const int block = view_block_size(view_shared_layout{0, per_thread}, units);  // encode_qk_cuda.cuh's rule
  const lift_token_thread<T, View> f{lp, views, per_thread, max_position, error_flag};
  launch_two_phase(f, lp.plan.total_tokens, block, static_cast<std::size_t>(block) * per_thread * sizeof(float), stream,
                   "lift_qk");
}

template <class R>
void lift(const device_lift<R>& enc, const kernel::rotate_qk_args& args, const kernel::lifted_tensor& q,
          const kernel::lifted_tensor& k, std::int64_t total_tokens, int* device_error_flag, cudaStream_t stream,
          bool backward) {
  check_device_call(args, device_error_flag);
  const kernel::device_indices device{total_tokens};
  const kernel::lift_plan lp = kernel::make_lift_plan(enc.shape(), args, q, k, backward, &device);
  using V = typename device_lift<R>::view_type;
  const int n = enc.per_thread_floats();
  switch (args.type) {
    case kernel::dtype::f32: return launch_lift<float, V>(lp, enc.views(), n, args.max_position, device_error_flag, stream);
    case kernel::dtype::f16: return launch_lift<__half, V>(lp, enc.views(), n, args.max_position, device_error_flag, stream);
    case kernel::dtype::bf16:
      return launch_lift<__nv_bfloat16, V>(lp, enc.views(), n, args.max_position, device_error_flag, stream);
  }
}

}  // namespace detail

/// Lifts Q and K on the device (cpu::lift_qk's contract; total_tokens is required with cu_seqlens).
template <class R>
void lift_qk(const device_lift<R>& enc, const kernel::rotate_qk_args& args, const kernel::lifted_tensor& q_lifted,
             const kernel::lifted_tensor& k_lifted, std::int64_t total_tokens, int* device_error_flag,
             cudaStream_t stream) {
  detail::lift(enc, args, q_lifted, k_lifted, total_tokens, device_error_flag, stream, /*backward=*/false);
}

/// Backward on the device (cpu::lift_qk_backward's contract).
template <class R>
void lift_qk_backward(const device_lift<R>& enc, const kernel::rotate_qk_args& args,
                      const kernel::lifted_tensor& grad_q_lifted, const kernel::lifted_tensor& grad_k_lifted,
                      std::int64_t total_tokens, int* device_error_flag, cudaStream_t stream) {
  detail::lift(enc, args, grad_q_lifted, grad_k_lifted, total_tokens, device_error_flag, stream, /*backward=*/true);
}

}  // namespace grape::cuda
