#pragma once
// Injection: where an encoding enters attention.
//
// Minimal definition (a tag type I):
//   static constexpr std::string_view description;   what it does, for `grape list`
//   template <class R> using instance = ...;         the run-time object for representation R
// An instance gives the checker the attention logit of one (query, key) pair:
//   int content_dim() const;  int heads() const;
//   double score(int head, const double* q, const double* k, c_m, c_n) const;
// and, where a representation is involved, representation(head).
// Models: rotate_qk<layout> (rotate Q and K), lift_qk (augmented unipotent lift), score_bias<B>
// (b(m, n) added to the logit), add_embedding<T> (added to the input), compose<A, B>,
// rotate_by_phase (per-token real phases). The set is
// open: a new injection is a new tag type; the checker reads what a law needs from the instance
// (an embedding table, a content-dependent bias_type), never from a list of kinds.
#include <concepts>
#include <string_view>

namespace grape {

template <class I>
concept Injection = requires {
  { I::description } -> std::convertible_to<std::string_view>;
};

namespace detail {
inline double dot(const double* a, const double* b, int n) {
  double s = 0;
  for (int i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}
}  // namespace detail

}  // namespace grape
