// The CUDA rotate_qk for encoding instances (kernels/cuda/encode_qk.cuh) instantiated for every
// built-in representation that rotate_qk encodings use, and GRAPE-A's lift_qk (lift_qk.cuh), in
// f32/f16/bf16: it must compile for every configured architecture, and ptxas must report no spill
// and no stack frame (tests/cuda). The bodies are checked against the CPU kernels by
// tests/cuda_emulation.
#include "cuda/encode_qk.cuh"
#include "cuda/lift_qk.cuh"
#include "grape/rep/rank2_rotation.hpp"
#include "grape/rep/rotation_planes.hpp"
#include "grape/rep/scaled_planes.hpp"
#include "grape/rep/skew_generators.hpp"
#include "grape/rep/unipotent_lift.hpp"

namespace grape::cuda {

#define GRAPE_ENCODE_QK_INSTANCE(R, L)                                                                     \
  template void rotate_qk(const device_encoding<R, layout_kind::L, layout_kind::L>&,                       \
                          const cpu::rotate_qk_args&, std::int64_t, int*, cudaStream_t);                   \
  template void rotate_qk_backward(const device_encoding<R, layout_kind::L, layout_kind::L>&,              \
                                   const cpu::rotate_qk_args&, std::int64_t, int*, cudaStream_t);

GRAPE_ENCODE_QK_INSTANCE(rotation_planes<1>, half_split)   // RoPE, the tutorial's cyclic RoPE
GRAPE_ENCODE_QK_INSTANCE(rotation_planes<1>, interleaved)  // RoPE (GPT-J layout)
GRAPE_ENCODE_QK_INSTANCE(rotation_planes<2>, interleaved)  // axial 2-D RoPE
GRAPE_ENCODE_QK_INSTANCE(rotation_planes<3>, half_split)   // M-RoPE
GRAPE_ENCODE_QK_INSTANCE(scaled_planes, half_split)        // xPos
GRAPE_ENCODE_QK_INSTANCE(rank2_rotation, interleaved)      // GRAPE-M
GRAPE_ENCODE_QK_INSTANCE(skew_generators<1>, interleaved)  // learned basis (STRING)
GRAPE_ENCODE_QK_INSTANCE(skew_generators<2>, interleaved)  // LieRE 2-D

}  // namespace grape::cuda

// GRAPE-A's lift on Q/K (kernels/cuda/lift_qk.cuh), forward and backward.
namespace grape::cuda {
template void lift_qk(const device_lift<unipotent_lift>&, const cpu::rotate_qk_args&, const cpu::lifted_tensor&,
                      const cpu::lifted_tensor&, std::int64_t, int*, cudaStream_t);
template void lift_qk_backward(const device_lift<unipotent_lift>&, const cpu::rotate_qk_args&,
                               const cpu::lifted_tensor&, const cpu::lifted_tensor&, std::int64_t, int*, cudaStream_t);
}  // namespace grape::cuda
