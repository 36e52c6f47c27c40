#pragma once
// Host stand-ins for __half and __nv_bfloat16 in the CUDA bodies run on the CPU: Eigen's half and
// bfloat16 have the same bits and the same round-to-nearest conversions.
#include <Eigen/Core>

#include "cuda/storage.hpp"

namespace grape::cuda {
template <>
struct storage<Eigen::half> {
  static float load(Eigen::half x) { return static_cast<float>(x); }
  static Eigen::half store(float x) { return static_cast<Eigen::half>(x); }
};
template <>
struct storage<Eigen::bfloat16> {
  static float load(Eigen::bfloat16 x) { return static_cast<float>(x); }
  static Eigen::bfloat16 store(float x) { return static_cast<Eigen::bfloat16>(x); }
};
}  // namespace grape::cuda
