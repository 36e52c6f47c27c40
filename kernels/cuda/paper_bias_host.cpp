// Host side of the CUDA paper-bias tiles (compiled by the host compiler): the arrays uploaded, the
// tile checked as the CPU checks it, the row bodies over device pointers.
#include <cuda_runtime.h>

#include <cmath>
#include <fmt/format.h>
#include <stdexcept>

#include "cpu/encode_bias_paper.hpp"
#include "cuda/paper_bias_cuda.hpp"
#include "cuda/paper_bias_launch.hpp"

namespace grape::cuda {

device_doubles::device_doubles(const std::vector<double>& host) {
  if (host.empty()) return;
  const std::size_t bytes = host.size() * sizeof(double);
  if (cudaError_t e = cudaMalloc(&data_, bytes); e != cudaSuccess)
    throw std::runtime_error(fmt::format("grape: cudaMalloc of a bias array: {}", cudaGetErrorString(e)));
  if (cudaError_t e = cudaMemcpy(data_, host.data(), bytes, cudaMemcpyHostToDevice); e != cudaSuccess) {
    cudaFree(data_);
    throw std::runtime_error(fmt::format("grape: cudaMemcpy of a bias array: {}", cudaGetErrorString(e)));
  }
}

device_doubles::~device_doubles() { cudaFree(data_); }

device_gated_bias::device_gated_bias(const bias_instance<gated_linear_bias>& inst)
    : heads(inst.heads()), length(inst.bias.length), omega(inst.bias.omega), key_gate(inst.bias.key_gate),
      query_gate(inst.bias.query_gate) {}

device_path_integral_bias::device_path_integral_bias(const bias_instance<path_integral_bias>& inst)
    : heads(inst.heads()), length(inst.bias.length), dim(inst.bias.dim), norm_eps(inst.bias.norm_eps),
      slopes(inst.bias.slopes),
      rows(inst.bias.rows), keys(inst.bias.keys), offset_cos(inst.bias.offset_cos), offset_sin(inst.bias.offset_sin) {}

void bias_tile(const device_gated_bias& b, const cpu::bias_tile& tile, cudaStream_t stream) {
  cpu::detail::require_tile_in_sequence(tile, b.heads, b.length);
  detail::launch_bias_rows(cpu::detail::gated_linear_rows{cpu::detail::shape_of(tile), b.length, b.omega.get(),
                                                          b.key_gate.get(), b.query_gate.get()},
                           stream);
}

void bias_tile(const device_path_integral_bias& b, const cpu::bias_tile& tile, cudaStream_t stream) {
  cpu::detail::require_tile_in_sequence(tile, b.heads, b.length);
  detail::launch_bias_rows(cpu::detail::path_integral_rows{cpu::detail::shape_of(tile), b.length, b.dim,
                                                           b.slopes.get(), b.rows.get(), b.keys.get(),
                                                           b.offset_cos.get(), b.offset_sin.get()},
                           stream);
}

void gated_linear_grad(const device_gated_bias& b, const double* grad_tile, double* grad, cudaStream_t stream) {
  if (grad_tile == nullptr || grad == nullptr) throw input_error("gated_linear_grad: grad_tile and grad must not be null");
  detail::launch_gated_linear_grad(
      {b.heads, b.length, b.omega.get(), b.key_gate.get(), b.query_gate.get(), grad_tile, grad}, stream);
}

void path_integral_grad(const device_path_integral_bias& b, const double* grad_tile, double* grad_p, double* scratch,
                        cudaStream_t stream) {
  if (grad_tile == nullptr || grad_p == nullptr || scratch == nullptr)
    throw input_error("path_integral_grad: grad_tile, grad_p and scratch must not be null");
  path_integral_grad_call c;
  c.heads = b.heads;
  c.length = b.length;
  c.dim = b.dim;
  c.norm_eps = b.norm_eps;
  c.slopes = b.slopes.get();
  c.rows = b.rows.get();
  c.keys = b.keys.get();
  c.offset_cos = b.offset_cos.get();
  c.offset_sin = b.offset_sin.get();
  c.grad_tile = grad_tile;
  c.grad_p = grad_p;
  c.d_keys = scratch;
  detail::launch_path_integral_grad(c, stream);
}

}  // namespace grape::cuda
