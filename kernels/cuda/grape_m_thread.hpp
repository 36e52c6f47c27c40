#pragma once
// The per-thread body of the CUDA GRAPE-M rotation (cpu/grape_m.hpp: a frequency row per key
// head, integer positions or real per-token phases). One block per token, in two phases:
//   fill_table: the token's cos/sin for every (row, plane) into shared memory, rows being the key
//               heads when θ or Φ has a row per key head, else one; from exact turn fractions for
//               integer positions, from Φ·θ/2π formed in float64 for phases (math::phase_of_turns)
//               — the CPU kernel's arithmetic, so the two agree to float32 rounding;
//   rotate:     each thread turns one plane of one head at a time (a query head takes its key
//               head's row) and copies pass-through channels when out of place.
// When the table would not fit in shared memory (table == false), rotate computes each plane's
// cos/sin itself. A bad position or a non-finite phase sets the error flag and leaves the token
// untouched. Plain arithmetic on plain data: tests/cuda_emulation runs it on the host.
#include <cstdint>

#include "common/rotate_addressing.hpp"
#include "cuda/storage.hpp"
#include "grape/config.hpp"
#include "grape/math/phase.hpp"
#include "grape/math/rotate.hpp"
#include "grape/math/sincos.hpp"

namespace grape::cuda {

/// What one GRAPE-M launch runs (device pointers), planned by plan_grape_m_launch (grape_m_call.hpp).
struct grape_m_call {
  kernel::rotate_plan p;
  std::int64_t group = 0;                    // query heads per key head
  int planes = 0;
  int freq_rows = 1, phase_rows = 1;         // 1 or the key heads
  int table_rows = 1;                        // rows of the cos/sin table: 1 or the key heads
  bool table = true;                         // the table in shared memory, else per unit
  const math::phase_t* fractions = nullptr;  // [freq_rows, planes] θ as turn fractions (positions)
  const double* turns = nullptr;             // [freq_rows, planes] θ/2π (phases)
  const double* phases = nullptr;            // [phase_rows, total_tokens] Φ, or null
  const double* phase_origin = nullptr;      // [phase_rows, total_tokens], or null (dL/dθ's origin)
  float sin_sign = 1.0f;                     // angle_sign, negated for the backward
  std::int64_t max_position = 0;             // integer positions must lie in [0, max_position)
  int* error_flag = nullptr;

  GRAPE_HOST_DEVICE std::int64_t units_per_head() const {
    return planes + (p.q.in != p.q.out || p.k.in != p.k.out ? p.head_dim - 2 * planes : 0);
  }
  GRAPE_HOST_DEVICE std::int64_t table_floats() const { return table ? 2 * static_cast<std::int64_t>(table_rows) * planes : 0; }
};

template <class T, math::layout_kind Layout>
struct grape_m_token_thread {
  grape_m_call c;

  GRAPE_HOST_DEVICE bool token_ok(std::int64_t token, kernel::token_place place) const {
    if (c.phases == nullptr) {
      const std::int64_t m = kernel::position_of(c.p, token, place, 0);
      return m >= 0 && m < c.max_position;
    }
    for (int r = 0; r < c.phase_rows; ++r) {
      const double phi = c.phases[r * c.p.total_tokens + token];
      if (!(phi - phi == 0.0)) return false;  // NaN or ±∞
    }
    return true;
  }

  /// cos and ±sin of plane j of row `row` (a key head, or 0) at this token.
  GRAPE_HOST_DEVICE math::sin_cos plane_sincos(std::int64_t token, kernel::token_place place, std::int64_t row,
                                               int j) const {
    const std::int64_t fr = c.freq_rows == 1 ? 0 : row;
    math::phase_t phase;
    if (c.phases == nullptr) {
      phase = math::phase_at(kernel::position_of(c.p, token, place, 0), c.fractions[fr * c.planes + j]);
    } else {
      const double phi = c.phases[(c.phase_rows == 1 ? 0 : row) * c.p.total_tokens + token];
      phase = math::phase_of_turns(phi * c.turns[fr * c.planes + j]);
    }
    const math::sin_cos sc = math::sincos_of_phase(phase);
    return {c.sin_sign * sc.sin, sc.cos};
  }

  /// Phase 1: table[r·2P + j] = cos, table[r·2P + P + j] = ±sin.
  GRAPE_HOST_DEVICE void fill_table(std::int64_t token, int tid, int nthreads, float* table) const {
    const auto place = kernel::locate_token(c.p, token);
    if (!token_ok(token, place)) {
      if (tid == 0) *c.error_flag = 1;
      return;
    }
    if (!c.table) return;
    const std::int64_t entries = static_cast<std::int64_t>(c.table_rows) * c.planes;
    for (std::int64_t e = tid; e < entries; e += nthreads) {
      const std::int64_t r = e / c.planes;
      const int j = static_cast<int>(e % c.planes);
      const math::sin_cos sc = plane_sincos(token, place, r, j);
      table[r * 2 * c.planes + j] = sc.cos;
      table[r * 2 * c.planes + c.planes + j] = sc.sin;
    }
  }

  /// Phase 2: every (head, plane) and pass-through channel of the token.
  GRAPE_HOST_DEVICE void rotate(std::int64_t token, int tid, int nthreads, const float* table) const {
    const auto place = kernel::locate_token(c.p, token);
    if (!token_ok(token, place)) return;  // reported by fill_table
    const std::int64_t per_head = c.units_per_head();
    const std::int64_t total = (c.p.q.heads + c.p.k.heads) * per_head;
    const int rd = 2 * c.planes;
    for (std::int64_t u = tid; u < total; u += nthreads) {
      const std::int64_t head_all = u / per_head, j = u % per_head;
      const bool is_q = head_all < c.p.q.heads;
      const kernel::qk_operand& t = is_q ? c.p.q : c.p.k;
      const std::int64_t h = is_q ? head_all : head_all - c.p.q.heads;
      const std::int64_t base = kernel::token_offset(t, c.p, token, place) + h * t.head_stride;
      const T* in = static_cast<const T*>(t.in) + base;
      T* out = static_cast<T*>(t.out) + base;
      if (j >= c.planes) {  // pass-through channel, out of place only
        if (t.in != t.out) out[rd + (j - c.planes)] = in[rd + (j - c.planes)];
        continue;
      }
      const int plane = static_cast<int>(j);
      const std::int64_t kv = is_q ? h / c.group : h;
      const std::int64_t row = c.table_rows == 1 ? 0 : kv;
      math::sin_cos sc;
      if (c.table) sc = {table[row * 2 * c.planes + c.planes + plane], table[row * 2 * c.planes + plane]};
      else sc = plane_sincos(token, place, kv, plane);
      const int c0 = math::first_channel(Layout, plane, rd), c1 = math::second_channel(Layout, plane, rd);
      const math::pair2<float> y = math::rotate_pair(storage<T>::load(in[c0]), storage<T>::load(in[c1]), sc.sin, sc.cos);
      out[c0] = storage<T>::store(y.first);
      out[c1] = storage<T>::store(y.second);
    }
  }
};

}  // namespace grape::cuda
