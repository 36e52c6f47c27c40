// Fused attention with ALiBi inside, on two packed sequences (docs/attention.md): the encoding is
// the instance, the tokens are rotate_qk's arguments. Checks one output row against the formula.
#include <cmath>
#include <cstdio>
#include <vector>

#include "cpu/attention.hpp"
#include "grape/builtins.hpp"

int main() {
  using namespace grape;
  const int heads = 4, d = 8;
  const std::vector<std::int64_t> cu_seqlens = {0, 3, 8};  // two sequences: 3 and 5 tokens
  const std::int64_t tokens = cu_seqlens.back(), size = tokens * heads * d;
  std::vector<float> q(size, 0.0f), k(size, 0.0f), v(size), out(size);
  for (std::int64_t i = 0; i < size; ++i) v[i] = static_cast<float>(i / (heads * d));  // V = token index

  cpu::attention_args a;
  a.qk.q = {q.data(), nullptr, heads, size, 0, heads * d, d};
  a.qk.k = {k.data(), nullptr, heads, size, 0, heads * d, d};
  a.v = {v.data(), nullptr, heads, size, 0, heads * d, d};
  a.qk.batch = 2;
  a.qk.cu_seqlens = cu_seqlens.data();
  a.out = out.data();
  a.causal = true;
  cpu::attention(alibi::make({heads, d, 8.0, {}}), a);

  // Q = K = 0: the weights are ALiBi's alone. Token 4 is the second token of sequence 1 (keys 3, 4).
  const double slope = std::exp2(-8.0 / heads);  // head 0
  const double w3 = std::exp(-slope), want = (w3 * 3 + 4) / (w3 + 1);
  const double got = out[(4 * heads + 0) * d];
  std::printf("head 0, token 4: %.6f (formula %.6f)\n", got, want);
  return std::abs(got - want) < 1e-5 ? 0 : 1;
}
