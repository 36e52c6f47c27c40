// The CUDA rotate_qk for encoding instances (kernels/cuda/encode_qk_cuda.cuh) instantiated for every
// built-in representation that rotate_qk encodings use, and GRAPE-A's lift_qk (lift_qk_cuda.cuh), in
// f32/f16/bf16: it must compile for every configured architecture, and ptxas must report no spill
// and no stack frame (tests/cuda). The bodies are checked against the CPU kernels by
// tests/cuda_emulation.
#include "cuda/encode_qk_cuda.cuh"
#include "cuda/lift_qk_cuda.cuh"
#include "grape/rep/rank2_rotation.hpp"
#include "grape/rep/rotation_planes.hpp"
#include "grape/rep/scaled_planes.hpp"
#include "grape/rep/skew_generators.hpp"
#include "grape/rep/unipotent_lift.hpp"

GRAPE_CUDA_ENCODE_QK(rotation_planes<1>, half_split)   // RoPE, the tutorial's cyclic RoPE
GRAPE_CUDA_ENCODE_QK(rotation_planes<1>, interleaved)  // RoPE (GPT-J layout)
GRAPE_CUDA_ENCODE_QK(rotation_planes<2>, interleaved)  // axial 2-D RoPE
GRAPE_CUDA_ENCODE_QK(rotation_planes<3>, half_split)   // M-RoPE
GRAPE_CUDA_ENCODE_QK(scaled_planes, half_split)        // xPos
GRAPE_CUDA_ENCODE_QK(rank2_rotation, interleaved)      // GRAPE-M
GRAPE_CUDA_ENCODE_QK(skew_generators<1>, interleaved)  // learned basis (STRING)
GRAPE_CUDA_ENCODE_QK(skew_generators<2>, interleaved)  // LieRE 2-D

// GRAPE-A's lift on Q/K (kernels/cuda/lift_qk_cuda.cuh), forward and backward.
namespace grape::cuda {
template void lift_qk(const device_lift<unipotent_lift>&, const kernel::rotate_qk_args&, const kernel::lifted_tensor&,
                      const kernel::lifted_tensor&, std::int64_t, int*, cudaStream_t);
template void lift_qk_backward(const device_lift<unipotent_lift>&, const kernel::rotate_qk_args&,
                               const kernel::lifted_tensor&, const kernel::lifted_tensor&, std::int64_t, int*, cudaStream_t);
}  // namespace grape::cuda
