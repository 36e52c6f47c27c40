#pragma once
// Q's and K's arrays (and their outputs) as the kernels' rotate_qk_args: shapes checked against
// each other and the encoding's head_dim, positions, offsets or cu_seqlens. Shared by the rotary
// kernels and attention.
#include <cstdint>
#include <optional>

#include "arrays.hpp"

namespace grape::python {

using optional_array = std::optional<array>;

struct qk_arrays {
  optional_array q, q_out, k, k_out;
};

/// `prefix` names the token arguments in messages ("key_" for attention's keys on tokens of their own).
cpu::rotate_qk_args make_qk_args(int head_dim, int num_axes, const qk_arrays& a, const optional_array& positions,
                                 const optional_array& offsets, const optional_array& cu_seqlens,
                                 std::optional<std::int64_t> max_position, int threads, const char* prefix = "");

/// True when the call holds no token (an empty sequence or batch): its result is empty and the
/// kernels are not run (an empty torch tensor's data pointer may be null, which they refuse).
bool no_tokens(const cpu::qk_args& a);

}  // namespace grape::python
