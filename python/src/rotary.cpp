// The rotary kernels on arrays: forward (with its fused parts), backward and the frequency
// gradient. Python allocates the outputs (grape/__init__.py) and passes them here; nothing is copied.
#include <fmt/format.h>
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <optional>
#include <vector>

#include "arrays.hpp"
#include "encodings.hpp"
#include "fused.hpp"
#include "grape/detail/error.hpp"

namespace grape::python {

namespace nb = nanobind;
using namespace nb::literals;

namespace {

using optional_array = std::optional<array>;

struct qk_arrays {
  optional_array q, q_out, k, k_out;
};

/// Q's and K's shapes, checked against each other and the encoding, as kernel arguments.
cpu::rotate_qk_args make_args(const rotary_spec& spec, const qk_arrays& a, const optional_array& positions,
                              const optional_array& offsets, const optional_array& cu_seqlens,
                              std::optional<std::int64_t> max_position, int threads) {
  if (!a.q && !a.k) throw input_error("q, k: at least one must be given");
  cpu::rotate_qk_args args;
  std::optional<qk_shape> first;
  std::optional<cpu::dtype> type;
  auto fill = [&](const optional_array& in, const optional_array& out, cpu::qk_tensor& t, const char* name,
                  const char* out_name) {
    if (!in) return;
    const qk_shape s = qk_shape_of(*in, name);
    const cpu::dtype d = storage_type(*in, name);
    if (s.dim != spec.head_dim)
      throw input_error(fmt::format("{}: last dimension must be the encoding's head_dim {} (got {})", name,
                                    spec.head_dim, s.dim));
    if (first && (s.batch != first->batch || s.seq != first->seq))
      throw input_error(fmt::format("{}: batch and sequence extents must match q's ({} x {} vs {} x {})", name, s.batch,
                                    s.seq, first->batch, first->seq));
    if (type && d != *type) throw input_error(fmt::format("{}: dtype must match q's", name));
    if (out) require_same_layout(*in, *out, name, out_name);
    first = s;
    type = d;
    t.in = in->data();
    t.out = out ? out->data() : in->data();
    t.heads = s.heads;
    t.size = s.span;
    t.batch_stride = s.batch_stride;
    t.token_stride = s.token_stride;
    t.head_stride = s.head_stride;
  };
  fill(a.q, a.q_out, args.q, "q", "q_out");
  fill(a.k, a.k_out, args.k, "k", "k_out");
  args.type = *type;
  args.batch = first->batch;
  args.seq_len = first->seq;
  std::int64_t tokens = first->batch * first->seq;
  if (cu_seqlens) {
    if (first->batch != 1)
      throw input_error("cu_seqlens: q and k must be packed [total_tokens, heads, dim] with cu_seqlens");
    const std::int64_t n = static_cast<std::int64_t>(cu_seqlens->size());
    if (n < 2) throw input_error("cu_seqlens: must hold batch + 1 >= 2 offsets");
    args.cu_seqlens = int64_values(*cu_seqlens, n, "cu_seqlens");
    args.batch = n - 1;
    args.seq_len = 0;
  }
  if (positions && offsets) throw input_error("positions, offsets: give one or neither");
  if (positions) {
    const index_array p = positions_of(*positions, spec.num_axes * tokens, "positions");
    args.position_ids = p.data;
    args.position_type = p.type;
  }
  if (offsets) args.offsets = int64_values(*offsets, args.batch, "offsets");
  if (max_position) args.max_position = *max_position;
  args.threads = threads;
  return args;
}

}  // namespace

void bind_rotary(nb::module_& m) {
  m.def("_rotate_qk",
        [](const rotary_encoding& e, optional_array q, optional_array q_out, optional_array k, optional_array k_out,
           optional_array positions, optional_array offsets, optional_array cu_seqlens,
           std::optional<std::int64_t> max_position, int threads, bool backward, const cpu::rotary_cache* cache,
           optional_array q_norm_weight, optional_array k_norm_weight, float norm_eps, bool norm_unit_offset,
           optional_array slot_mapping, optional_array k_cache, optional_array v_cache, optional_array values,
           const std::string& cache_layout) {
          const fused_arrays fused{q_norm_weight, k_norm_weight, norm_eps, norm_unit_offset,
                                   slot_mapping,  k_cache,       v_cache,  values,
                                   cache_layout};
          auto args = make_args(e.spec, {q, q_out, k, k_out}, positions, offsets, cu_seqlens, max_position, threads);
          args.cache = cache;
          const fused_parts parts(e.spec, args, fused);
          nb::gil_scoped_release release;
          if (backward)
            cpu::rotate_qk_backward(e.spec, args);
          else
            cpu::rotate_qk(e.spec, args);
        },
        "encoding"_a, "q"_a.none(), "q_out"_a.none(), "k"_a.none(), "k_out"_a.none(), "positions"_a.none(),
        "offsets"_a.none(), "cu_seqlens"_a.none(), "max_position"_a.none(), "threads"_a, "backward"_a,
        "cache"_a.none(), "q_norm_weight"_a.none(), "k_norm_weight"_a.none(), "norm_eps"_a, "norm_unit_offset"_a,
        "slot_mapping"_a.none(), "k_cache"_a.none(), "v_cache"_a.none(), "values"_a.none(), "cache_layout"_a);


  m.def("_inv_freq_grad",
        [](const rotary_encoding& e, optional_array q, optional_array grad_q, optional_array k,
           optional_array grad_k, optional_array positions, optional_array offsets, optional_array cu_seqlens,
           int threads) {
          // The gradients address like the inputs: require_same_layout via the out slots.
          const auto args = make_args(e.spec, {q, grad_q, k, grad_k}, positions, offsets, cu_seqlens,
                                      std::nullopt, threads);
          std::vector<double> grad(static_cast<std::size_t>(e.spec.rotary_dim / 2));
          {
            nb::gil_scoped_release release;
            cpu::rotate_qk_inv_freq_grad(e.spec, args, grad_q ? grad_q->data() : nullptr,
                                         grad_k ? grad_k->data() : nullptr, grad.data());
          }
          return grad;
        },
        "encoding"_a, "q"_a.none(), "grad_q"_a.none(), "k"_a.none(), "grad_k"_a.none(), "positions"_a.none(),
        "offsets"_a.none(), "cu_seqlens"_a.none(), "threads"_a);
}

}  // namespace grape::python
