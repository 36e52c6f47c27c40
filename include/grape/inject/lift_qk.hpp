#pragma once
// lift_qk: additive GRAPE. q and k are augmented, q̂ = [q; 1; 0] and k̂ = [k; 0; 1], then lifted
// by a per-head unipotent representation, keys by its inverse transpose (rep/unipotent_lift.hpp).
#include <array>
#include <cstdint>
#include <vector>

#include "grape/inject/concepts.hpp"
#include "grape/rep/concepts.hpp"

namespace grape {

template <class R>
struct lift_instance {
  std::vector<R> reps;  // one per head
  int head_dim = 0;

  int content_dim() const { return head_dim; }
  int heads() const { return static_cast<int>(reps.size()); }
  const R& representation(int h) const { return reps[h]; }

  double score(int h, const double* q, const double* k, const std::array<std::int64_t, 1>& m,
               const std::array<std::int64_t, 1>& n) const {
    std::vector<double> qa(head_dim + 2, 0.0), ka(head_dim + 2, 0.0), qe(head_dim + 2), ke(head_dim + 2);
    for (int i = 0; i < head_dim; ++i) {
      qa[i] = q[i];
      ka[i] = k[i];
    }
    qa[head_dim] = 1.0;
    ka[head_dim + 1] = 1.0;
    reps[h].apply(m, qa.data(), qe.data());
    reps[h].apply_key(n, ka.data(), ke.data());
    return detail::dot(qe.data(), ke.data(), head_dim + 2);
  }
};

struct lift_qk {
  static constexpr std::string_view description = "lift Q and K (augmented, keys paired by inverse transpose)";
  template <class R>
  using instance = lift_instance<R>;
};

}  // namespace grape
