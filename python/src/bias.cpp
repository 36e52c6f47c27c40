// Score-bias tiles (ALiBi, T5 buckets, FoX, GRAPE-A's gated bias, GRAPE-AP's path integral), the ALiBi slope and
// GRAPE-AP projection gradients and the sinusoidal embedding, on arrays. The tiles are new float32 NumPy arrays [heads, q_len, k_len].
#include <fmt/format.h>
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/vector.h>

#include <cmath>
#include <vector>

#include "arrays.hpp"
#include "bias_tile_array.hpp"
#include "content_encodings.hpp"
#include "cpu/embedding.hpp"
#include "cpu/encode_bias_gated_path.hpp"
#include "cpu/gated_linear_grad.hpp"
#include "cpu/path_integral_grad.hpp"
#include "cpu/score_bias.hpp"
#include "grape/detail/error.hpp"

namespace grape::python {

namespace nb = nanobind;
using namespace nb::literals;

new_tile make_tile(std::int64_t heads, std::int64_t q_start, std::int64_t q_len, std::int64_t k_start,
                   std::int64_t k_len, int threads) {
  if (heads < 1 || q_len < 0 || k_len < 0)
    throw input_error(fmt::format("tile: heads must be >= 1 and lengths >= 0 (got heads={} q_len={} k_len={})", heads,
                                  q_len, k_len));
  auto* data = new std::vector<float>(static_cast<std::size_t>(heads * q_len * k_len));
  nb::capsule owner(data, [](void* p) noexcept { delete static_cast<std::vector<float>*>(p); });
  tile_array a(data->data(), {static_cast<std::size_t>(heads), static_cast<std::size_t>(q_len),
                              static_cast<std::size_t>(k_len)},
               owner);
  return {a, cpu::bias_tile{data->data(), heads, q_start, q_len, k_start, k_len, threads}};
}

cpu::embedding_rows embedding_rows_of(const array& x, const array& positions, int threads) {
  if (x.ndim() != 2 || x.dtype() != nb::dtype<float>()) throw input_error("x: must be float32 [tokens, dim]");
  if (x.shape(1) > 1 && x.stride(1) != 1) throw input_error("x: channels must be contiguous");
  const std::int64_t tokens = static_cast<std::int64_t>(x.shape(0));
  return {static_cast<float*>(x.data()), tokens, static_cast<int>(x.shape(1)), x.stride(0),
          int64_values(positions, tokens, "positions"), threads};
}

path_integral_bias path_integral_of(const array& projections, double norm_eps) {
  if (projections.ndim() != 3) throw input_error("projections: shape must be [heads, seq_len, p_dim]");
  const auto heads = static_cast<std::int64_t>(projections.shape(0));
  const auto seq = static_cast<std::int64_t>(projections.shape(1));
  const auto p_dim = static_cast<std::int64_t>(projections.shape(2));
  if (heads < 1 || seq < 1) throw input_error("projections: heads and seq_len must be >= 1");
  return detail::make_path_integral_bias(static_cast<int>(heads), static_cast<int>(p_dim), norm_eps,
                                         finite_doubles(projections, heads * seq * p_dim, "projections"));
}

gated_linear_bias gated_bias_of(const array& omega, const array& key_gate, const std::optional<array>& query_gate) {
  if (omega.ndim() != 1) throw input_error("omega: shape must be [heads]");
  if (key_gate.ndim() != 2) throw input_error("key_gate: shape must be [heads, seq_len]");
  const std::int64_t heads = static_cast<std::int64_t>(omega.shape(0));
  const std::int64_t seq = static_cast<std::int64_t>(key_gate.shape(1));
  if (heads < 1 || static_cast<std::int64_t>(key_gate.shape(0)) != heads)
    throw input_error(fmt::format("key_gate: must have omega's {} heads (got {})", heads, key_gate.shape(0)));
  if (query_gate && (query_gate->ndim() != 2 || static_cast<std::int64_t>(query_gate->shape(0)) != heads ||
                     static_cast<std::int64_t>(query_gate->shape(1)) != seq))
    throw input_error("query_gate: shape must be key_gate's [heads, seq_len]");
  return {static_cast<int>(heads), seq, finite_doubles(omega, heads, "omega"),
          finite_doubles(key_gate, heads * seq, "key_gate"),
          query_gate ? finite_doubles(*query_gate, heads * seq, "query_gate") : std::vector<double>{}};
}

/// A whole-sequence tile gradient [heads, T, T] (float32 or float64) as float64; the entries above the
/// diagonal (masked logits) are never read, the others must be finite.
std::vector<double> tile_gradient_of(const array& grad_tile, std::int64_t heads, std::int64_t length) {
  if (grad_tile.ndim() != 3 || static_cast<std::int64_t>(grad_tile.shape(0)) != heads ||
      static_cast<std::int64_t>(grad_tile.shape(1)) != length || static_cast<std::int64_t>(grad_tile.shape(2)) != length)
    throw input_error(
        fmt::format("grad_tile: shape must be [heads, seq_len, seq_len] = [{}, {}, {}]", heads, length, length));
  const std::int64_t n = heads * length * length;
  std::vector<double> grad;
  if (grad_tile.dtype() == nb::dtype<double>()) {
    const double* g = float64_values(grad_tile, n, "grad_tile");
    grad.assign(g, g + n);
  } else {
    const float* g = float32_values(grad_tile, n, "grad_tile");
    grad.assign(g, g + n);
  }
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t col = i % length, row = (i / length) % length;
    if (col <= row && !std::isfinite(grad[i]))
      throw input_error(fmt::format("grad_tile[{}][{}][{}]: must be finite (got {})", i / (length * length), row, col,
                                    grad[i]));
  }
  return grad;
}

void bind_bias(nb::module_& m) {
  m.def("alibi_slopes", &cpu::alibi_slopes, "heads"_a, "max_bias"_a = 8.0,
        "ALiBi's slopes for any head count (the exact rule: geometric for a power of two, interleaved otherwise).");

  m.def("_alibi_tile",
        [](const array& slopes, std::int64_t q_len, std::int64_t k_len, std::int64_t q_start, std::int64_t k_start,
           int threads) {
          const std::int64_t heads = static_cast<std::int64_t>(slopes.size());
          const float* s = float32_values(slopes, heads, "slopes");
          new_tile t = make_tile(heads, q_start, q_len, k_start, k_len, threads);
          cpu::alibi_tile(t.tile, s);
          return t.array;
        },
        "slopes"_a, "q_len"_a, "k_len"_a, "q_start"_a, "k_start"_a, "threads"_a, nb::rv_policy::automatic);

  m.def("_alibi_slope_grad",
        [](const array& grad_tile, std::int64_t q_start, std::int64_t k_start, int threads) {
          if (grad_tile.ndim() != 3) throw input_error("grad_tile: shape must be [heads, q_len, k_len]");
          cpu::bias_tile shape{nullptr, static_cast<std::int64_t>(grad_tile.shape(0)), q_start,
                               static_cast<std::int64_t>(grad_tile.shape(1)), k_start,
                               static_cast<std::int64_t>(grad_tile.shape(2)), threads};
          const float* g = float32_values(grad_tile, static_cast<std::int64_t>(grad_tile.size()), "grad_tile");
          std::vector<double> grad(static_cast<std::size_t>(shape.heads));
          cpu::alibi_slope_grad(shape, g, grad.data());
          return grad;
        },
        "grad_tile"_a, "q_start"_a, "k_start"_a, "threads"_a);

  m.def("_t5_tile",
        [](const array& table, std::int64_t q_len, std::int64_t k_len, int max_distance, bool bidirectional,
           std::int64_t q_start, std::int64_t k_start, int threads) {
          if (table.ndim() != 2) throw input_error("table: shape must be [num_buckets, heads]");
          const int buckets = static_cast<int>(table.shape(0));
          const std::int64_t heads = static_cast<std::int64_t>(table.shape(1));
          const float* values = float32_values(table, buckets * heads, "table");
          new_tile t = make_tile(heads, q_start, q_len, k_start, k_len, threads);
          cpu::t5_tile(t.tile, values, buckets, max_distance, bidirectional);
          return t.array;
        },
        "table"_a, "q_len"_a, "k_len"_a, "max_distance"_a, "bidirectional"_a, "q_start"_a, "k_start"_a,
        "threads"_a, nb::rv_policy::automatic);

  m.def("_fox_tile",
        [](const array& log_forget, std::int64_t q_len, std::int64_t k_len, std::int64_t q_start,
           std::int64_t k_start, float causal_mask_value, int threads) {
          if (log_forget.ndim() != 2) throw input_error("log_forget: shape must be [heads, seq_len]");
          const std::int64_t heads = static_cast<std::int64_t>(log_forget.shape(0));
          const std::int64_t seq = static_cast<std::int64_t>(log_forget.shape(1));
          const float* lf = float32_values(log_forget, heads * seq, "log_forget");
          std::vector<double> prefix(static_cast<std::size_t>(heads * seq));
          cpu::fox_prefix_sums(lf, heads, seq, prefix.data());
          new_tile t = make_tile(heads, q_start, q_len, k_start, k_len, threads);
          cpu::fox_tile(t.tile, prefix.data(), seq, causal_mask_value);
          return t.array;
        },
        "log_forget"_a, "q_len"_a, "k_len"_a, "q_start"_a, "k_start"_a, "causal_mask_value"_a, "threads"_a,
        nb::rv_policy::automatic);

  m.def("_grape_a_tile",
        [](const array& omega, const array& key_gate, std::optional<array> query_gate, int threads) {
          gated_linear_bias b = gated_bias_of(omega, key_gate, query_gate);
          const std::int64_t heads = b.num_heads, seq = b.length;
          new_tile t = make_tile(heads, 0, seq, 0, seq, threads);
          cpu::bias_tile_of(bias_instance<gated_linear_bias>{std::move(b), 0}, t.tile);
          return t.array;
        },
        "omega"_a, "key_gate"_a, "query_gate"_a = nb::none(), "threads"_a = 0, nb::rv_policy::automatic);

  m.def("_grape_a_grad",
        [](const array& omega, const array& key_gate, std::optional<array> query_gate, const array& grad_tile,
           const array& grad) {
          const gated_linear_bias b = gated_bias_of(omega, key_gate, query_gate);
          const std::vector<double> g = tile_gradient_of(grad_tile, b.num_heads, b.length);
          double* out = float64_values(grad, static_cast<std::int64_t>(b.parameter_count()), "grad");
          nb::gil_scoped_release release;
          cpu::gated_linear_grad(b, g.data(), out);
        },
        "omega"_a, "key_gate"_a, "query_gate"_a, "grad_tile"_a, "grad"_a);

  m.def("_grape_ap_tile",
        [](const array& projections, double norm_eps, int threads) {
          const path_integral_bias b = path_integral_of(projections, norm_eps);
          new_tile t = make_tile(b.num_heads, 0, b.length, 0, b.length, threads);
          {
            nb::gil_scoped_release release;
            cpu::bias_tile_of(bias_instance<path_integral_bias>{b, 0}, t.tile);
          }
          return t.array;
        },
        "projections"_a, "norm_eps"_a, "threads"_a = 0, nb::rv_policy::automatic);

  m.def("_grape_ap_grad",
        [](const array& projections, double norm_eps, const array& grad_tile, const array& grad_projections) {
          const path_integral_bias b = path_integral_of(projections, norm_eps);
          const std::vector<double> grad = tile_gradient_of(grad_tile, b.num_heads, b.length);
          double* out = float64_values(grad_projections, b.num_heads * b.length * b.dim, "grad_projections");
          nb::gil_scoped_release release;
          cpu::path_integral_grad(b, grad.data(), out);
        },
        "projections"_a, "norm_eps"_a, "grad_tile"_a, "grad_projections"_a);

  m.def("_add_sinusoidal",
        [](const array& x, const array& positions, double base, int threads) {
          cpu::add_sinusoidal(embedding_rows_of(x, positions, threads), base);
        },
        "x"_a, "positions"_a, "base"_a, "threads"_a);
}

}  // namespace grape::python
