#pragma once
// The view of skew_generators<N> (learned bases, LieRE): ρ(c) = Π_k exp(c_k·L_k), each L_k held
// as B_k·(Σ θ_j J_j)·B_kᵀ, so one axis costs t = B_kᵀv, exact-phase plane rotations of t, v = B_k t.
// Both products are written as sums of columns (B and Bᵀ are both stored, column-major), so the
// inner loops are contiguous multiply-adds that vectorize. The state of a token is cos and sin
// of every block on every axis.
#include <cstdint>

#include "grape/config.hpp"
#include "grape/math/phase.hpp"
#include "grape/math/rotate.hpp"
#include "grape/math/sincos.hpp"

namespace grape {

/// One axis: an orthogonal basis and the planes (first[j], first[j] + 1) of it that turn.
struct skew_axis_view {
  const float* basis = nullptr;          // B, [dim × dim] column-major (B(r, c) at c·dim + r)
  const float* basis_t = nullptr;        // Bᵀ, column-major (B(r, c) at r·dim + c)
  const int* first = nullptr;            // [blocks]
  const math::phase_t* turns = nullptr;  // [blocks] turn fraction per unit of the axis
  int blocks = 0;
};

template <int N>
struct skew_view {
  static constexpr int rank = N;
  skew_axis_view axes[N];
  int size = 0;

  GRAPE_HOST_DEVICE int dim() const { return size; }
  GRAPE_HOST_DEVICE int state_floats() const { return N * size; }
  GRAPE_HOST_DEVICE int scratch_floats() const { return size; }

  /// Axis k's cos of block j at state[k·dim + j], its sin at state[k·dim + blocks + j].
  GRAPE_HOST_DEVICE void prepare(const std::int64_t* c, bool, float* state) const {
    for (int k = 0; k < N; ++k) {
      float* table = state + k * size;
      for (int j = 0; j < axes[k].blocks; ++j) {
        const math::sin_cos sc = math::sincos_of_phase(math::phase_at(c[k], axes[k].turns[j]));
        table[j] = sc.cos;
        table[axes[k].blocks + j] = sc.sin;
      }
    }
  }

  /// y = exp(c_0 L_0)…exp(c_{N−1} L_{N−1}) x; orthogonal, so keys turn like queries.
  GRAPE_HOST_DEVICE void apply(const float* state, bool, const float* x, float* y, float* t) const {
    for (int i = 0; i < size; ++i) y[i] = x[i];
    for (int k = N - 1; k >= 0; --k) {
      const skew_axis_view& a = axes[k];
      const float* table = state + k * size;
      for (int i = 0; i < size; ++i) t[i] = 0.0f;
      for (int r = 0; r < size; ++r) {  // t = Bᵀ y: row r of B, times y[r]
        const float yr = y[r];
        const float* row = a.basis_t + r * size;
        for (int i = 0; i < size; ++i) t[i] += row[i] * yr;
      }
      for (int j = 0; j < a.blocks; ++j) {
        const int f = a.first[j];
        const math::pair2<float> r = math::rotate_pair(t[f], t[f + 1], table[a.blocks + j], table[j]);
        t[f] = r.first;
        t[f + 1] = r.second;
      }
      for (int i = 0; i < size; ++i) y[i] = 0.0f;
      for (int col = 0; col < size; ++col) {  // y = B t: column col of B, times t[col]
        const float tc = t[col];
        const float* column = a.basis + col * size;
        for (int i = 0; i < size; ++i) y[i] += column[i] * tc;
      }
    }
  }
  /// Every array the view points into, for copying it to other memory (cuda::device_view).
  template <class Move>
  void relocate(Move&& move) {
    for (skew_axis_view& a : axes) {
      move(a.basis, size * size);
      move(a.basis_t, size * size);
      move(a.first, a.blocks);
      move(a.turns, a.blocks);
    }
  }
};

}  // namespace grape
