// Embedding-add kernels: per-row bodies plus validation and launch.
#include "cpu/embedding.hpp"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "cpu/launch.hpp"
#include "cpu/rotate_qk_plan.hpp"
#include "grape/detail/error.hpp"
#include "grape/math/phase.hpp"
#include "grape/math/sincos.hpp"
#include "grape/schedule/rotary_spec.hpp"

namespace grape::cpu {
namespace detail {

struct sinusoidal_row {
  embedding_rows r;
  const math::phase_t* fractions;  // dim / 2 turn fractions of ω_i
  void operator()(std::int64_t t, float*) const {
    float* x = r.x + t * r.row_stride;
    const std::int64_t m = r.positions[t];
    for (int i = 0; i < r.dim / 2; ++i) {
      const math::sin_cos sc = math::sincos_of_phase(math::phase_at(m, fractions[i]));
      x[2 * i] += sc.sin;
      x[2 * i + 1] += sc.cos;
    }
  }
};

struct learned_row {
  embedding_rows r;
  const float* table;
  void operator()(std::int64_t t, float*) const {
    float* x = r.x + t * r.row_stride;
    const float* e = table + r.positions[t] * r.dim;
#pragma omp simd
    for (int c = 0; c < r.dim; ++c) x[c] += e[c];
  }
};

}  // namespace detail

namespace {

void check_rows(const embedding_rows& r, std::int64_t limit) {
  if (r.tokens < 0) throw input_error("tokens is negative");
  if (r.dim <= 0) throw input_error("dim must be positive");
  if (r.threads < 0) throw input_error("threads is negative");
  if (r.tokens == 0) return;
  if (r.x == nullptr) throw input_error("x is null");
  if (r.positions == nullptr) throw input_error("positions is null");
  if (r.row_stride < r.dim && r.tokens > 1)
    throw input_error("row_stride is smaller than dim (rows would overlap)");
  for (std::int64_t t = 0; t < r.tokens; ++t)
    if (r.positions[t] < 0 || r.positions[t] >= limit)
      throw input_error("positions[" + std::to_string(t) + "] = " + std::to_string(r.positions[t]) +
                        " is outside [0, " + std::to_string(limit) + ")");
}

}  // namespace

void add_sinusoidal(const embedding_rows& rows, double base) {
  check_rows(rows, std::numeric_limits<std::int64_t>::max());
  if (rows.dim % 2 != 0) throw input_error("dim must be even for sinusoidal embeddings");
  if (!(base > 1.0) || !std::isfinite(base)) throw input_error("base must be a finite value > 1");
  // The sinusoid's θ_i are RoPE's, as exact turn fractions.
  const std::vector<math::phase_t> f = detail::turn_fractions_of(rope_inv_freq(rows.dim, base));
  add_sinusoidal_turns(rows, f.data());
}

void add_sinusoidal_turns(const embedding_rows& rows, const std::uint64_t* turn_fractions) {
  check_rows(rows, std::numeric_limits<std::int64_t>::max());
  if (rows.dim % 2 != 0) throw input_error("dim must be even for sinusoidal embeddings");
  if (turn_fractions == nullptr) throw input_error("turn_fractions is null");
  detail::launch_items(rows.tokens, 0, rows.threads, detail::sinusoidal_row{rows, turn_fractions});
}

void add_learned(const embedding_rows& rows, const float* table, std::int64_t table_rows) {
  if (table_rows <= 0) throw input_error("table_rows must be positive");
  if (table == nullptr) throw input_error("table is null");
  check_rows(rows, table_rows);
  detail::launch_items(rows.tokens, 0, rows.threads, detail::learned_row{rows, table});
}

}  // namespace grape::cpu
