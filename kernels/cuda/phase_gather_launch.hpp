#pragma once
// The launches of contextual GRAPE-M's phase gather, origins and scatter around its rotation in
// cuda::attention (phase_gather.cu; the bodies: phase_gather_thread.hpp).
#include "cuda/phase_gather_thread.hpp"

using cudaStream_t = struct CUstream_st*;

namespace grape::cuda::detail {

/// The call's phases from the table, their sequences' origins; the table's gradient (table_grads
/// zeroed first) from the call's.
void launch_phase_gather(const phase_gather& gather, cudaStream_t stream);
void launch_phase_origin(const phase_origin& origin, cudaStream_t stream);
void launch_phase_scatter(const phase_scatter& scatter, cudaStream_t stream);

}  // namespace grape::cuda::detail
