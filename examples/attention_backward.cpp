// The backward of fused attention with learned ALiBi slopes (docs/attention.md): Q = K = 0, so the
// weights are ALiBi's alone, and the gradient of one output value with respect to head 0's slope
// has a closed form to check against.
#include <cmath>
#include <cstdio>
#include <vector>

#include "cpu/attention_backward.hpp"
#include "grape/builtins.hpp"

int main() {
  using namespace grape;
  const int heads = 4, d = 8;
  const std::vector<std::int64_t> cu_seqlens = {0, 3, 8};  // two sequences: 3 and 5 tokens
  const std::int64_t tokens = cu_seqlens.back(), size = tokens * heads * d;
  std::vector<float> q(size, 0.0f), k(size, 0.0f), v(size), out(size), lse(tokens * heads);
  for (std::int64_t i = 0; i < size; ++i) v[i] = static_cast<float>(i / (heads * d));  // V = token index

  cpu::attention_args a;
  a.qk.q = {q.data(), nullptr, heads, size, 0, heads * d, d};
  a.qk.k = {k.data(), nullptr, heads, size, 0, heads * d, d};
  a.v = {v.data(), nullptr, heads, size, 0, heads * d, d};
  a.qk.batch = 2;
  a.qk.cu_seqlens = cu_seqlens.data();
  a.out = out.data();
  a.lse = lse.data();
  const auto inst = alibi::make({heads, d, 8.0, {}});

  // L = out[token 4, head 0, channel 0]: dL/dO is 1 there and 0 elsewhere.
  std::vector<float> grad_out(size, 0.0f), dq(size), dk(size), dv(size);
  grad_out[(4 * heads + 0) * d] = 1.0f;
  std::vector<double> slope_grad(heads);
  cpu::attention(inst, a);                      // a.lse must be set
  cpu::attention_grad_args g{grad_out.data(), dq.data(), dk.data(), dv.data(), slope_grad.data(), nullptr};
  cpu::attention_backward(inst, a, g);

  // Token 4 sees keys 3 and 4 of its sequence: out = 4 − w3 with w3 = σ(−slope), so
  // dL/dslope = w3·(1 − w3); dL/dV of token 3 is w3 on that channel.
  const double slope = std::exp2(-8.0 / heads), w3 = 1.0 / (1.0 + std::exp(slope));
  const double want = w3 * (1 - w3);
  std::printf("dL/dslope_0 = %.7f (formula %.7f), dL/dV[3] = %.7f (formula %.7f)\n", slope_grad[0], want,
              dv[(3 * heads + 0) * d], w3);
  const bool ok = std::abs(slope_grad[0] - want) < 1e-6 && std::abs(dv[(3 * heads + 0) * d] - w3) < 1e-6 &&
                  slope_grad[1] == 0.0;
  return ok ? 0 : 1;
}
