#pragma once
// rotation_planes<N>: block-diagonal SO(2); plane i (coordinates 2i, 2i+1) turns by ⟨ω_i, c⟩ for
// a position with coordinates c ∈ Z^N. N = 1 is RoPE with any frequency schedule; N > 1 covers
// M-RoPE sections, axial 2-D RoPE and RoPE-Mixed (a full frequency vector per plane).
// Each ω_ik is held as an exact turn fraction (math/phase.hpp), so the phase of every plane is an
// exact integer sum and the angle error does not grow with the position.
#include <Eigen/Core>
#include <array>
#include <cmath>
#include <cstdint>
#include <vector>

#include "grape/math/phase.hpp"
#include "grape/math/rotate.hpp"
#include "grape/math/sincos.hpp"
#include "grape/rep/concepts.hpp"
#include "grape/schedule/rotary_spec.hpp"  // rope_inv_freq
#include "grape/view/concepts.hpp"
#include "grape/view/planes.hpp"

namespace grape {

template <int N>
class rotation_planes {
 public:
  static constexpr int rank = N;
  static constexpr key_pairing pairing = key_pairing::same;
  using frequency = std::array<double, N>;  // radians per unit of each axis

  rotation_planes() = default;
  explicit rotation_planes(std::vector<frequency> omega) : omega_(std::move(omega)) {
    turns_.reserve(omega_.size() * N);
    for (const auto& w : omega_)
      for (int k = 0; k < N; ++k) turns_.push_back(math::turn_fraction_of(w[k]));
  }
  /// One axis: plane i turns by inv_freq[i] per position.
  static rotation_planes from_inv_freq(const std::vector<double>& inv_freq) requires(N == 1) {
    std::vector<frequency> omega;
    for (double f : inv_freq) omega.push_back({f});
    return rotation_planes(std::move(omega));
  }
  /// Sections (M-RoPE, axial): plane i follows axis plane_axis[i] with frequency inv_freq[i].
  static rotation_planes from_sections(const std::vector<double>& inv_freq,
                                       const std::vector<int>& plane_axis) {
    std::vector<frequency> omega(inv_freq.size(), frequency{});
    for (std::size_t i = 0; i < inv_freq.size(); ++i) omega[i][plane_axis[i]] = inv_freq[i];
    return rotation_planes(std::move(omega));
  }

  int dim() const { return 2 * static_cast<int>(omega_.size()); }
  int planes() const { return static_cast<int>(omega_.size()); }
  const std::vector<frequency>& frequencies() const { return omega_; }

  /// The device-safe view the kernels take (valid while this object lives).
  planes_view<N> view() const { return {turns_.data(), planes()}; }

  /// Exact phase of plane i at coordinates c (a fraction of a turn, scaled by 2^64).
  math::phase_t phase(int plane, const std::array<std::int64_t, N>& c) const {
    return view().phase(plane, c.data());
  }

  void apply(const std::array<std::int64_t, N>& c, const double* x, double* y) const {
    for (int i = 0; i < planes(); ++i) {
      const double a = math::phase_to_radians(phase(i, c));
      const auto r = math::rotate_pair<double>(x[2 * i], x[2 * i + 1], std::sin(a), std::cos(a));
      y[2 * i] = r.first;
      y[2 * i + 1] = r.second;
    }
  }
  /// The kernels' element path.
  void apply(const std::array<std::int64_t, N>& c, const float* x, float* y) const {
    apply_view(view(), c.data(), false, x, y);
  }
  template <class T>
  void apply_key(const std::array<std::int64_t, N>& c, const T* x, T* y) const {
    apply(c, x, y);
  }

  Eigen::MatrixXd generator(int axis) const {
    Eigen::MatrixXd L = Eigen::MatrixXd::Zero(dim(), dim());
    for (int i = 0; i < planes(); ++i) {
      L(2 * i + 1, 2 * i) = omega_[i][axis];
      L(2 * i, 2 * i + 1) = -omega_[i][axis];
    }
    return L;
  }

 private:
  std::vector<frequency> omega_;
  std::vector<math::phase_t> turns_;  // [planes][N], flat: the view's layout
};

}  // namespace grape
