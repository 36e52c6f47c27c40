#pragma once
// The launches of the CUDA flash attention, one translation unit per storage type (flash_*.cu),
// each instantiated for the score biases of flash_scores.hpp.
#include "cuda/flash_args.hpp"
#include "cuda/flash_scores.hpp"

using cudaStream_t = struct CUstream_st*;

namespace grape::cuda::detail {

template <class Bias>
void launch_flash_f32(const flash_args& ops, const flash_plan& plan, const Bias& bias, cudaStream_t stream);
template <class Bias>
void launch_flash_f16(const flash_args& ops, const flash_plan& plan, const Bias& bias, cudaStream_t stream);
template <class Bias>
void launch_flash_bf16(const flash_args& ops, const flash_plan& plan, const Bias& bias, cudaStream_t stream);

template <class Bias>
void launch_flash_backward_f32(const flash_args& ops, const flash_grads& g, const flash_plan& plan,
                               const Bias& bias, cudaStream_t stream);
template <class Bias>
void launch_flash_backward_f16(const flash_args& ops, const flash_grads& g, const flash_plan& plan,
                               const Bias& bias, cudaStream_t stream);
template <class Bias>
void launch_flash_backward_bf16(const flash_args& ops, const flash_grads& g, const flash_plan& plan,
                                const Bias& bias, cudaStream_t stream);

/// The current device's opt-in shared memory per block, in bytes (flash_host.cpp).
std::int64_t shared_memory_limit();

/// Sets *error when a position of [tokens] lies outside [0, limit) (flash_f32.cu).
void launch_position_check(const std::int64_t* positions, std::int64_t tokens, std::int64_t limit, int* error,
                           cudaStream_t stream);

}  // namespace grape::cuda::detail
