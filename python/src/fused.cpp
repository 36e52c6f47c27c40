// What rotate_qk fuses, on arrays: the cos/sin cache (grape.RotaryCache), the per-head RMSNorm
// before the rotation and the paged KV-cache write after it (rotate_qk's qk_norm= and kv_cache=).
#include "fused.hpp"

#include <fmt/format.h>
#include <nanobind/stl/string.h>

#include "grape/detail/error.hpp"

namespace grape::python {

namespace nb = nanobind;
using namespace nb::literals;

namespace {

/// A float32 [head_dim] weight, contiguous.
const float* norm_weight(const std::optional<array>& w, int head_dim, const char* name) {
  if (!w) return nullptr;
  if (w->dtype() != nb::dtype<float>() || w->ndim() != 1 || static_cast<int>(w->shape(0)) != head_dim ||
      (head_dim > 1 && w->stride(0) != 1))
    throw input_error(fmt::format("{}: must be a contiguous float32 array of head_dim = {} values", name, head_dim));
  storage_type(*w, name);  // the device check
  return static_cast<const float*>(w->data());
}

}  // namespace

cache_shape cache_of(const array& c, bool hnd, const char* name) {
  if (c.ndim() != 4)
    throw input_error(fmt::format("{}: shape must be [blocks, block_size, heads, dim] (NHD) or "
                                  "[blocks, heads, block_size, dim] (HND)",
                                  name));
  storage_type(c, name);
  for (std::size_t i = 0; i < 4; ++i)
    if (c.stride(i) < 0) throw input_error(fmt::format("{}: negative strides are not supported", name));
  if (c.shape(3) > 1 && c.stride(3) != 1) throw input_error(fmt::format("{}: channels must be contiguous", name));
  const std::size_t slot_axis = hnd ? 2 : 1, head_axis = hnd ? 1 : 2;
  cache_shape s;
  s.blocks = static_cast<std::int64_t>(c.shape(0));
  s.block_size = static_cast<std::int64_t>(c.shape(slot_axis));
  s.heads = static_cast<std::int64_t>(c.shape(head_axis));
  s.dim = static_cast<std::int64_t>(c.shape(3));
  s.tensor = {c.data(), addressable_span(c), c.stride(0), c.stride(slot_axis), c.stride(head_axis)};
  return s;
}


fused_parts::fused_parts(const rotary_spec& spec, cpu::rotate_qk_args& args, const fused_arrays& a) {
  if (a.q_norm_weight || a.k_norm_weight) {
    norm.q_weight = norm_weight(a.q_norm_weight, spec.head_dim, "qk_norm.q_weight");
    norm.k_weight = norm_weight(a.k_norm_weight, spec.head_dim, "qk_norm.k_weight");
    norm.eps = a.norm_eps;
    norm.unit_offset = a.norm_unit_offset;
    args.qk_norm = &norm;
  }
  if (a.k_cache) {
    if (!a.slot_mapping) throw input_error("kv_cache.slot_mapping: required with a K cache");
    if (a.layout != "NHD" && a.layout != "HND")
      throw input_error(fmt::format("kv_cache.layout: must be 'NHD' or 'HND' (got '{}')", a.layout));
    const bool hnd = a.layout == "HND";
    const cache_shape k = cache_of(*a.k_cache, hnd, "kv_cache.k_cache");
    write.blocks = k.blocks;
    write.block_size = k.block_size;
    write.k = k.tensor;
    const std::int64_t tokens = args.cu_seqlens ? args.cu_seqlens[args.batch] : args.batch * args.seq_len;
    write.slot_mapping = int64_values(*a.slot_mapping, tokens, "kv_cache.slot_mapping");
    if (a.v_cache) {
      const cache_shape v = cache_of(*a.v_cache, hnd, "kv_cache.v_cache");
      if (v.blocks != k.blocks || v.block_size != k.block_size || v.heads != k.heads || v.dim != k.dim)
        throw input_error("kv_cache.v_cache: must have the K cache's shape");
      if (!a.values) throw input_error("kv_cache.values: required with a V cache");
      write.v = v.tensor;
      const qk_shape vs = qk_shape_of(*a.values, "kv_cache.values");
      write.values = {a.values->data(), nullptr, vs.heads, vs.span, vs.batch_stride, vs.token_stride, vs.head_stride};
    }
    args.kv_cache = &write;
  } else if (a.slot_mapping || a.v_cache || a.values) {
    throw input_error("kv_cache.k_cache: required with slot_mapping, v_cache or values");
  }
}

void bind_fused(nb::module_& m) {
  nb::class_<cpu::rotary_cache>(m, "RotaryCache",
                                "float32 cos/sin rows of one encoding for positions [first_position, max_position), "
                                "built with exact phases (never 16-bit): the same results as on the fly.")
      .def("__init__",
           [](cpu::rotary_cache* self, const rotary_encoding& e, std::int64_t max_position,
              std::int64_t first_position) {
             new (self) cpu::rotary_cache(cpu::rotary_cache::build(e.spec, max_position, first_position));
           },
           "encoding"_a, "max_position"_a, "first_position"_a = 0)
      .def_ro("first_position", &cpu::rotary_cache::first_position)
      .def_ro("max_position", &cpu::rotary_cache::max_position)
      .def_ro("rotary_dim", &cpu::rotary_cache::rotary_dim)
      .def("__repr__", [](const cpu::rotary_cache& c) {
        return fmt::format("RotaryCache(positions {}..{}, rotary_dim {})", c.first_position, c.max_position - 1,
                           c.rotary_dim);
      });
}

}  // namespace grape::python
