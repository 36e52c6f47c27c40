#pragma once
// The launches of the CUDA decode attention (decode.cu, or a .cu file of yours for a score view:
// GRAPE_DECODE_SCORE_VIEW in decode_launch.cuh).
#include "cuda/decode_call.hpp"
#include "cuda/flash_scores.hpp"

using cudaStream_t = struct CUstream_st*;

namespace grape::cuda::detail {

/// decode_positions over the sequences.
void launch_decode_positions(const decode_positions& p, cudaStream_t stream);
/// The decode blocks for the call's storage type, then the merge.
template <class Bias>
void launch_decode(const decode_call& c, const Bias& bias, std::int64_t smem_bytes, cudaStream_t stream);

}  // namespace grape::cuda::detail
