#pragma once
// The launch of rotate_qk's frequency gradient (rotate_freq_grad.cu), called by the host side
// (rotate_qk_host.cpp) with a validated plan over device pointers.
#include <cstdint>

#include "cuda/rotate_freq_grad_thread.hpp"

using cudaStream_t = struct CUstream_st*;

namespace grape::cuda::detail {

/// Both passes: the tokens' partials (c.partial: tokens × rotary_dim / 2 doubles of scratch), then
/// their sums into grad_inv_freq (rotary_dim / 2 doubles, device memory).
void launch_freq_grad(const freq_grad_call& c, kernel::dtype type, std::int64_t tokens, double* grad_inv_freq,
                      cudaStream_t stream);

}  // namespace grape::cuda::detail
