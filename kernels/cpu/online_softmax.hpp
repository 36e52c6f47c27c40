#pragma once
// One step of the online softmax, shared by the fused forward (a query row against a key tile)
// and decode (a query head against a page).
#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <limits>

namespace grape::cpu::detail {

/// New logits of a row (contiguous, so that Eigen vectorises exp) become their exponentials
/// against the row's running maximum; the row's sum of exponentials and its accumulator row are
/// rescaled to that maximum.
template <class Logits, class AccumulatorRow>
inline void online_softmax_step(Logits&& logits, float& row_max, float& row_sum, AccumulatorRow&& acc) {
  const float new_max = std::max(row_max, logits.maxCoeff());
  // A row that has seen nothing yet (all −∞) shifts by 0: its exponentials are 0, not NaN.
  const float shift = new_max == -std::numeric_limits<float>::infinity() ? 0.0f : new_max;
  logits = (logits - shift).exp();
  const float rescale = std::exp(row_max - shift);
  row_sum = row_sum * rescale + logits.sum();
  if (rescale != 1.0f) acc *= rescale;
  row_max = new_max;
}

}  // namespace grape::cpu::detail
