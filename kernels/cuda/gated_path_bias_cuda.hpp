#pragma once
// CUDA bias tiles of gated GRAPE-A (key- or query+key-gated) and of GRAPE-AP's path integral (the
// CPU tiles: cpu/encode_bias_gated_path.hpp).
//
//   const grape::cuda::device_gated_bias bias(grape_a_key_gated::make(p));   // arrays uploaded once
//   grape::cuda::bias_tile(bias, tile, stream);    // tile.out: device memory, [heads, q_len, k_len]
//
// The same row bodies as the CPU (float64 per element, rounded once; keys after the query −∞),
// one thread per element or row. Shapes are checked on the host as the CPU checks them.
// path_integral_grad: GRAPE-AP's dL/dp from the tile's gradient (path_integral_grad_thread.hpp);
// gated_linear_grad: gated GRAPE-A's dL/d(ω, gates) (common/gated_linear_grad_items.hpp).
#include <cstdint>

#include "common/bias_tile.hpp"
#include "common/gated_linear_grad_items.hpp"
#include "cuda/device_arrays.hpp"
#include "cuda/path_integral_grad_thread.hpp"
#include "grape/encodings/grape_a_gated.hpp"
#include "grape/encodings/grape_ap.hpp"
#include "grape/inject/score_bias.hpp"

using cudaStream_t = struct CUstream_st*;

namespace grape::cuda {

/// grape_a_key_gated / grape_a_qk_gated on the device: ω_h and the gates (float64 device memory).
class device_gated_bias : public kernel::gated_linear_arrays {
  device_arrays arrays_;  // owns what the pointers point at

 public:
  explicit device_gated_bias(const bias_instance<gated_linear_bias>& inst);
};

/// grape_ap_relative on the device: slopes, p, p̂ and the cos/sin of each offset (float64 device
/// memory).
class device_path_integral_bias : public path_integral_arrays {
  device_arrays arrays_;  // owns what the pointers point at

 public:
  explicit device_path_integral_bias(const bias_instance<path_integral_bias>& inst);
};

/// dL/dp [heads, T, P] of GRAPE-AP's bias from dL/d(tile) G [heads, T, T] over the whole sequence
/// (T = the bias's length), as cpu::path_integral_grad: float64 device memory; `scratch` holds
/// heads·T·P doubles of device memory the call overwrites.
void path_integral_grad(const device_path_integral_bias& bias, const double* grad_tile, double* grad_p,
                        double* scratch, cudaStream_t stream);

/// dL/d(ω, gates) of gated GRAPE-A's bias from dL/d(tile) G [heads, T, T] over the whole sequence,
/// as cpu::gated_linear_grad (the same bodies and order: the same bits): float64 device memory,
/// grad in the bias's parameter layout (ω [heads], key gates [heads, T], query gates [heads, T]).
void gated_linear_grad(const device_gated_bias& bias, const double* grad_tile, double* grad, cudaStream_t stream);

/// Writes the tile (tile.out in device memory; tile.threads is not used).
void bias_tile(const device_gated_bias& bias, const kernel::bias_tile& tile, cudaStream_t stream);
void bias_tile(const device_path_integral_bias& bias, const kernel::bias_tile& tile, cudaStream_t stream);

}  // namespace grape::cuda
