#pragma once
// rotate_qk's fused parts from Python arrays: the QK-norm weights and the paged KV-cache write.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstdint>
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

/// One paged cache tensor: NHD [blocks, block_size, heads, dim] or HND [blocks, heads, block_size, dim].
struct cache_shape {
  std::int64_t blocks = 0, block_size = 0, heads = 0, dim = 0;
  cpu::paged_cache tensor;
};
cache_shape cache_of(const array& c, bool hnd, const char* name);

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
