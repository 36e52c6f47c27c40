#include "arrays.hpp"

#include <cmath>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <vector>

#include "grape/detail/error.hpp"

namespace grape::python {

namespace {

namespace dl = nb::dlpack;

std::vector<std::int64_t> shape_of(const array& a) {
  return std::vector<std::int64_t>(a.shape_ptr(), a.shape_ptr() + a.ndim());
}

std::vector<std::int64_t> strides_of(const array& a) {  // in elements, as DLPack gives them
  return std::vector<std::int64_t>(a.stride_ptr(), a.stride_ptr() + a.ndim());
}

void require_cpu(const array& a, const char* name) {
  if (a.device_type() != nb::device::cpu::value)
    throw input_error(fmt::format("{}: must be a CPU array or tensor (this module runs the CPU kernels)", name));
}

std::string dtype_name(dl::dtype t) {
  const char* kind = t.code == static_cast<std::uint8_t>(dl::dtype_code::Float)    ? "float"
                     : t.code == static_cast<std::uint8_t>(dl::dtype_code::Bfloat) ? "bfloat"
                     : t.code == static_cast<std::uint8_t>(dl::dtype_code::Int)    ? "int"
                     : t.code == static_cast<std::uint8_t>(dl::dtype_code::UInt)   ? "uint"
                                                                                 : "other";
  return fmt::format("{}{}", kind, t.bits);
}

std::int64_t element_count(const array& a) { return static_cast<std::int64_t>(a.size()); }

}  // namespace

bool c_contiguous(const array& a) {
  if (a.size() == 0) return true;  // nothing to address, whatever strides DLPack gives it
  std::int64_t expected = 1;
  for (std::size_t i = a.ndim(); i-- > 0;) {
    if (a.shape(i) != 1 && a.stride(i) != expected) return false;
    expected *= static_cast<std::int64_t>(a.shape(i));
  }
  return true;
}

std::int64_t addressable_span(const array& a) {
  if (a.size() == 0) return 0;
  std::int64_t span = 1;
  for (std::size_t i = 0; i < a.ndim(); ++i) span += (static_cast<std::int64_t>(a.shape(i)) - 1) * a.stride(i);
  return span;
}

cpu::dtype storage_type(const array& a, const char* name) {
  require_cpu(a, name);
  const dl::dtype t = a.dtype();
  if (t == nb::dtype<float>()) return cpu::dtype::f32;
  if (t.lanes == 1 && t.bits == 16 && t.code == static_cast<std::uint8_t>(dl::dtype_code::Float))
    return cpu::dtype::f16;
  if (t.lanes == 1 && t.bits == 16 && t.code == static_cast<std::uint8_t>(dl::dtype_code::Bfloat))
    return cpu::dtype::bf16;
  throw input_error(fmt::format("{}: dtype must be float32, float16 or bfloat16 (got {})", name, dtype_name(t)));
}

qk_shape qk_shape_of(const array& a, const char* name) {
  require_cpu(a, name);
  if (a.ndim() != 3 && a.ndim() != 4)
    throw input_error(fmt::format("{}: shape must be [tokens, heads, dim] or [batch, seq, heads, dim] (got {})",
                                  name, shape_of(a)));
  const std::size_t n = a.ndim();
  // An empty array addresses nothing: NumPy and DLPack may give it any strides (0 included).
  const bool empty = a.size() == 0;
  for (std::size_t i = 0; i < n && !empty; ++i)
    if (a.stride(i) < 0)
      throw input_error(fmt::format("{}: negative strides are not supported (strides {})", name,
                                    std::vector<std::int64_t>(a.stride_ptr(), a.stride_ptr() + n)));
  if (!empty && a.shape(n - 1) > 1 && a.stride(n - 1) != 1)
    throw input_error(fmt::format("{}: channels must be contiguous (last stride {}, expected 1)", name,
                                  a.stride(n - 1)));
  qk_shape s;
  s.dim = static_cast<std::int64_t>(a.shape(n - 1));
  s.heads = static_cast<std::int64_t>(a.shape(n - 2));
  s.head_stride = a.stride(n - 2);
  s.seq = static_cast<std::int64_t>(a.shape(n - 3));
  s.token_stride = a.stride(n - 3);
  if (n == 4) {
    s.batch = static_cast<std::int64_t>(a.shape(0));
    s.batch_stride = a.stride(0);
  } else {
    s.batch_stride = s.seq * s.token_stride;
  }
  s.span = addressable_span(a);
  return s;
}

void require_same_layout(const array& in, const array& out, const char* in_name, const char* out_name) {
  require_cpu(out, out_name);
  bool same = in.dtype() == out.dtype() && in.ndim() == out.ndim() &&
              std::equal(in.shape_ptr(), in.shape_ptr() + in.ndim(), out.shape_ptr());
  // A dimension of extent 1 is never stepped along, so its stride is free (torch gives such
  // dimensions of an autograd gradient other strides than the input's); so are an empty array's.
  for (std::size_t i = 0; same && in.size() > 0 && i < in.ndim(); ++i)
    same = in.shape(i) == 1 || in.stride(i) == out.stride(i);
  if (!same)
    throw input_error(fmt::format("{}: must have the dtype, shape and strides of {} (shape {}, strides {} vs {}, {})",
                                  out_name, in_name, shape_of(out), strides_of(out), shape_of(in), strides_of(in)));
}

index_array positions_of(const array& a, std::int64_t count, const char* name) {
  require_cpu(a, name);
  index_array r{a.data(), cpu::index_type::i64};
  if (a.dtype() == nb::dtype<std::int32_t>())
    r.type = cpu::index_type::i32;
  else if (a.dtype() != nb::dtype<std::int64_t>())
    throw input_error(fmt::format("{}: dtype must be int32 or int64 (got {})", name, dtype_name(a.dtype())));
  if (element_count(a) != count || !c_contiguous(a))
    throw input_error(fmt::format("{}: must hold {} values (num_axes x tokens), C-contiguous (got shape {})", name,
                                  count, shape_of(a)));
  return r;
}

const float* float32_values(const array& a, std::int64_t count, const char* name) {
  require_cpu(a, name);
  if (a.dtype() != nb::dtype<float>()) throw input_error(fmt::format("{}: dtype must be float32", name));
  if (!c_contiguous(a)) throw input_error(fmt::format("{}: must be C-contiguous", name));
  if (element_count(a) != count)
    throw input_error(fmt::format("{}: must hold {} values (got {})", name, count, a.size()));
  return static_cast<const float*>(a.data());
}

double* float64_values(const array& a, std::int64_t count, const char* name) {
  require_cpu(a, name);
  if (a.dtype() != nb::dtype<double>())
    throw input_error(fmt::format("{}: dtype must be float64 (got {})", name, dtype_name(a.dtype())));
  if (element_count(a) != count || !c_contiguous(a))
    throw input_error(fmt::format("{}: must hold {} values, C-contiguous (got shape {})", name, count, shape_of(a)));
  return static_cast<double*>(a.data());
}

const std::int64_t* int64_values(const array& a, std::int64_t count, const char* name) {
  require_cpu(a, name);
  if (a.dtype() != nb::dtype<std::int64_t>())
    throw input_error(fmt::format("{}: dtype must be int64 (got {})", name, dtype_name(a.dtype())));
  if (element_count(a) != count || !c_contiguous(a))
    throw input_error(fmt::format("{}: must hold {} values, C-contiguous (got shape {})", name, count, shape_of(a)));
  return static_cast<const std::int64_t*>(a.data());
}

}  // namespace grape::python

namespace grape::python {

std::vector<double> finite_doubles(const array& a, std::int64_t count, const char* name) {
  std::vector<double> out;
  if (a.dtype() == nb::dtype<double>()) {
    const double* v = float64_values(a, count, name);
    out.assign(v, v + count);
  } else {
    const float* v = float32_values(a, count, name);
    out.assign(v, v + count);
  }
  for (std::int64_t i = 0; i < count; ++i)
    if (!std::isfinite(out[i])) throw input_error(fmt::format("{}[{}]: must be finite (got {})", name, i, out[i]));
  return out;
}

}  // namespace grape::python
