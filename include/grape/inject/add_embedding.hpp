#pragma once
// add_embedding<T>: an absolute encoding added to the input, x_m + PE(m). The logit of two
// tokens is (q + PE(m))ᵀ(k + PE(n)) with identity projections: its cross terms depend on the
// absolute positions, which the checker reports as a counterexample to the score law.
// T provides dim() and embed(c, double* out).
#include <array>
#include <cstdint>
#include <vector>

#include "grape/inject/concepts.hpp"

namespace grape {

template <class T>
struct embedding_instance {
  T table;

  int content_dim() const { return table.dim(); }
  int heads() const { return 1; }
  /// Tables that are ρ(m)·e for a representation ρ (sinusoidal) expose it for the rep laws.
  const auto& representation(int) const requires requires(const T& t) { t.representation(); } {
    return table.representation();
  }

  template <std::size_t N>
  double score(int, const double* q, const double* k, const std::array<std::int64_t, N>& m,
               const std::array<std::int64_t, N>& n) const {
    const int d = table.dim();
    std::vector<double> pm(d), pn(d);
    table.embed(m, pm.data());
    table.embed(n, pn.data());
    double s = 0;
    for (int i = 0; i < d; ++i) s += (q[i] + pm[i]) * (k[i] + pn[i]);
    return s;
  }
};

template <class T>
struct add_embedding {
  static constexpr std::string_view description = "add to the input embedding";
  template <class R>
  using instance = embedding_instance<T>;
  using table_type = T;
};

}  // namespace grape
