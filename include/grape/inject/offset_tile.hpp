#pragma once
// Whole tiles of a score bias, for the fused attention (cpu::attention and its backward), which
// otherwise asks for the bias one logit at a time. A bias B may provide
//   b.add_tile(h, m, rows, n, cols, S, ld):  S[r·ld + c] += b_h(m[r], n[c])  (float32)
// for query positions m[0..rows) and key positions n[0..cols) (TileBias). add_offset_tile is the
// tile of a bias that depends on the offset n − m only (ALiBi, T5 buckets): where both position
// runs are consecutive — positions that are token indices or per-sequence offsets, the usual case —
// the tile is a Toeplitz matrix and the bias is evaluated once per distinct offset (rows + cols − 1
// values, not rows·cols), then added row by row (a vectorised add); with explicit position ids,
// once per logit. Either way each logit gets exactly the float the per-logit bias gives. Such a
// bias may also give the Toeplitz tile's distinct values themselves (OffsetTileBias):
//   b.offset_values(h, m, rows, n, cols, values) -> bool
// so that the fused attention's bf16 products add them as they store the scores (no pass of its
// own over the tile); false where the positions are not consecutive.
#include <concepts>
#include <cstdint>
#include <type_traits>
#include <vector>

namespace grape {

template <class M>
struct member_owner {};
template <class R, class C, class... A>
struct member_owner<R (C::*)(A...) const> {
  using type = C;
};

/// A bias whose add_tile is declared by the class that declares its bias(): a type derived from
/// ALiBi that redefines bias() (a variant, or a test's mutant) must not get its parent's tile, so
/// it takes the per-logit path.
template <class B>
concept TileBias = requires(const B& b, const std::int64_t* p, float* S) {
  b.add_tile(0, p, std::int64_t{1}, p, std::int64_t{1}, S, std::int64_t{1});
  requires std::is_same_v<typename member_owner<decltype(&B::add_tile)>::type,
                          typename member_owner<decltype(&B::bias)>::type>;
};

/// A bias that gives its Toeplitz tiles' distinct values (offset_tile_values), declared, like
/// TileBias's add_tile, by the class that declares its bias().
template <class B>
concept OffsetTileBias = requires(const B& b, const std::int64_t* p, float* values) {
  { b.offset_values(0, p, std::int64_t{1}, p, std::int64_t{1}, values) } -> std::same_as<bool>;
  requires std::is_same_v<typename member_owner<decltype(&B::offset_values)>::type,
                          typename member_owner<decltype(&B::bias)>::type>;
};

/// Whether p[0..count) are p[0], p[0] + 1, ….
inline bool consecutive_positions(const std::int64_t* p, std::int64_t count) {
  for (std::int64_t i = 1; i < count; ++i)
    if (p[i] != p[0] + i) return false;
  return true;
}

/// The tile's rows + cols − 1 distinct values where both position runs are consecutive (rows,
/// cols ≥ 1): values[k] = f(n[0] − m[0] − (rows − 1) + k), so logit (r, c), of offset
/// n[c] − m[r], reads values[rows − 1 − r + c]. False, and `values` untouched, otherwise.
template <class F>
bool offset_tile_values(const std::int64_t* m, std::int64_t rows, const std::int64_t* n, std::int64_t cols,
                        float* values, const F& f) {
  if (!consecutive_positions(m, rows) || !consecutive_positions(n, cols)) return false;
  const std::int64_t first = n[0] - m[0] - (rows - 1);
  for (std::int64_t k = 0; k < rows + cols - 1; ++k) values[k] = f(first + k);
  return true;
}

/// S[r·ld + c] += toeplitz[c − r] for r < rows, c < cols: a Toeplitz tile added from its values
/// (toeplitz = offset_tile_values' values + rows − 1), a shifted run per row (a vectorised add).
inline void add_toeplitz_tile(float* S, std::int64_t ld, std::int64_t rows, std::int64_t cols, const float* toeplitz) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* v = toeplitz - r;
    float* row = S + r * ld;
    for (std::int64_t c = 0; c < cols; ++c) row[c] += v[c];
  }
}

/// S[r·ld + c] += f(n[c] − m[r]) for r < rows, c < cols; f(offset) returns the bias as float.
template <class F>
void add_offset_tile(const std::int64_t* m, std::int64_t rows, const std::int64_t* n, std::int64_t cols, float* S,
                     std::int64_t ld, const F& f) {
  if (rows <= 0 || cols <= 0) return;
  std::vector<float> values(static_cast<std::size_t>(rows + cols - 1));
  if (offset_tile_values(m, rows, n, cols, values.data(), f))
    return add_toeplitz_tile(S, ld, rows, cols, values.data() + (rows - 1));
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) S[r * ld + c] += f(n[c] - m[r]);
}

}  // namespace grape
