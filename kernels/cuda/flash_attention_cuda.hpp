#pragma once
// Flash attention on the device over encoded operands and a score functor, forward and backward
// (the CPU's: cpu/attention.hpp, cpu/attention_backward.hpp):
//
//   O = softmax(scale·Q·Kᵀ + bias + mask)·V        cuda::flash_attention(ops, bias, stream)
//
// flash-style: blocks of up to 64 queries over tiles of up to 64 keys, online softmax in float32,
// never a T×T buffer; float16/bfloat16 products on the tensor cores (WMMA), float32 on the lanes.
// ops (flash_args.hpp) holds the encoded operands in device memory: a rotating encoding's Q and K
// rotated first (cuda::rotate_qk into a scratch buffer), a lift's lifted; the bias is the
// encoding's score bias (no_scores, alibi_scores, linear_scores, t5_scores, fox_scores, gated_scores: flash_scores.hpp, their
// arrays in device memory; T5's as t5_distance_table). Causal or not, sliding window, GQA, padded
// or packed sequences, the
// log-sum-exp. Host checks throw grape::input_error before any launch; a bad cu_seqlens or a FoX
// position outside its gates sets *ops.error on the device (the caller reads it).
#include "cuda/flash_args.hpp"
#include "cuda/flash_checks.hpp"
#include "cuda/flash_scores.hpp"

using cudaStream_t = struct CUstream_st*;

namespace grape::cuda {

/// The score biases (flash_scores.hpp) the entries below take, one X(type) each.
#define GRAPE_CUDA_FLASH_SCORES(X) \
  X(no_scores) X(alibi_scores) X(linear_scores) X(t5_scores) X(fox_scores) X(gated_scores)

/// Forward: O and, when ops.lse is set, the log-sum-exp. With fox_scores and gated_scores,
/// positions outside the gates' [0, length) set *ops.error before the attention runs.
///
/// Backward: dL/dQ, dL/dK, dL/dV (g, device memory, the storage type) of the encoded operands from
/// dL/dO, with the forward's ops (its output and log-sum-exp in ops.out and ops.lse, k_heads =
/// v_heads) and bias. Two launches (key tiles, then query tiles), no atomics: the same bits on every
/// run. A rotating encoding's dQ and dK go back through cuda::rotate_qk_backward.
#define GRAPE_CUDA_DECLARE_FLASH(Scores)                                                          \
  void flash_attention(const flash_args& ops, const Scores& bias, cudaStream_t stream);    \
  void flash_attention_backward(const flash_args& ops, const flash_grads& g, const Scores& bias, \
                                cudaStream_t stream);
GRAPE_CUDA_FLASH_SCORES(GRAPE_CUDA_DECLARE_FLASH)
#undef GRAPE_CUDA_DECLARE_FLASH

}  // namespace grape::cuda
