#pragma once
// Injection: where an encoding enters attention.
//
// Minimal definition (a tag type I):
//   static constexpr injection_kind kind;
//   template <class R> using instance = ...;   the run-time object for representation R
// An instance gives the checker the attention logit of one (query, key) pair:
//   int content_dim() const;  int heads() const;
//   double score(int head, const double* q, const double* k, c_m, c_n) const;
// and, where a representation is involved, representation(head).
// Models: rotate_qk<layout> (rotate Q and K), lift_qk (augmented unipotent lift), score_bias<B>
// (b(m, n) added to the logit), add_embedding<T> (added to the input), compose<A, B>.
#include <concepts>
#include <string_view>

namespace grape {

enum class injection_kind { rotate_qk, lift_qk, score_bias, add_embedding, composed };

inline std::string_view to_string(injection_kind k) {
  switch (k) {
    case injection_kind::rotate_qk: return "rotate Q and K";
    case injection_kind::lift_qk: return "lift Q and K (augmented, keys paired by inverse transpose)";
    case injection_kind::score_bias: return "add a score bias";
    case injection_kind::add_embedding: return "add to the input embedding";
    case injection_kind::composed: return "rotate Q and K, then add a score bias";
  }
  return "?";
}

template <class I>
concept Injection = requires {
  { I::kind } -> std::convertible_to<injection_kind>;
};

namespace detail {
inline double dot(const double* a, const double* b, int n) {
  double s = 0;
  for (int i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}
}  // namespace detail

}  // namespace grape
