// Fused attention with the encoding inside (cpu::attention, cpu::attention_backward,
// cpu::attention_decode over a paged KV cache) on arrays: no encoding, a rotary encoding (one
// position axis), ALiBi slopes, a T5 bucket table, FoX's log forget gates, GRAPE-A's gates,
// GRAPE-AP's projections, contextual GRAPE-M's frequencies and phases, a rotary encoding
// composed with ALiBi, or any built-in made by grape.encoding(name, ...) (its instance's kernels,
// type-erased in the object: builtin_encoding.hpp). Python allocates the outputs (grape/_attention.py); nothing is copied on
// the way in. The kernels are instantiated in attention_kernels_*.cpp.
#include <fmt/format.h>
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <type_traits>
#include <string>
#include <utility>
#include <vector>

#include "arrays.hpp"
#include "attention_kernels.hpp"
#include "builtin_encoding.hpp"
#include "content_encodings.hpp"
#include "cpu/matmul_path.hpp"
#include "encodings.hpp"
#include "fused.hpp"
#include "grape/detail/error.hpp"
#include "qk_args.hpp"

namespace grape::python {

void set_loaded_matmul_paths(cpu::matmul_path path);  // user_encoding_loader.cpp

namespace nb = nanobind;
using namespace nb::literals;

namespace {

/// FoX's bias from log forget gates [heads, length] (float32 or float64, C-contiguous, finite).
forget_gate_bias fox_from_log_forget(const array& a) {
  if (a.ndim() != 2) throw input_error(fmt::format("log_forget: must be [heads, length] (got {} dimensions)", a.ndim()));
  if (!c_contiguous(a)) throw input_error("log_forget: must be C-contiguous");
  const bool f64 = a.dtype() == nb::dtype<double>();
  if (!f64 && a.dtype() != nb::dtype<float>()) throw input_error("log_forget: dtype must be float32 or float64");
  forget_gate_bias b{static_cast<int>(a.shape(0)), static_cast<std::int64_t>(a.shape(1)), {}};
  if (b.num_heads < 1) throw input_error("log_forget: must hold at least one head");
  b.prefix.resize(static_cast<std::size_t>(b.num_heads) * (b.length + 1));
  for (int h = 0; h < b.num_heads; ++h) {
    double sum = 0;
    for (std::int64_t l = 0; l < b.length; ++l) {
      const std::int64_t i = h * b.length + l;
      const double x = f64 ? static_cast<const double*>(a.data())[i] : static_cast<const float*>(a.data())[i];
      if (!std::isfinite(x)) throw input_error(fmt::format("log_forget[{}, {}]: must be finite (got {})", h, l, x));
      b.prefix[h * (b.length + 1) + l + 1] = sum += x;
    }
  }
  return b;
}

void require_head_dim(const rotary_spec& s, int head_dim) {
  if (s.head_dim != head_dim)
    throw input_error(fmt::format("q: last dimension must be the encoding's head_dim {} (got {})", s.head_dim, head_dim));
}

/// The kernel instance of a rotary encoding on one position axis, passed to body.
template <class Body>
void with_one_axis_rotary(const rotary_encoding& e, int head_dim, Body&& body) {
  const rotary_spec& s = e.spec;
  if (s.num_axes != 1) throw input_error("encoding: a (RotaryEncoding, AlibiEncoding) pair takes a rotation on one position axis");
  require_head_dim(s, head_dim);
  if (s.layout == layout_kind::half_split) return body(rotary_table<layout_kind::half_split>::make(s));
  body(rotary_table<layout_kind::interleaved>::make(s));
}

/// The kernel instance of a rotary encoding, passed to body: on one position axis its table's, with
/// M-RoPE's three sections (with_sections, a Qwen2-VL config) the mrope built-in's instance over
/// this encoding's own table and attention factor.
template <class Body>
void with_rotary(const rotary_encoding& e, int head_dim, Body&& body) {
  const rotary_spec& s = e.spec;
  if (s.num_axes == 1) return with_one_axis_rotary(e, head_dim, body);
  if (s.num_axes != 3 || s.layout != layout_kind::half_split || s.rotary_dim != s.head_dim)
    throw input_error(fmt::format("encoding: attention takes a rotary encoding on one position axis or M-RoPE's "
                                  "three (half-split, every channel rotated; got {} axes)", s.num_axes));
  require_head_dim(s, head_dim);
  body(mrope::instance{rotation_planes<3>::from_sections(s.inv_freq, s.plane_axis), s.head_dim, s.attention_factor});
}

alibi::instance alibi_instance(const alibi_encoding& e, int head_dim) {
  for (std::size_t h = 0; h < e.slopes.size(); ++h)
    if (!std::isfinite(e.slopes[h])) throw input_error(fmt::format("slopes[{}]: must be finite", h));
  return {alibi_bias{e.slopes}, head_dim};
}

/// The encoding-defining arrays of a call that are not an encoding object: FoX's log forget gates,
/// GRAPE-A's (omega, key_gate, query_gate or None), GRAPE-AP's (projections, norm_eps), contextual
/// GRAPE-M's (freqs, phases).
struct encoding_arrays {
  std::optional<array> log_forget;
  std::optional<nb::tuple> grape_a, grape_ap, grape_m;

  bool any() const { return log_forget || grape_a || grape_ap || grape_m; }
};

/// These arrays hold one entry per position (gates, projections, phases), indexed by position: a
/// call whose tokens reach position end - 1 needs length >= end. Checked here, where the argument
/// has its name, instead of by the kernel at the first logit outside.
void require_length(const char* name, const char* shape, std::int64_t length, std::int64_t end) {
  if (length < end)
    throw input_error(fmt::format("{}: must be {} with length >= {}, a value for every position 0..{} the call "
                                  "reaches (got length {})",
                                  name, shape, end, end - 1, length));
}

/// One past the largest position the call's tokens reach (ids, offsets or index; 0 without tokens).
std::int64_t positions_end(const cpu::qk_args& qk) {
  const auto pos = cpu::detail::positions_of(qk, cpu::detail::sequences_of(qk));
  return pos.empty() ? 0 : *std::max_element(pos.begin(), pos.end()) + 1;
}

/// ... of the queries and, on tokens of their own, the keys.
std::int64_t positions_end(const cpu::attention_args& a) {
  if (!a.keys) return positions_end(a.qk);
  return std::max(positions_end(a.qk), positions_end(cpu::detail::key_args(a)));
}

/// The arrays of a two-item tuple argument `name` (first, second).
std::pair<nb::handle, nb::handle> pair_of(const nb::tuple& t, const char* name, const char* items) {
  if (nb::len(t) != 2) throw input_error(fmt::format("{}: must be ({})", name, items));
  return {t[0], t[1]};
}

/// Calls body(instance) with the kernel instance of the encoding: None, a RotaryEncoding, an
/// AlibiEncoding, a T5Encoding with its table, a (RotaryEncoding, AlibiEncoding) pair, FoX's log
/// forget gates, GRAPE-A's gated bias, GRAPE-AP's path integral or contextual GRAPE-M.
/// positions_end: one past the largest position of the call (for the per-position arrays).
template <class Body>
void with_instance(const nb::handle& encoding, const encoding_arrays& arrays, int head_dim,
                   std::int64_t positions_end, Body&& body) {
  std::vector<const char*> given;
  for (const auto& [name, is_given] : {std::pair{"log_forget", arrays.log_forget.has_value()},
                                       std::pair{"grape_a", arrays.grape_a.has_value()},
                                       std::pair{"grape_ap", arrays.grape_ap.has_value()},
                                       std::pair{"grape_m", arrays.grape_m.has_value()}})
    if (is_given) given.push_back(name);
  if (given.size() > 1) throw input_error("log_forget, grape_a, grape_ap, grape_m: give one");
  if (!given.empty() && !encoding.is_none())
    throw input_error(fmt::format("encoding, {}: give one ({} is the encoding)", given[0], given[0]));
  if (const auto& t = arrays.grape_ap) {
    const auto [projections, eps] = pair_of(*t, "grape_ap", "projections, norm_eps");
    path_integral_bias b = path_integral_of(nb::cast<array>(projections), nb::cast<double>(eps));
    require_length("projections", "[heads, length, P]", b.length, positions_end);
    return body(bias_instance<path_integral_bias>{std::move(b), head_dim});
  }
  if (const auto& t = arrays.grape_m) {
    const auto [freqs, phases] = pair_of(*t, "grape_m", "freqs, phases");
    const phase_rotation r = phase_rotation_of(nb::cast<array>(freqs), nb::cast<array>(phases), head_dim);
    require_length("phases", "[rows, length]", r.length, positions_end);
    return body(r);
  }
  if (arrays.log_forget) {
    forget_gate_bias b = fox_from_log_forget(*arrays.log_forget);
    require_length("log_forget", "[heads, length]", b.length, positions_end);
    return body(fox::instance{std::move(b), head_dim});
  }
  if (const auto& t = arrays.grape_a) {
    if (nb::len(*t) != 3) throw input_error("grape_a: must be (omega, key_gate, query_gate or None)");
    const auto query = (*t)[2].is_none() ? std::nullopt : std::optional<array>(nb::cast<array>((*t)[2]));
    gated_linear_bias b = gated_bias_of(nb::cast<array>((*t)[0]), nb::cast<array>((*t)[1]), query);
    require_length(query ? "key_gate, query_gate" : "key_gate", "[heads, length]", b.length, positions_end);
    return body(bias_instance<gated_linear_bias>{std::move(b), head_dim});
  }
  if (encoding.is_none()) return body(cpu::no_encoding{head_dim});
  if (nb::isinstance<rotary_encoding>(encoding))
    return with_rotary(nb::cast<const rotary_encoding&>(encoding), head_dim, body);
  if (nb::isinstance<alibi_encoding>(encoding)) return body(alibi_instance(nb::cast<const alibi_encoding&>(encoding), head_dim));
  if (nb::isinstance<t5_encoding>(encoding)) {
    const auto& e = nb::cast<const t5_encoding&>(encoding);
    if (e.table.empty())
      throw input_error("encoding: this T5Encoding has no table (a config holds none): build one with grape.t5(table, ...)");
    return body(t5_buckets::instance{t5_bias{e.heads, e.num_buckets, e.max_distance, e.bidirectional, e.table}, head_dim});
  }
  if (nb::isinstance<nb::tuple>(encoding) && nb::len(encoding) == 2 && nb::isinstance<rotary_encoding>(encoding[0]) &&
      nb::isinstance<alibi_encoding>(encoding[1])) {
    const alibi::instance bias = alibi_instance(nb::cast<const alibi_encoding&>(encoding[1]), head_dim);
    return with_one_axis_rotary(nb::cast<const rotary_encoding&>(encoding[0]), head_dim,
                                [&](const auto& rotation) { body(composed_instance{rotation, bias}); });
  }
  throw input_error("encoding: attention takes None, a RotaryEncoding, an AlibiEncoding, a T5Encoding with its table, "
                    "a (RotaryEncoding, AlibiEncoding) pair, a grape.encoding(...) object, log_forget for FoX, "
                    "grape_a for gated GRAPE-A, grape_ap for GRAPE-AP or grape_m for contextual GRAPE-M");
}

/// A grape.encoding(...) object given as the encoding (then no encoding arrays), or null.
const builtin_encoding* builtin_of(const nb::handle& encoding, const encoding_arrays& arrays) {
  if (!nb::isinstance<builtin_encoding>(encoding)) return nullptr;
  if (arrays.log_forget || arrays.grape_a || arrays.grape_ap || arrays.grape_m)
    throw input_error("encoding, log_forget, grape_a, grape_ap, grape_m: give one");
  const auto& b = nb::cast<const builtin_encoding&>(encoding);
  if (!b.attention)
    throw input_error(fmt::format("encoding: {} enters as '{}', added to the input before attention", b.name,
                                  b.injection));
  return &b;
}

/// The position axes of the call's positions: a built-in's or a rotary encoding's (M-RoPE: 3), else 1.
int position_axes(const nb::handle& encoding) {
  if (nb::isinstance<builtin_encoding>(encoding)) return nb::cast<const builtin_encoding&>(encoding).num_axes;
  if (nb::isinstance<rotary_encoding>(encoding)) return nb::cast<const rotary_encoding&>(encoding).spec.num_axes;
  return 1;
}

/// K's and V's own tokens (key_positions, key_offsets or key_cu_seqlens given), or none of them.
struct key_arrays {
  optional_array positions, offsets, cu_seqlens;
  bool any() const { return positions || offsets || cu_seqlens; }
};

/// The arrays of a call and the options as cpu::attention_args (the output and lse checked), K and
/// V on tokens of their own when `keys` has any of its arrays (args.keys points into this object).
struct attention_arrays {
  cpu::attention_args args;
  cpu::key_tokens keys;

  attention_arrays(const array& q, const array& k, const array& v, const array& out, const array& lse,
                 const optional_array& positions, const optional_array& offsets, const optional_array& cu_seqlens,
                 const key_arrays& key, std::optional<std::int64_t> max_position, bool causal, std::int64_t window,
                 float scale, int threads, int num_axes);
  attention_arrays(const attention_arrays&) = delete;
  attention_arrays& operator=(const attention_arrays&) = delete;
};

attention_arrays::attention_arrays(const array& q, const array& k, const array& v, const array& out, const array& lse,
                               const optional_array& positions, const optional_array& offsets,
                               const optional_array& cu_seqlens, const key_arrays& key,
                               std::optional<std::int64_t> max_position, bool causal, std::int64_t window,
                               float scale, int threads, int num_axes) {
  const qk_shape qs = qk_shape_of(q, "q"), ks = qk_shape_of(k, "k"), vs = qk_shape_of(v, "v");
  cpu::attention_args& a = args;
  const int d = static_cast<int>(qs.dim);
  if (!key.any()) {
    a.qk = make_qk_args(d, num_axes, {q, std::nullopt, k, std::nullopt}, positions, offsets, cu_seqlens,
                        max_position, threads);
  } else {  // K and V on tokens of their own
    a.qk = make_qk_args(d, num_axes, {q, std::nullopt, std::nullopt, std::nullopt}, positions, offsets, cu_seqlens,
                        max_position, threads);
    const cpu::rotate_qk_args ka = make_qk_args(d, num_axes, {std::nullopt, std::nullopt, k, std::nullopt},
                                                key.positions, key.offsets, key.cu_seqlens, max_position, threads,
                                                "key_");
    if (ka.type != a.qk.type) throw input_error("k: dtype must match q's");
    if (ka.batch != a.qk.batch)
      throw input_error(fmt::format("k: must hold q's {} sequences (got {})", a.qk.batch, ka.batch));
    if (ka.position_ids && a.qk.position_ids && ka.position_type != a.qk.position_type)
      throw input_error("key_positions: must have the integer type of positions");
    if (ka.position_ids) a.qk.position_type = ka.position_type;
    a.qk.k = ka.k;
    keys = {ka.seq_len, ka.cu_seqlens, ka.position_ids, ka.offsets};
    a.keys = &keys;
  }
  const qk_shape& tokens_of_v = key.any() ? ks : qs;
  if (vs.batch != tokens_of_v.batch || vs.seq != tokens_of_v.seq)
    throw input_error(fmt::format("v: batch and sequence extents must match {}'s ({} x {} vs {} x {})",
                                  key.any() ? "k" : "q", vs.batch, vs.seq, tokens_of_v.batch, tokens_of_v.seq));
  if (storage_type(v, "v") != a.qk.type) throw input_error("v: dtype must match q's");
  a.v = {v.data(), nullptr, vs.heads, vs.span, vs.batch_stride, vs.token_stride, vs.head_stride};
  a.v_dim = static_cast<int>(vs.dim);
  const std::int64_t tokens = qs.batch * qs.seq;
  if (!c_contiguous(out) || storage_type(out, "out") != a.qk.type ||
      static_cast<std::int64_t>(out.size()) != tokens * qs.heads * vs.dim)
    throw input_error(fmt::format("out: must be C-contiguous, of q's dtype, with {} x {} x {} values", tokens, qs.heads,
                                  vs.dim));
  a.out = out.data();
  a.lse = const_cast<float*>(float32_values(lse, qs.heads * tokens, "lse"));
  a.causal = causal;
  a.window = window;
  if (!(scale >= 0) || !std::isfinite(scale)) throw input_error("scale: must be finite and > 0 (or None)");
  a.scale = scale;
}

/// The decode call's arrays as cpu::decode_args: q [batch, heads, d] and out C-contiguous, the
/// caches as rotate_qk's KV write takes them, block_table int32 [batch, max_blocks].
cpu::decode_args make_decode_args(const array& q, const array& k_cache, const array& v_cache, const std::string& layout,
                                  const array& block_table, const array& seq_lens, const optional_array& q_positions,
                                  const array& out, const optional_array& lse, std::optional<std::int64_t> max_position,
                                  std::int64_t window, float scale, int threads) {
  if (layout != "NHD" && layout != "HND") throw input_error(fmt::format("layout: must be 'NHD' or 'HND' (got '{}')", layout));
  if (q.ndim() != 3 || !c_contiguous(q)) throw input_error("q: must be a C-contiguous [batch, heads, head_dim] array");
  cpu::decode_args a;
  a.type = storage_type(q, "q");
  a.q = q.data();
  a.batch = static_cast<std::int64_t>(q.shape(0));
  a.q_heads = static_cast<std::int64_t>(q.shape(1));
  const cache_shape k = cache_of(k_cache, layout == "HND", "k_cache"), v = cache_of(v_cache, layout == "HND", "v_cache");
  if (storage_type(k_cache, "k_cache") != a.type || storage_type(v_cache, "v_cache") != a.type)
    throw input_error("k_cache, v_cache: dtype must match q's");
  if (k.dim != static_cast<std::int64_t>(q.shape(2)))
    throw input_error(fmt::format("k_cache: head_dim {} differs from q's {}", k.dim, q.shape(2)));
  if (v.blocks != k.blocks || v.block_size != k.block_size || v.heads != k.heads)
    throw input_error("v_cache: must have the K cache's blocks, block size and heads");
  a.kv_heads = k.heads;
  a.k = k.tensor;
  a.v = v.tensor;
  a.v_dim = static_cast<int>(v.dim);
  a.blocks = k.blocks;
  a.block_size = k.block_size;
  if (block_table.dtype() != nb::dtype<std::int32_t>() || block_table.ndim() != 2 || !c_contiguous(block_table) ||
      static_cast<std::int64_t>(block_table.shape(0)) != a.batch)
    throw input_error(fmt::format("block_table: must be a C-contiguous int32 [batch = {}, max_blocks] array", a.batch));
  a.block_table = static_cast<const std::int32_t*>(block_table.data());
  a.max_blocks = static_cast<std::int64_t>(block_table.shape(1));
  a.seq_lens = int64_values(seq_lens, a.batch, "seq_lens");
  if (q_positions) a.q_positions = int64_values(*q_positions, a.batch, "q_positions");
  if (max_position) a.max_position = *max_position;
  if (!c_contiguous(out) || storage_type(out, "out") != a.type ||
      static_cast<std::int64_t>(out.size()) != a.batch * a.q_heads * v.dim)
    throw input_error("out: must be C-contiguous, of q's dtype, [batch, heads, v's head_dim]");
  a.out = out.data();
  if (lse) a.lse = const_cast<float*>(float32_values(*lse, a.q_heads * a.batch, "lse"));
  a.window = window;
  if (!(scale >= 0) || !std::isfinite(scale)) throw input_error("scale: must be finite and > 0 (or None)");
  a.scale = scale;
  a.threads = threads;
  return a;
}

/// A C-contiguous array of `like`'s dtype with `count` values, for a gradient.
void* gradient_of(const array& g, const array& like, std::int64_t count, const char* name) {
  if (!c_contiguous(g) || g.dtype() != like.dtype() || static_cast<std::int64_t>(g.size()) != count)
    throw input_error(fmt::format("{}: must be C-contiguous, of q's dtype, with {} values", name, count));
  return g.data();
}

}  // namespace

void bind_attention(nb::module_& m) {
  // The attention products' matrix instructions (cpu/matmul_path.hpp): what the CPU has, what a
  // storage type gets, and the process-wide switch.
  m.def("_cpu_matmul_units", [] {
    const cpu::matmul_units u = cpu::cpu_matmul_units();
    nb::dict d;
    d["avx512_bf16"] = u.avx512_bf16;
    d["amx_bf16"] = u.amx_bf16;
    d["avx512_fp16"] = u.avx512_fp16;
    return d;
  });
  m.def("_set_matmul_path", [](const std::string& name) {
    if (name == "auto") cpu::set_matmul_path(cpu::matmul_path::automatic);
    else if (name == "f32") cpu::set_matmul_path(cpu::matmul_path::f32);
    else if (name == "avx512bf16") cpu::set_matmul_path(cpu::matmul_path::avx512_bf16);
    else throw input_error("matmul path must be auto, f32 or avx512bf16 (got \"" + name + "\")");
    set_loaded_matmul_paths(cpu::requested_matmul_path());  // grape.load_encoding's libraries too
  });
  m.def("_matmul_path", [](const std::string& storage) {
    const cpu::dtype t = storage == "float32" ? cpu::dtype::f32
                         : storage == "float16" ? cpu::dtype::f16
                         : storage == "bfloat16" ? cpu::dtype::bf16
                                                 : throw input_error("storage must be float32, float16 or bfloat16");
    return std::string(cpu::matmul_path_name(cpu::matmul_path_for(t)));
  });
  m.def("_attention",
        [](nb::handle encoding, std::optional<array> log_forget, std::optional<nb::tuple> grape_a,
           std::optional<nb::tuple> grape_ap, std::optional<nb::tuple> grape_m, array q, array k, array v, array out,
           array lse, optional_array positions, optional_array offsets, optional_array cu_seqlens,
           optional_array key_positions, optional_array key_offsets, optional_array key_cu_seqlens,
           std::optional<std::int64_t> max_position, bool causal, std::int64_t window, float scale, int threads) {
          const attention_arrays call(q, k, v, out, lse, positions, offsets, cu_seqlens,
                                    {key_positions, key_offsets, key_cu_seqlens}, max_position, causal, window, scale,
                                    threads, position_axes(encoding));
          const cpu::attention_args& a = call.args;
          const encoding_arrays arrays{log_forget, grape_a, grape_ap, grape_m};
          if (const builtin_encoding* b = builtin_of(encoding, arrays)) {
            if (no_tokens(a.qk)) return;
            nb::gil_scoped_release release;
            return b->attention(a);
          }
          const int head_dim = static_cast<int>(q.shape(q.ndim() - 1));
          with_instance(encoding, arrays, head_dim, arrays.any() ? positions_end(a) : 0, [&](const auto& inst) {
            if (no_tokens(a.qk)) return;  // checked, and nothing to compute
            nb::gil_scoped_release release;
            run_attention(inst, a);
          });
        },
        "encoding"_a.none(), "log_forget"_a.none(), "grape_a"_a.none(), "grape_ap"_a.none(), "grape_m"_a.none(), "q"_a, "k"_a, "v"_a, "out"_a, "lse"_a,
        "positions"_a.none(), "offsets"_a.none(), "cu_seqlens"_a.none(), "key_positions"_a.none(),
        "key_offsets"_a.none(), "key_cu_seqlens"_a.none(), "max_position"_a.none(), "causal"_a, "window"_a, "scale"_a,
        "threads"_a);

  m.def("_attention_decode",
        [](nb::handle encoding, std::optional<array> log_forget, std::optional<nb::tuple> grape_a,
           std::optional<nb::tuple> grape_ap, std::optional<nb::tuple> grape_m, array q, array k_cache, array v_cache,
           const std::string& layout, array block_table, array seq_lens, optional_array q_positions, array out,
           optional_array lse, std::optional<std::int64_t> max_position, std::int64_t window, float scale,
           int threads) {
          const auto a = make_decode_args(q, k_cache, v_cache, layout, block_table, seq_lens, q_positions, out, lse,
                                          max_position, window, scale, threads);
          const encoding_arrays arrays{log_forget, grape_a, grape_ap, grape_m};
          const builtin_encoding* b = builtin_of(encoding, arrays);
          if (b && !b->attention_decode)
            throw input_error(fmt::format("encoding: {} lifts Q and K; decode would need lifted keys in the cache",
                                          b->name));
          if (const int axes = position_axes(encoding); axes != 1)  // a built-in's or M-RoPE's sections
            throw input_error(fmt::format("encoding: {} turns its planes on {} position axes; decode takes one "
                                          "position per query",
                                          b ? b->name : std::string("this RotaryEncoding"), axes));
          if (b) {
            nb::gil_scoped_release release;
            return b->attention_decode(a);
          }
          std::int64_t end = 0;  // keys at 0..seq_lens[b] - 1, the query at q_positions[b]
          for (std::int64_t b = 0; arrays.any() && b < a.batch; ++b)
            end = std::max({end, a.seq_lens[b], a.q_positions ? a.q_positions[b] + 1 : 0});
          with_instance(encoding, arrays, static_cast<int>(q.shape(2)), end,
                        [&](const auto& inst) {
            nb::gil_scoped_release release;
            run_attention_decode(inst, a);
          });
        },
        "encoding"_a.none(), "log_forget"_a.none(), "grape_a"_a.none(), "grape_ap"_a.none(), "grape_m"_a.none(),
        "q"_a, "k_cache"_a, "v_cache"_a, "layout"_a,
        "block_table"_a,
        "seq_lens"_a, "q_positions"_a.none(), "out"_a, "lse"_a.none(), "max_position"_a.none(), "window"_a,
        "scale"_a, "threads"_a);

  m.def("_attention_backward",
        [](nb::handle encoding, std::optional<array> log_forget, std::optional<nb::tuple> grape_a,
           std::optional<nb::tuple> grape_ap, std::optional<nb::tuple> grape_m, array q, array k, array v, array out,
           array lse, array grad_out, array grad_q, array grad_k, array grad_v, optional_array positions, optional_array offsets,
           optional_array cu_seqlens, optional_array key_positions, optional_array key_offsets,
           optional_array key_cu_seqlens, std::optional<std::int64_t> max_position, bool causal, std::int64_t window,
           float scale, int threads, bool bias_grad, bool inv_freq_grad) {
          const attention_arrays call(q, k, v, out, lse, positions, offsets, cu_seqlens,
                                    {key_positions, key_offsets, key_cu_seqlens}, max_position, causal, window, scale,
                                    threads, position_axes(encoding));
          const cpu::attention_args& a = call.args;
          cpu::attention_grad_args g;
          g.grad_out = gradient_of(grad_out, q, static_cast<std::int64_t>(out.size()), "grad_out");
          g.grad_q = gradient_of(grad_q, q, static_cast<std::int64_t>(q.size()), "grad_q");
          g.grad_k = gradient_of(grad_k, q, static_cast<std::int64_t>(k.size()), "grad_k");
          g.grad_v = gradient_of(grad_v, q, static_cast<std::int64_t>(v.size()), "grad_v");
          std::pair<std::optional<std::vector<double>>, std::optional<std::vector<double>>> params;
          const encoding_arrays arrays{log_forget, grape_a, grape_ap, grape_m};
          if (const builtin_encoding* b = builtin_of(encoding, arrays)) {
            if ((inv_freq_grad && b->frequencies.empty()) || (bias_grad && b->bias_parameters.empty()))
              throw input_error(fmt::format("{}: for {} the backward gives dq, dk and dv{}{}",
                                            bias_grad && b->bias_parameters.empty() ? "bias_grad" : "inv_freq_grad",
                                            b->name,
                                            b->bias_parameters.empty() ? "" : ", its bias parameters' gradient",
                                            b->frequencies.empty() ? "" : ", its frequencies' gradient"));
            std::vector<double> bias(bias_grad ? b->bias_parameters.size() : 0);
            std::vector<double> freq(inv_freq_grad ? b->frequencies.size() : 0);
            g.grad_bias = bias_grad ? bias.data() : nullptr;
            g.grad_inv_freq = inv_freq_grad ? freq.data() : nullptr;
            if (!no_tokens(a.qk)) {
              nb::gil_scoped_release release;
              b->attention_backward(a, g);
            }
            if (bias_grad) params.first = std::move(bias);
            if (inv_freq_grad) params.second = std::move(freq);
            return params;
          }
          const int head_dim = static_cast<int>(q.shape(q.ndim() - 1));
          with_instance(encoding, arrays, head_dim, arrays.any() ? positions_end(a) : 0, [&](const auto& inst) {
            using I = std::remove_cvref_t<decltype(inst)>;
            std::vector<double> bias, freq;  // bias: the bias's parameters, or contextual GRAPE-M's phases
            if constexpr (cpu::detail::gives_gradient<decltype(cpu::bias_part(inst))>::value)
              if (bias_grad) bias.resize(cpu::bias_part(inst)->parameter_count());
            if constexpr (rotates_qk_part<I>)
              if (inv_freq_grad) freq.resize(static_cast<std::size_t>(rotation_part(inst).rep.dim() / 2));
            if constexpr (cpu::rotates_by_phase<I>) {
              if (bias_grad) bias.resize(inst.phases.size());
              if (inv_freq_grad) freq.resize(inst.freqs.size());
            }
            if (bias_grad && bias.empty()) throw input_error("bias_grad: this encoding has no bias parameters or phases");
            if (inv_freq_grad && freq.empty()) throw input_error("inv_freq_grad: this encoding has no frequencies");
            g.grad_bias = bias_grad && !cpu::rotates_by_phase<I> ? bias.data() : nullptr;
            g.grad_phases = bias_grad && cpu::rotates_by_phase<I> ? bias.data() : nullptr;
            g.grad_inv_freq = inv_freq_grad ? freq.data() : nullptr;
            if (!no_tokens(a.qk)) {  // without tokens every gradient is 0
              nb::gil_scoped_release release;
              run_attention_backward(inst, a, g);
            }
            if (bias_grad) params.first = std::move(bias);
            if (inv_freq_grad) params.second = std::move(freq);
          });
          return params;
        },
        "encoding"_a.none(), "log_forget"_a.none(), "grape_a"_a.none(), "grape_ap"_a.none(), "grape_m"_a.none(), "q"_a,
        "k"_a, "v"_a, "out"_a, "lse"_a, "grad_out"_a, "grad_q"_a,
        "grad_k"_a, "grad_v"_a, "positions"_a.none(), "offsets"_a.none(), "cu_seqlens"_a.none(),
        "key_positions"_a.none(), "key_offsets"_a.none(), "key_cu_seqlens"_a.none(), "max_position"_a.none(),
        "causal"_a, "window"_a, "scale"_a, "threads"_a, "bias_grad"_a, "inv_freq_grad"_a);
}

}  // namespace grape::python
