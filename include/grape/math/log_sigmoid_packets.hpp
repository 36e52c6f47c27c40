#pragma once
// log σ(z) over an array of float64 arguments on Eigen's packets (host only): the CPU path sums
// of GRAPE-AP evaluate one per key, and libm's scalar log1p and exp would take a large share of
// its fused forward's time (docs/performance.md, appendix "Fused attention"). Eigen vectorises exp
// and log for double but not log1p, so log1p(e) is taken as log(u)·e/(u − 1), u = 1 + e
// (Goldberg's form, accurate to a few ulps; where u rounds to 1, log1p(e) = e).
#include <Eigen/Core>

namespace grape::math {

/// z ← slope·log σ(z) = slope·(min(z, 0) − log1p(e^−|z|)), element by element.
inline void log_sigmoid_in_place(Eigen::Ref<Eigen::ArrayXd> z, double slope) {
  const Eigen::ArrayXd e = (-z.abs()).exp();
  const Eigen::ArrayXd u = 1.0 + e;
  const Eigen::ArrayXd log1p_e = (u == 1.0).select(e, u.log() * e / (u - 1.0));
  z = slope * (z.min(0.0) - log1p_e);
}

}  // namespace grape::math
