#pragma once
// NumPy arrays and PyTorch tensors (DLPack or the buffer protocol) seen as the kernels' strided
// tensors, without copies. A dtype, shape, device or stride the kernels cannot take is a
// grape::input_error naming the argument (a ValueError in Python).
#include <nanobind/ndarray.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "cpu/rotate_qk.hpp"

namespace grape::python {

namespace nb = nanobind;

/// Any array on any device; the checks below say what is accepted.
using array = nb::ndarray<>;

/// float32, float16 or bfloat16 storage.
cpu::dtype storage_type(const array& a, const char* name);

/// Q or K: [tokens, heads, dim] or [batch, seq, heads, dim], channels contiguous, strides >= 0.
struct qk_shape {
  std::int64_t batch = 1;
  std::int64_t seq = 0;
  std::int64_t heads = 0;
  std::int64_t dim = 0;
  std::int64_t batch_stride = 0;
  std::int64_t token_stride = 0;
  std::int64_t head_stride = 0;
  std::int64_t span = 0;  // elements addressable from the data pointer: 1 + sum (extent - 1) * stride
};
qk_shape qk_shape_of(const array& a, const char* name);

/// `out` must match `in` in dtype, shape and strides (the kernels address both alike).
void require_same_layout(const array& in, const array& out, const char* in_name, const char* out_name);

/// Integer positions: int32 or int64, C-contiguous, exactly `count` values.
struct index_array {
  const void* data = nullptr;
  cpu::index_type type = cpu::index_type::i64;
};
index_array positions_of(const array& a, std::int64_t count, const char* name);

/// Dense row-major (extent-1 axes may have any stride).
bool c_contiguous(const array& a);

/// Elements addressable from the data pointer (non-negative strides): 1 + sum (extent - 1) * stride,
/// 0 for an empty array. What the kernels' `size` bounds checks take.
std::int64_t addressable_span(const array& a);

/// float32, C-contiguous, exactly `count` values.
const float* float32_values(const array& a, std::int64_t count, const char* name);

/// float64, C-contiguous, exactly `count` values (writable: an output the caller allocated).
double* float64_values(const array& a, std::int64_t count, const char* name);

/// float32 or float64 values (C-contiguous, exactly `count`) as doubles, each finite (a NaN gate
/// would make a NaN bias): an input_error names the first that is not.
std::vector<double> finite_doubles(const array& a, std::int64_t count, const char* name);

/// int64, C-contiguous, exactly `count` values.
const std::int64_t* int64_values(const array& a, std::int64_t count, const char* name);

}  // namespace grape::python
