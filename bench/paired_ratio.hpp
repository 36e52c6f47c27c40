#pragma once
// Statistics of paired measurements: each iteration times the baseline and the kernel back to
// back and keeps baseline / kernel; a case's figure is the median of those ratios, with the
// quartiles as its spread.
#include <algorithm>
#include <cstddef>
#include <vector>

namespace grape_bench {

/// The q-quantile (0 <= q <= 1) of `values`, linearly interpolated between order statistics
/// (the default of R and NumPy); 0 for an empty set.
inline double quantile(std::vector<double> values, double q) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const double at = q * static_cast<double>(values.size() - 1);
  const auto below = static_cast<std::size_t>(at);
  const std::size_t above = std::min(below + 1, values.size() - 1);
  return values[below] + (at - static_cast<double>(below)) * (values[above] - values[below]);
}

/// What one case accumulates over all its rounds.
struct case_result {
  std::vector<double> paired;  // baseline / kernel of each iteration, measured back to back
  double best_kernel = 1e30, best_baseline = 1e30;     // seconds
  std::vector<double> paired_streaming;  // out of place: streaming copy / kernel, same iteration
  double best_textbook = 1e30;           // seconds, where measured
  double best_unfused = 1e30;            // fused cases: the same work in separate passes
  double ratio() const { return quantile(paired, 0.5); }
  double lower_quartile() const { return quantile(paired, 0.25); }
  double upper_quartile() const { return quantile(paired, 0.75); }
};

}  // namespace grape_bench
