#pragma once
// The score of attention with no encoding, qᵀk in float64, in the form the dense reference
// (grape/check/attention_case.hpp) asks of an instance; the kernel runs cpu::no_encoding.
#include <array>
#include <cstdint>

#include "cpu/attention.hpp"

namespace grape {

struct plain {
  cpu::no_encoding enc;
  int content_dim() const { return enc.head_dim; }
  int heads() const { return 1; }
  double score(int, const double* q, const double* k, const std::array<std::int64_t, 1>&,
               const std::array<std::int64_t, 1>&) const {
    double s = 0;
    for (int c = 0; c < enc.head_dim; ++c) s += q[c] * k[c];
    return s;
  }
};

}  // namespace grape
