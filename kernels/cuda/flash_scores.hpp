#pragma once
// The score biases the CUDA flash attention adds to a logit, as device-safe functors
// bias(head, query_position, key_position) over arrays in device memory (or host memory in the
// emulation). The same float formulas as the CPU tiles (math/bias.hpp; FoX's float64 prefix sums).
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

#include "cuda/block_program.hpp"
#include "cuda/path_scores.hpp"
#include "grape/config.hpp"
#include "grape/math/bias.hpp"
#include "grape/math/gated_path_bias.hpp"

namespace grape::cuda {

/// Each bias gives the flash loop one row at a time: row_of(head, query_position) hoists what the
/// row shares (a slope, a table column, F_h(m)), and row(key_position) is the logit's bias.
///
/// A bias with parameters also gives their gradient, without atomics (flash_backward_program.hpp):
/// logit_grad(h, m, n, g, row, col) adds a logit's g = dL/db to the row_slots() doubles of its
/// query (row, the query programs) or the col_slots() of its key (col, the key programs) — each
/// slot owned by one thread; then, one thread per head, collect_grad adds every token's slots
/// into the gradient (the CPU's parameter layout, grad_size(heads) doubles) and close_grad ends it.

/// GRAPE-AP's bias (path_scores.hpp) walks instead: row_of(head, m, state) takes its row's
/// row_state in shared memory, kept across key tiles.
template <class B, class = void>
struct walks_rows : std::false_type {};
template <class B>
struct walks_rows<B, std::void_t<decltype(B::row_start(0))>> : std::true_type {};

/// The row functor of query position m; `state` is the row's walk, used by a walking bias only.
template <class Bias>
GRAPE_HOST_DEVICE GRAPE_BLOCK_INLINE auto bias_row_of(const Bias& b, std::int64_t h, std::int64_t m,
                                                      row_state* state) {
  if constexpr (walks_rows<Bias>::value) {
    return b.row_of(h, m, state);
  } else {
    (void)state;
    return b.row_of(h, m);
  }
}

/// No bias: the flash loop skips the call.
struct no_scores {
  static constexpr bool none = true;
  struct row {
    GRAPE_HOST_DEVICE GRAPE_BLOCK_INLINE float operator()(std::int64_t) const { return 0.0f; }
  };
  GRAPE_HOST_DEVICE GRAPE_BLOCK_INLINE row row_of(std::int64_t, std::int64_t) const { return {}; }
};

/// The row of query m of a bias made of one float per head: Formula::at(value, m, n) for key n.
template <class Formula>
struct per_head_row {
  float value;
  std::int64_t m;
  GRAPE_HOST_DEVICE GRAPE_BLOCK_INLINE float operator()(std::int64_t n) const { return Formula::at(value, m, n); }
};

/// ALiBi: −slopes[h]·|m − n|.
struct alibi_scores {
  static constexpr bool none = false;
  const float* slopes = nullptr;  // [q_heads]
  struct formula {
    static GRAPE_HOST_DEVICE GRAPE_BLOCK_INLINE float at(float slope, std::int64_t m, std::int64_t n) {
      return math::alibi_bias(slope, m, n);
    }
  };
  using row = per_head_row<formula>;
  GRAPE_HOST_DEVICE GRAPE_BLOCK_INLINE row row_of(std::int64_t h, std::int64_t m) const { return {slopes[h], m}; }

  // dL/dslope_h = −Σ g·|m − n|.
  GRAPE_HOST_DEVICE int row_slots() const { return 1; }
  GRAPE_HOST_DEVICE int col_slots() const { return 0; }
  GRAPE_HOST_DEVICE std::int64_t grad_size(int heads) const { return heads; }
  GRAPE_HOST_DEVICE void logit_grad(std::int64_t, std::int64_t m, std::int64_t n, float g, double* row, double*) const {
    if (row) row[0] -= static_cast<double>(g) * static_cast<double>(m > n ? m - n : n - m);
  }
  GRAPE_HOST_DEVICE void collect_grad(std::int64_t h, std::int64_t, const double* row, const double*,
                                      double* grad) const {
    grad[h] += row[0];
  }
  GRAPE_HOST_DEVICE void close_grad(std::int64_t, double*) const {}
};

/// A linear bias coef[h]·(m − n), keys on both sides: GRAPE-A's lift on its augmented channels
/// ([q; 1; 0] by ρ_h(m), [k; 0; 1] by κ_h(n) add (m − n)·v_d·u_{d+1} to the logit), from the
/// exact int64 offset rather than two float32 lifted coordinates. Its parameters have no gradient.
struct linear_scores {
  static constexpr bool none = false;
  const float* coef = nullptr;  // [q_heads]
  struct formula {
    static GRAPE_HOST_DEVICE GRAPE_BLOCK_INLINE float at(float coef, std::int64_t m, std::int64_t n) {
      return coef * static_cast<float>(m - n);
    }
  };
  using row = per_head_row<formula>;
  GRAPE_HOST_DEVICE GRAPE_BLOCK_INLINE row row_of(std::int64_t h, std::int64_t m) const { return {coef[h], m}; }
};

/// T5's relative buckets, as a table by distance made once on the host (t5_distance_table: the
/// bucket arithmetic, a float64 log, stays off the device): by_distance[side, min(d, max_distance), h]
/// with side 1 for a key after the query (bidirectional only) and d = |n − m|.
struct t5_scores {
  static constexpr bool none = false;
  const float* by_distance = nullptr;  // [2, max_distance + 1, heads]
  int heads = 0, max_distance = 0;
  bool bidirectional = true;
  const int* buckets = nullptr;  // [2, max_distance + 1]: the bucket of each (side, distance); for the gradient
  int num_buckets = 0;
  struct row {
    const float* column;  // by_distance + h
    int heads, max_distance;
    bool bidirectional;
    std::int64_t m;
    GRAPE_HOST_DEVICE GRAPE_BLOCK_INLINE float operator()(std::int64_t n) const {
      const std::int64_t rel = n - m;
      const std::int64_t distance = rel < 0 ? -rel : (bidirectional ? rel : 0);
      // Every bucket is the last one from max_distance on.
      const int d = distance > max_distance ? max_distance : static_cast<int>(distance);
      const int side = bidirectional && rel > 0 ? 1 : 0;
      return column[(side * (max_distance + 1) + d) * heads];
    }
  };
  GRAPE_HOST_DEVICE GRAPE_BLOCK_INLINE row row_of(std::int64_t h, std::int64_t m) const {
    return {by_distance + h, heads, max_distance, bidirectional, m};
  }

  // dL/dtable[bucket, h] = Σ g over the logits in that bucket: a slot per bucket on the query side.
  GRAPE_HOST_DEVICE int row_slots() const { return num_buckets; }
  GRAPE_HOST_DEVICE int col_slots() const { return 0; }
  GRAPE_HOST_DEVICE std::int64_t grad_size(int h) const { return static_cast<std::int64_t>(num_buckets) * h; }
  GRAPE_HOST_DEVICE void logit_grad(std::int64_t, std::int64_t m, std::int64_t n, float g, double* row, double*) const {
    if (!row) return;
    const std::int64_t rel = n - m;
    const std::int64_t distance = rel < 0 ? -rel : (bidirectional ? rel : 0);
    const int d = distance > max_distance ? max_distance : static_cast<int>(distance);
    row[buckets[(bidirectional && rel > 0 ? 1 : 0) * (max_distance + 1) + d]] += g;
  }
  GRAPE_HOST_DEVICE void collect_grad(std::int64_t h, std::int64_t, const double* row, const double*,
                                      double* grad) const {
    for (int k = 0; k < num_buckets; ++k) grad[static_cast<std::int64_t>(k) * heads + h] += row[k];
  }
  GRAPE_HOST_DEVICE void close_grad(std::int64_t, double*) const {}
};

/// t5_scores' buckets: the bucket of each (side, distance), side 1 for a key after the query.
inline std::vector<int> t5_bucket_table(int num_buckets, int max_distance, bool bidirectional) {
  std::vector<int> out(static_cast<std::size_t>(2) * (max_distance + 1));
  for (int side = 0; side < 2; ++side)
    for (std::int64_t d = 0; d <= max_distance; ++d)
      out[side * (static_cast<std::size_t>(max_distance) + 1) + d] =
          math::t5_bucket(side ? d : -d, bidirectional, num_buckets, max_distance);
  return out;
}

/// t5_scores' table from T5's [num_buckets, heads] table: 2·(max_distance + 1)·heads floats.
inline std::vector<float> t5_distance_table(const float* table, int heads, int num_buckets, int max_distance,
                                            bool bidirectional) {
  std::vector<float> out(static_cast<std::size_t>(2) * (max_distance + 1) * heads);
  for (int side = 0; side < 2; ++side)
    for (std::int64_t d = 0; d <= max_distance; ++d) {
      const int b = math::t5_bucket(side ? d : -d, bidirectional, num_buckets, max_distance);
      for (int h = 0; h < heads; ++h)
        out[(side * (static_cast<std::size_t>(max_distance) + 1) + d) * heads + h] =
            table[static_cast<std::int64_t>(b) * heads + h];
    }
  return out;
}

/// FoX: F_h(m) − F_h(n), F the float64 prefix sums of the log forget gates ([heads, length + 1],
/// F_h(−1) = 0 first); a key after the query is −∞. Positions must lie in [0, length): the launch
/// checks them before the attention (a position outside sets the call's error flag); here one
/// outside gives −∞ and reads nothing.
struct fox_scores {
  static constexpr bool none = false;
  const double* prefix = nullptr;
  std::int64_t length = 0;
  struct row {
    const double* f;  // F_h, f[-1] = 0
    double f_m;
    std::int64_t m, length;
    GRAPE_HOST_DEVICE GRAPE_BLOCK_INLINE float operator()(std::int64_t n) const {
      if (n > m || m >= length || n < -1) return -INFINITY;
      return static_cast<float>(f_m - f[n]);
    }
  };
  GRAPE_HOST_DEVICE GRAPE_BLOCK_INLINE row row_of(std::int64_t h, std::int64_t m) const {
    const double* f = prefix + h * (length + 1) + 1;
    return {f, m >= 0 && m < length ? f[m] : 0.0, m, length};
  }

  // dL/dlog f_h(ℓ) = Σ over the logits (m, n), n < ℓ <= m, of g: + g at the key, − g at the query,
  // then an exclusive prefix sum along the positions.
  GRAPE_HOST_DEVICE int row_slots() const { return 1; }
  GRAPE_HOST_DEVICE int col_slots() const { return 1; }
  GRAPE_HOST_DEVICE std::int64_t grad_size(int heads) const { return heads * length; }
  GRAPE_HOST_DEVICE void logit_grad(std::int64_t, std::int64_t m, std::int64_t n, float g, double* row,
                                    double* col) const {
    if (n >= m) return;  // the diagonal's path is empty; above it the logit is masked
    if (row) row[0] -= g;
    if (col) col[0] += g;
  }
  GRAPE_HOST_DEVICE void collect_grad(std::int64_t h, std::int64_t position, const double* row, const double* col,
                                      double* grad) const {
    grad[h * length + position] += row[0] + col[0];
  }
  GRAPE_HOST_DEVICE void close_grad(std::int64_t h, double* grad) const {
    double running = 0;
    for (std::int64_t l = 0; l < length; ++l) {
      const double here = grad[h * length + l];
      grad[h * length + l] = running;
      running += here;
    }
  }
};

/// Gated GRAPE-A (the GRAPE paper's content-gated linear bias): −(m − n)·ω_h·(z_k[h, n] + z_q[h, m])
/// for n <= m (−∞ after the query), the gates the instance's float64 rates (query gates null when
/// key-gated). Positions index the gates and must lie in [0, length), checked as FoX's are.
struct gated_scores {
  static constexpr bool none = false;
  const double* omega = nullptr;       // [heads]
  const double* key_gate = nullptr;    // [heads, length]
  const double* query_gate = nullptr;  // [heads, length] or null
  std::int64_t length = 0;
  int heads = 0;  // for the gradient's layout
  struct row {
    const double* key_gate;  // this head's row
    double omega, query_rate;
    std::int64_t m, length;
    GRAPE_HOST_DEVICE GRAPE_BLOCK_INLINE float operator()(std::int64_t n) const {
      if (n > m || m >= length || n < 0) return -INFINITY;
      return static_cast<float>(math::gated_linear_value(m - n, omega, key_gate[n] + query_rate));
    }
  };
  GRAPE_HOST_DEVICE GRAPE_BLOCK_INLINE row row_of(std::int64_t h, std::int64_t m) const {
    const bool inside = m >= 0 && m < length;
    return {key_gate + h * length, omega[h], query_gate && inside ? query_gate[h * length + m] : 0.0, m, length};
  }

  // The gradient in the CPU's layout: dL/dω_h [heads], dL/dz_k [heads, length], then (query+key-
  // gated) dL/dz_q [heads, length]; each logit n < m adds g·(−(m − n)) times the other factor.
  GRAPE_HOST_DEVICE int row_slots() const { return query_gate ? 2 : 1; }
  GRAPE_HOST_DEVICE int col_slots() const { return 1; }
  GRAPE_HOST_DEVICE std::int64_t grad_size(int h) const { return h + (query_gate ? 2 : 1) * h * length; }
  GRAPE_HOST_DEVICE void logit_grad(std::int64_t h, std::int64_t m, std::int64_t n, float g, double* row,
                                    double* col) const {
    if (n >= m) return;
    const double weighted = static_cast<double>(g) * -static_cast<double>(m - n);
    if (row) {
      row[0] += weighted * (key_gate[h * length + n] + (query_gate ? query_gate[h * length + m] : 0.0));
      if (query_gate) row[1] += weighted * omega[h];
    }
    if (col) col[0] += weighted * omega[h];
  }
  GRAPE_HOST_DEVICE void collect_grad(std::int64_t h, std::int64_t position, const double* row, const double* col,
                                      double* grad) const {
    grad[h] += row[0];
    grad[heads + h * length + position] += col[0];
    if (query_gate) grad[heads + heads * length + h * length + position] += row[1];
  }
  GRAPE_HOST_DEVICE void close_grad(std::int64_t, double*) const {}
};

/// A score view (a bias of your own in device-safe form, instance_scores.hpp) as the flash loop's
/// functor: row_of(h, m) keeps the view and the row, each key position calls view(h, m, n).
template <class V>
struct view_scores {
  static constexpr bool none = false;
  V view;
  struct row {
    V view;
    std::int64_t h, m;
    GRAPE_HOST_DEVICE GRAPE_BLOCK_INLINE float operator()(std::int64_t n) const { return view(h, m, n); }
  };
  GRAPE_HOST_DEVICE GRAPE_BLOCK_INLINE row row_of(std::int64_t h, std::int64_t m) const { return {view, h, m}; }
};

}  // namespace grape::cuda
