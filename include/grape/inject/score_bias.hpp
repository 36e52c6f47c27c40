#pragma once
// score_bias<B>: the logit of query position m and key position n is qᵀk + b_h(m, n).
// B provides heads() and bias(head, c_m, c_n); a content-dependent bias (FoX) also provides
// bias_with_content(head, m, n, origin): the same bias with its per-position content moved so
// that the content at position origin + ℓ is the content that sat at ℓ.
//
// A bias with learnable parameters may give their gradient (BiasWithGradient), which the fused
// attention's backward (cpu::attention_backward) returns with dQ, dK and dV: the kernel adds each
// logit's gradient g = dL/db_h(m, n) into an accumulator of grad_accumulator_size() doubles
// through accumulate_grad (O(1) per logit: a path sum records where its path starts and ends),
// then gradient() turns the summed accumulator into dL/d(parameters), parameter_count() values.
// A bias whose terms each need a sum over a row's keys (GRAPE-AP: a term on the path from n to m
// gets Σ_{n<ℓ} g(m, n)) takes whole rows instead (BiasWithRowGradient): accumulate_row_grad sees
// one query's gradients over every key of its sequence at once. Either also gives its parameters
// (BiasWithParameters: parameters(out), set_parameters(p)), which grape::check needs to test the
// gradient.
#include <array>
#include <cstddef>
#include <cstdint>

#include "grape/inject/concepts.hpp"

namespace grape {

template <class B>
concept ContentDependentBias = requires(const B& b, std::int64_t p) {
  { b.bias_with_content(0, p, p, p) } -> std::convertible_to<double>;
};

template <class B>
concept BiasWithGradient = requires(const B& b, const std::array<std::int64_t, 1>& p, double* acc, const double* sum) {
  { b.parameter_count() } -> std::convertible_to<std::size_t>;
  { b.grad_accumulator_size() } -> std::convertible_to<std::size_t>;
  b.accumulate_grad(0, p, p, 1.0, acc);
  b.gradient(sum, acc);
};

template <class B>
concept BiasWithRowGradient = requires(const B& b, const std::int64_t* n, const float* ds, double* acc,
                                       const double* sum) {
  { b.parameter_count() } -> std::convertible_to<std::size_t>;
  { b.grad_accumulator_size() } -> std::convertible_to<std::size_t>;
  b.accumulate_row_grad(0, std::int64_t{0}, n, ds, std::int64_t{0}, acc);
  b.gradient(sum, acc);
};

/// A bias that gives a gradient also gives its parameters, so that the checker can test the
/// gradient against central differences (the bias_gradient law, check/gradient_laws.hpp):
/// parameters(out) writes parameter_count() values in the gradient's layout, and
/// set_parameters(p) makes this bias the one with other values in that layout (a derived bias
/// that redefines bias() inherits both, and its inherited gradient is tested against its bias()).
template <class B>
concept BiasWithParameters = requires(const B& b, B& m, double* out, const double* p) {
  b.parameters(out);
  m.set_parameters(p);
};

template <class B>
struct bias_instance {
  B bias;
  int head_dim = 0;

  int content_dim() const { return head_dim; }
  int heads() const { return bias.heads(); }

  template <std::size_t N>
  double score(int h, const double* q, const double* k, const std::array<std::int64_t, N>& m,
               const std::array<std::int64_t, N>& n) const {
    return detail::dot(q, k, head_dim) + bias.bias(h, m, n);
  }
};

template <class B>
struct score_bias {
  static constexpr std::string_view description = "add a score bias";
  template <class R>
  using instance = bias_instance<B>;
  using bias_type = B;
};

}  // namespace grape
