#pragma once
// Widening loads and narrowing stores of a run of channels between the storage type and float32
// (round to nearest even), through Eigen's half/bfloat16 casts, which vectorize (F16C, AVX-512
// BF16) where a per-element static_cast does not.
#include <Eigen/Core>
#include <type_traits>

namespace grape::cpu::detail {

template <class Storage, int N>
inline void widen(const Storage* in, float* out) {
  if constexpr (std::is_same_v<Storage, float>) {
    for (int i = 0; i < N; ++i) out[i] = in[i];
  } else {
    Eigen::Map<Eigen::Array<float, N, 1>> to(out);
    to = Eigen::Map<const Eigen::Array<Storage, N, 1>>(in).template cast<float>();
  }
}

template <class Storage, int N>
inline void narrow(const float* in, Storage* out) {
  if constexpr (std::is_same_v<Storage, float>) {
    for (int i = 0; i < N; ++i) out[i] = in[i];
  } else {
    Eigen::Map<Eigen::Array<Storage, N, 1>> to(out);
    to = Eigen::Map<const Eigen::Array<float, N, 1>>(in).template cast<Storage>();
  }
}

}  // namespace grape::cpu::detail
