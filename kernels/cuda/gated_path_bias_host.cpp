// Host side of the CUDA gated and path-integral bias tiles (compiled by the host compiler): the arrays uploaded, the
// tile checked as the CPU checks it, the row bodies over device pointers.
#include <cmath>

#include "common/bias_tile.hpp"
#include "common/gated_path_bias_rows.hpp"
#include "grape/encodings/grape_a_gated.hpp"
#include "grape/encodings/grape_ap.hpp"
#include "cuda/gated_path_bias_cuda.hpp"
#include "cuda/gated_path_bias_launch.hpp"

namespace grape::cuda {
namespace {
constexpr const char* bias_array = "a bias array";  // what an allocation error names
}  // namespace

device_gated_bias::device_gated_bias(const bias_instance<gated_linear_bias>& inst) {
  heads = inst.heads();
  length = inst.bias.length;
  omega = arrays_.copy(inst.bias.omega, bias_array);
  key_gate = arrays_.copy(inst.bias.key_gate, bias_array);
  query_gate = arrays_.copy(inst.bias.query_gate, bias_array);  // null when key-gated
}

device_path_integral_bias::device_path_integral_bias(const bias_instance<path_integral_bias>& inst) {
  heads = inst.heads();
  length = inst.bias.length;
  dim = inst.bias.dim;
  norm_eps = inst.bias.norm_eps;
  slopes = arrays_.copy(inst.bias.slopes, bias_array);
  rows = arrays_.copy(inst.bias.rows, bias_array);
  keys = arrays_.copy(inst.bias.keys, bias_array);
  offset_cos = arrays_.copy(inst.bias.offset_cos, bias_array);
  offset_sin = arrays_.copy(inst.bias.offset_sin, bias_array);
}

void bias_tile(const device_gated_bias& b, const kernel::bias_tile& tile, cudaStream_t stream) {
  kernel::require_tile_in_sequence(tile, b.heads, b.length);
  detail::launch_bias_rows(kernel::gated_linear_rows{kernel::shape_of(tile), b.length, b.omega,
                                                          b.key_gate, b.query_gate},
                           stream);
}

void bias_tile(const device_path_integral_bias& b, const kernel::bias_tile& tile, cudaStream_t stream) {
  kernel::require_tile_in_sequence(tile, b.heads, b.length);
  detail::launch_bias_rows(kernel::path_integral_rows{kernel::shape_of(tile), b.length, b.dim,
                                                           b.slopes, b.rows, b.keys,
                                                           b.offset_cos, b.offset_sin},
                           stream);
}

void gated_linear_grad(const device_gated_bias& b, const double* grad_tile, double* grad, cudaStream_t stream) {
  if (grad_tile == nullptr || grad == nullptr) throw input_error("gated_linear_grad: grad_tile and grad must not be null");
  detail::launch_gated_linear_grad({b, grad_tile, grad}, stream);
}

void path_integral_grad(const device_path_integral_bias& b, const double* grad_tile, double* grad_p, double* scratch,
                        cudaStream_t stream) {
  if (grad_tile == nullptr || grad_p == nullptr || scratch == nullptr)
    throw input_error("path_integral_grad: grad_tile, grad_p and scratch must not be null");
  detail::launch_path_integral_grad({b, grad_tile, grad_p, scratch}, stream);
}

}  // namespace grape::cuda
