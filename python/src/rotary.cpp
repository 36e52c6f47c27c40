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
#include "qk_args.hpp"
#include "grape/detail/error.hpp"

namespace grape::python {

namespace nb = nanobind;
using namespace nb::literals;

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
          auto args = make_qk_args(e.spec.head_dim, e.spec.num_axes, {q, q_out, k, k_out}, positions, offsets, cu_seqlens,
                                   max_position, threads);
          args.cache = cache;
          const fused_parts parts(e.spec, args, fused);
          if (no_tokens(args)) return;
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
          const auto args = make_qk_args(e.spec.head_dim, e.spec.num_axes, {q, grad_q, k, grad_k}, positions, offsets,
                                         cu_seqlens, std::nullopt, threads);
          std::vector<double> grad(static_cast<std::size_t>(e.spec.rotary_dim / 2));
          if (!no_tokens(args)) {
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
