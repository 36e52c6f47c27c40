// The float32 arithmetic of PyTorch's CPU kernels, where a reference frequency table depends on
// it: transformers, vLLM and the original Llama code build θ_i with torch tensor operations, and
// a table that is bit-identical to theirs has to round where torch rounds (docs/models.md).
#pragma once

#include <vector>

namespace grape::torch_cpu {

/// The exponents `torch.arange(0, d, 2).float() / d`: float(2i) / float(d), d/2 of them.
std::vector<float> rope_exponents(int d);

/// `base ** exponents` for a Python float (or 0-dim tensor) base and a float32 tensor, as ATen's
/// CPU kernel computes it. ATen's vectorized loop takes the elements in blocks of two AVX2
/// vectors (16 floats) and evaluates those with SLEEF's powf (1-ulp, FMA); the remainder goes
/// through std::pow, the C library's powf. On a CPU without AVX2 and FMA ATen runs its scalar
/// kernel, which is powf throughout, and so does this function.
std::vector<float> pow_scalar_base(float base, const std::vector<float>& exponents);

/// A 1-element float32 tensor raised to a Python float: ATen's pow_tensor_scalar evaluates
/// std::pow(float, double), that is in double, and rounds the result to float32.
float pow_single(float base, double exponent);

/// Python's `s / t` for a float32 tensor t: Tensor.__rtruediv__ is reciprocal(t) * s, two
/// roundings, not one division.
inline float rdiv(float s, float t) { return (1.0f / t) * s; }

}  // namespace grape::torch_cpu
