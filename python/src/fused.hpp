#pragma once
// rotate_qk's fused parts from Python arrays: the QK-norm weights and the paged KV-cache write.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <optional>
#include <string>

#include "arrays.hpp"
#include "encodings.hpp"

namespace grape::python {

struct fused_arrays {
  std::optional<array> q_norm_weight, k_norm_weight;
  float norm_eps = 1e-6f;
  bool norm_unit_offset = false;
  std::optional<array> slot_mapping, k_cache, v_cache, values;
  std::string layout = "NHD";
};

/// The kernel structs the arguments point at while the call runs (so: not movable).
struct fused_parts {
  cpu::qk_rms_norm norm;
  cpu::kv_cache_write write;
  /// Checks the arrays and sets args.qk_norm / args.kv_cache when given.
  fused_parts(const rotary_spec& spec, cpu::rotate_qk_args& args, const fused_arrays& a);
  fused_parts(const fused_parts&) = delete;
  fused_parts& operator=(const fused_parts&) = delete;
};

void bind_fused(nanobind::module_& m);

}  // namespace grape::python
