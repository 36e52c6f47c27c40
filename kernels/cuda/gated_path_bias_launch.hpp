#pragma once
// The launches of gated GRAPE-A's and GRAPE-AP's bias tiles and of their gradients
// (gated_path_bias.cu), called by the host side with bodies over device arrays.
#include "common/gated_linear_grad_items.hpp"
#include "common/gated_path_bias_rows.hpp"
#include "cuda/path_integral_grad_thread.hpp"

using cudaStream_t = struct CUstream_st*;

namespace grape::cuda::detail {

void launch_bias_rows(const kernel::gated_linear_rows& rows, cudaStream_t stream);
void launch_bias_rows(const kernel::path_integral_rows& rows, cudaStream_t stream);
/// Both passes of the path-integral gradient (the scratch zeroed first).
void launch_path_integral_grad(const path_integral_grad_call& call, cudaStream_t stream);
/// Both passes of gated GRAPE-A's gradient (tokens, then heads).
void launch_gated_linear_grad(const kernel::gated_linear_grad_call& call, cudaStream_t stream);

}  // namespace grape::cuda::detail
