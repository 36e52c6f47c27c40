// GRAPE-M's learnable and contextual rotations on arrays (kernels/cpu/grape_m.hpp): forward,
// backward and the frequency and phase gradients, apart or (from the forward's outputs) in one
// pass. Python (grape/_grape_m.py) passes the frequencies as float64 [rows, planes] and the phases
// as float64 [rows, tokens], and allocates every output.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <string>

#include "arrays.hpp"
#include "content_encodings.hpp"
#include "cpu/grape_m.hpp"
#include "encodings.hpp"
#include "grape/detail/error.hpp"
#include "grape/encodings/grape_m_contextual.hpp"
#include "qk_args.hpp"

namespace grape::python {

namespace nb = nanobind;
using namespace nb::literals;

namespace {

/// The spec of a call: head_dim from q (or k), rows and planes from the arrays' shapes.
cpu::grape_m_spec spec_of(const qk_arrays& a, const array& freqs, const optional_array& phases,
                          const std::string& layout, int angle_sign) {
  const array& first = a.q ? *a.q : *a.k;
  const qk_shape s = qk_shape_of(first, a.q ? "q" : "k");
  if (freqs.ndim() != 2) throw input_error("freqs: must be [rows, planes]");
  cpu::grape_m_spec spec;
  spec.head_dim = static_cast<int>(s.dim);
  spec.freq_rows = static_cast<int>(freqs.shape(0));
  spec.planes = static_cast<int>(freqs.shape(1));
  spec.freqs = float64_values(freqs, freqs.shape(0) * freqs.shape(1), "freqs");
  spec.layout = layout_from(layout);
  spec.angle_sign = angle_sign;
  if (phases) {
    if (phases->ndim() != 2 || static_cast<std::int64_t>(phases->shape(1)) != s.batch * s.seq)
      throw input_error(fmt::format("phases: must be [rows, tokens] with {} tokens", s.batch * s.seq));
    spec.phase_rows = static_cast<int>(phases->shape(0));
    spec.phases = float64_values(*phases, phases->shape(0) * phases->shape(1), "phases");
  }
  return spec;
}

/// The float64 outputs of the frequency and phase gradients (either may be absent).
cpu::grape_m_grads grads_of(const cpu::grape_m_spec& spec, const optional_array& phases, const optional_array& d_freqs,
                            const optional_array& d_phases) {
  cpu::grape_m_grads out;
  if (d_freqs)
    out.freqs = float64_values(*d_freqs, static_cast<std::int64_t>(spec.freq_rows) * spec.planes, "d_freqs");
  if (d_phases) {
    if (!phases) throw input_error("d_phases: integer positions have no phase gradient");
    out.phases = float64_values(*d_phases, phases->shape(0) * phases->shape(1), "d_phases");
  }
  return out;
}

}  // namespace

phase_rotation phase_rotation_of(const array& freqs, const array& phases, int head_dim) {
  if (freqs.ndim() != 1 && freqs.ndim() != 2) throw input_error("freqs: shape must be [planes] or [heads, planes]");
  if (phases.ndim() != 2) throw input_error("phases: shape must be [rows, length] (rows 1 or the heads)");
  const int freq_rows = freqs.ndim() == 2 ? static_cast<int>(freqs.shape(0)) : 1;
  const int phase_rows = static_cast<int>(phases.shape(0));
  // A row per head on either side sets the heads; both shared: any head count (one row serves all).
  grape_m_contextual::params p{std::max(freq_rows, phase_rows), head_dim, phase_rows, {}, {}};
  p.freqs = finite_doubles(freqs, static_cast<std::int64_t>(freqs.size()), "freqs");
  p.phases = finite_doubles(phases, static_cast<std::int64_t>(phases.size()), "phases");
  if (p.freqs.empty()) throw input_error("freqs: must hold head_dim/2 values per row");
  return grape_m_contextual::make(p);
}

void bind_grape_m(nb::module_& m) {
  m.def("_grape_m_rotate_qk",
        [](optional_array q, optional_array q_out, optional_array k, optional_array k_out, const array& freqs,
           optional_array phases, optional_array positions, optional_array offsets, optional_array cu_seqlens,
           std::optional<std::int64_t> max_position, const std::string& layout, int angle_sign, int threads,
           bool backward) {
          if (!q && !k) throw input_error("q, k: at least one must be given");
          const qk_arrays a{q, q_out, k, k_out};
          const cpu::grape_m_spec spec = spec_of(a, freqs, phases, layout, angle_sign);
          const auto args =
              make_qk_args(spec.head_dim, 1, a, positions, offsets, cu_seqlens, max_position, threads);
          nb::gil_scoped_release release;
          backward ? cpu::grape_m_rotate_qk_backward(spec, args) : cpu::grape_m_rotate_qk(spec, args);
        },
        "q"_a.none(), "q_out"_a.none(), "k"_a.none(), "k_out"_a.none(), "freqs"_a, "phases"_a.none(),
        "positions"_a.none(), "offsets"_a.none(), "cu_seqlens"_a.none(), "max_position"_a.none(), "layout"_a,
        "angle_sign"_a, "threads"_a, "backward"_a);

  m.def("_grape_m_param_grads",
        [](optional_array q, optional_array grad_q, optional_array k, optional_array grad_k, const array& freqs,
           optional_array phases, optional_array positions, optional_array offsets, optional_array cu_seqlens,
           const std::string& layout, int angle_sign, int threads, optional_array d_freqs,
           optional_array d_phases) {
          if (!q && !k) throw input_error("q, k: at least one must be given");
          // The gradients address like the inputs: require_same_layout via the out slots.
          const qk_arrays a{q, grad_q, k, grad_k};
          const cpu::grape_m_spec spec = spec_of(a, freqs, phases, layout, angle_sign);
          const auto args = make_qk_args(spec.head_dim, 1, a, positions, offsets, cu_seqlens, std::nullopt, threads);
          const cpu::grape_m_grads out = grads_of(spec, phases, d_freqs, d_phases);
          nb::gil_scoped_release release;
          cpu::grape_m_param_grads(spec, args, grad_q ? grad_q->data() : nullptr, grad_k ? grad_k->data() : nullptr,
                                   out);
        },
        "q"_a.none(), "grad_q"_a.none(), "k"_a.none(), "grad_k"_a.none(), "freqs"_a, "phases"_a.none(),
        "positions"_a.none(), "offsets"_a.none(), "cu_seqlens"_a.none(), "layout"_a, "angle_sign"_a, "threads"_a,
        "d_freqs"_a.none(), "d_phases"_a.none());

  // The backward and the parameters' gradients in one pass, from the forward's outputs.
  m.def("_grape_m_backward_with_grads",
        [](optional_array grad_q, optional_array dq, optional_array grad_k, optional_array dk,
           optional_array rotated_q, optional_array rotated_k, const array& freqs, optional_array phases,
           optional_array positions, optional_array offsets, optional_array cu_seqlens, const std::string& layout,
           int angle_sign, int threads, optional_array d_freqs, optional_array d_phases) {
          if (!grad_q && !grad_k) throw input_error("grad_q, grad_k: at least one must be given");
          const qk_arrays a{grad_q, dq, grad_k, dk};
          // The forward's outputs address like the gradients (a missing one: the kernel names it).
          const auto rotated = [](const optional_array& grad, const optional_array& y, const char* grad_name,
                                  const char* name) -> const void* {
            if (!grad || !y) return nullptr;
            require_same_layout(*grad, *y, grad_name, name);
            return y->data();
          };
          const void* rq = rotated(grad_q, rotated_q, "grad_q", "rotated_q");
          const void* rk = rotated(grad_k, rotated_k, "grad_k", "rotated_k");
          const cpu::grape_m_spec spec = spec_of(a, freqs, phases, layout, angle_sign);
          const auto args = make_qk_args(spec.head_dim, 1, a, positions, offsets, cu_seqlens, std::nullopt, threads);
          const cpu::grape_m_grads out = grads_of(spec, phases, d_freqs, d_phases);
          nb::gil_scoped_release release;
          cpu::grape_m_rotate_qk_backward_with_grads(spec, args, rq, rk, out);
        },
        "grad_q"_a.none(), "dq"_a.none(), "grad_k"_a.none(), "dk"_a.none(), "rotated_q"_a.none(),
        "rotated_k"_a.none(), "freqs"_a, "phases"_a.none(), "positions"_a.none(), "offsets"_a.none(),
        "cu_seqlens"_a.none(), "layout"_a, "angle_sign"_a, "threads"_a, "d_freqs"_a.none(), "d_phases"_a.none());
}

}  // namespace grape::python
