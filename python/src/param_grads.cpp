// Gradients of built-ins' own parameters that PyTorch cannot form itself: GRAPE-M's rank-2
// generator (dL/da, dL/db, dL/dω through the closed form, kernels/cpu/param_grads.hpp). Python
// (grape/torch.py) hands over q or k and its gradient as dense float32 [tokens, heads, dim] with one
// int64 position per token.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <fmt/format.h>

#include <cmath>
#include <tuple>
#include <vector>

#include "arrays.hpp"
#include "cpu/param_grads.hpp"
#include "grape/detail/error.hpp"

namespace grape::python {

namespace nb = nanobind;
using namespace nb::literals;

namespace {

void require_finite(const std::vector<double>& values, const char* name) {
  for (std::size_t i = 0; i < values.size(); ++i)
    if (!std::isfinite(values[i])) throw input_error(fmt::format("{}[{}]: must be finite", name, i));
}

}  // namespace

void bind_param_grads(nb::module_& m) {
  m.def("_rank2_param_grads",
        [](const std::vector<double>& a, const std::vector<double>& b, double omega, const array& x,
           const array& grad, const array& positions) {
          if (a.empty() || a.size() != b.size())
            throw input_error(fmt::format("a, b: must hold head_dim values each (got {} and {})", a.size(), b.size()));
          require_finite(a, "a");
          require_finite(b, "b");
          if (!std::isfinite(omega)) throw input_error("omega: must be finite");
          if (x.ndim() != 3 || x.shape(2) != a.size())
            throw input_error(fmt::format("x: must be [tokens, heads, {}]", a.size()));
          const auto tokens = static_cast<std::int64_t>(x.shape(0)), heads = static_cast<std::int64_t>(x.shape(1));
          const std::int64_t count = tokens * heads * static_cast<std::int64_t>(a.size());
          const float* xs = float32_values(x, count, "x");
          const float* gs = float32_values(grad, count, "grad");
          const std::int64_t* pos = int64_values(positions, tokens, "positions");
          cpu::rank2_grads out;
          {
            nb::gil_scoped_release release;
            cpu::rank2_grad(a, b, omega, xs, gs, tokens, heads, pos, out);
          }
          return std::make_tuple(out.a, out.b, out.omega);
        },
        "a"_a, "b"_a, "omega"_a, "x"_a, "grad"_a, "positions"_a,
        "(dL/da, dL/db, dL/domega) of GRAPE-M's rank-2 rotation for x and dL/dy [tokens, heads, dim] (float32)");
}

}  // namespace grape::python
