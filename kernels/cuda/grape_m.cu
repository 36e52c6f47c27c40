// GRAPE-M's per-head and contextual rotations on the device: every dtype and layout in one
// translation unit (small bodies; the launch shape is planned on the host, grape_m_call.hpp).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "cuda/grape_m_call.hpp"
#include "cuda/launch.cuh"

namespace grape::cuda::detail {
namespace {

template <class T, math::layout_kind L>
void launch_as(const grape_m_launch& l, cudaStream_t stream) {
  const grape_m_token_thread<T, L> f{l.call};
  two_phase_kernel<<<static_cast<unsigned>(l.call.p.total_tokens), l.block, l.shared_bytes(), stream>>>(f);
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) throw std::runtime_error(std::string("grape: CUDA launch failed: ") + cudaGetErrorString(e));
}

template <class T>
void launch_typed(const grape_m_launch& l, math::layout_kind layout, cudaStream_t stream) {
  layout == math::layout_kind::half_split ? launch_as<T, math::layout_kind::half_split>(l, stream)
                                          : launch_as<T, math::layout_kind::interleaved>(l, stream);
}

}  // namespace

void launch_grape_m(const grape_m_launch& l, cpu::dtype type, math::layout_kind layout, cudaStream_t stream) {
  if (l.call.p.total_tokens == 0 || l.call.p.q.heads + l.call.p.k.heads == 0) return;
  switch (type) {
    case cpu::dtype::f32: return launch_typed<float>(l, layout, stream);
    case cpu::dtype::f16: return launch_typed<__half>(l, layout, stream);
    case cpu::dtype::bf16: return launch_typed<__nv_bfloat16>(l, layout, stream);
  }
}

}  // namespace grape::cuda::detail
