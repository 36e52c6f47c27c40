// grape.rope / grape.rotary / grape.from_config and the encoding classes they return.
#include "encodings.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cmath>
#include <optional>

#include "grape/detail/error.hpp"
#include "grape/detail/validate.hpp"
#include "grape/encodings/alibi.hpp"
#include "grape/schedule/spec_check.hpp"
#include "model/model_config.hpp"

namespace grape::python {

namespace nb = nanobind;
using namespace nb::literals;

layout_kind layout_from(const std::string& name) {
  if (name == "half_split") return layout_kind::half_split;
  if (name == "interleaved") return layout_kind::interleaved;
  throw input_error(fmt::format("layout: must be 'half_split' or 'interleaved' (got '{}')", name));
}

namespace {

/// A float64 NumPy array that owns a copy of `values`.
nb::ndarray<nb::numpy, double, nb::ndim<1>> numpy_copy(const std::vector<double>& values) {
  auto* data = new std::vector<double>(values);
  nb::capsule owner(data, [](void* p) noexcept { delete static_cast<std::vector<double>*>(p); });
  return nb::ndarray<nb::numpy, double, nb::ndim<1>>(data->data(), {data->size()}, owner);
}

void require_table(const rotary_spec& s) {
  if (s.rotary_dim <= 0 || s.rotary_dim % 2 != 0 || s.rotary_dim > s.head_dim)
    throw input_error(fmt::format("rotary_dim: must be even, positive and <= head_dim {} (got {})", s.head_dim,
                                  s.rotary_dim));
  if (static_cast<int>(s.inv_freq.size()) != s.rotary_dim / 2)
    throw input_error(fmt::format("inv_freq: must hold rotary_dim / 2 = {} values (got {})", s.rotary_dim / 2,
                                  s.inv_freq.size()));
  for (double f : s.inv_freq)
    if (!std::isfinite(f)) throw input_error("inv_freq: every value must be finite");
  if (!std::isfinite(s.attention_factor) || s.attention_factor <= 0)
    throw input_error(fmt::format("attention_factor: must be finite and > 0 (got {})", s.attention_factor));
}

rotary_encoding make_rope(int head_dim, double base, std::optional<int> rotary_dim, const std::string& layout,
                          double attention_factor) {
  if (!(base > 1.0) || !std::isfinite(base)) throw input_error(fmt::format("base: must be > 1 (got {})", base));
  rotary_encoding e;
  e.spec.head_dim = head_dim;
  e.spec.rotary_dim = rotary_dim.value_or(head_dim);
  e.spec.layout = layout_from(layout);
  e.spec.attention_factor = attention_factor;
  if (e.spec.rotary_dim > 0 && e.spec.rotary_dim % 2 == 0) e.spec.inv_freq = rope_inv_freq(e.spec.rotary_dim, base);
  require_table(e.spec);
  e.label = fmt::format("rope(head_dim={}, base={}, rotary_dim={}, layout={})", head_dim, base, e.spec.rotary_dim,
                        layout);
  e.schedule = "default RoPE table 1 / base^(2i/d), float64";
  return e;
}

/// A table for head_dim channels rotates all of them unless rotary_dim asks for fewer (partial
/// rotary): a table of another length is refused, not read as a partial rotary.
rotary_encoding make_rotary(std::vector<double> inv_freq, std::optional<int> head_dim, std::optional<int> rotary_dim,
                            const std::string& layout, double attention_factor) {
  rotary_encoding e;
  e.spec.head_dim = head_dim.value_or(static_cast<int>(2 * inv_freq.size()));
  e.spec.rotary_dim = rotary_dim.value_or(e.spec.head_dim);
  e.spec.layout = layout_from(layout);
  e.spec.attention_factor = attention_factor;
  e.spec.inv_freq = std::move(inv_freq);
  require_table(e.spec);
  e.label = fmt::format("rotary(inv_freq[{}], head_dim={}, layout={})", e.spec.inv_freq.size(), e.spec.head_dim,
                        layout);
  e.schedule = "explicit frequency table";
  return e;
}

nb::object from_model(const model::model_description& d, std::optional<std::int64_t> seq_len,
                      const std::string& precision) {
  frequency_precision p;
  if (precision == "float64")
    p = frequency_precision::float64;
  else if (precision == "float32_reference")
    p = frequency_precision::float32_reference;
  else
    throw input_error(fmt::format("precision: must be 'float64' or 'float32_reference' (got '{}')", precision));
  switch (d.kind) {
    case model::encoding_kind::rotary: {
      const auto r = model::evaluate_rotary(d, seq_len, p);
      rotary_encoding e{r.spec, d.file, ""};
      e.schedule = fmt::format("{} schedule (from {}), table at seq_len {} in {}{}",
                               to_string(d.rotary.schedule.type),
                               d.rotary.source.empty() ? "no schedule field" : d.rotary.source, r.table.seq_len,
                               to_string(r.table.precision), r.table.scaled ? ", scaled" : "");
      return nb::cast(std::move(e));
    }
    case model::encoding_kind::alibi: return nb::cast(alibi_encoding{d.alibi.slopes, d.file});
    case model::encoding_kind::t5:
      return nb::cast(t5_encoding{d.t5.num_buckets, d.t5.max_distance, !d.t5.is_decoder, d.file, 0, {}});
  }
  throw input_error("unknown encoding kind");
}

/// A T5 encoding with this table ([num_buckets, heads] flattened), checked as t5_buckets checks
/// its parameters.
t5_encoding with_t5_table(const t5_encoding& e, std::vector<double> table, int heads) {
  if (heads < 1 || table.size() != static_cast<std::size_t>(e.num_buckets) * static_cast<std::size_t>(heads))
    throw input_error(fmt::format("table: must hold num_buckets * heads = {} * {} values (got {})", e.num_buckets,
                                  heads, table.size()));
  grape::detail::require_count("num_buckets", e.num_buckets, e.bidirectional ? 4 : 2);
  grape::detail::require_count("max_distance", e.max_distance, e.num_buckets);
  for (std::size_t i = 0; i < table.size(); ++i) grape::detail::require_finite_at("table", i, table[i]);
  t5_encoding r = e;
  r.heads = heads;
  r.table = std::move(table);
  return r;
}

/// The same table with its planes in consecutive sections, section k turning with position axis k
/// (M-RoPE: (t, h, w) = (16, 24, 24) of 64 planes); one section is the 1-D encoding.
rotary_encoding with_sections(const rotary_encoding& e, const std::vector<int>& sections) {
  if (sections.empty() || static_cast<int>(sections.size()) > max_position_axes)
    throw input_error(fmt::format("sections: must list 1 to {} plane counts, one per position axis (got {})",
                                  max_position_axes, sections.size()));
  std::vector<int> axis;
  for (std::size_t k = 0; k < sections.size(); ++k) {
    if (sections[k] < 0 || sections[k] > e.spec.rotary_dim / 2)
      throw input_error(fmt::format("sections[{}]: must be in [0, {}] (got {})", k, e.spec.rotary_dim / 2, sections[k]));
    axis.insert(axis.end(), static_cast<std::size_t>(sections[k]), static_cast<int>(k));
  }
  if (static_cast<int>(axis.size()) != e.spec.rotary_dim / 2)
    throw input_error(fmt::format("sections: must add up to rotary_dim / 2 = {} planes (got {})", e.spec.rotary_dim / 2,
                                  axis.size()));
  rotary_encoding r = e;
  r.spec.num_axes = static_cast<int>(sections.size());
  r.spec.plane_axis = sections.size() == 1 ? std::vector<int>{} : std::move(axis);
  return r;
}

/// The plane count per position axis ({rotary_dim / 2} for a 1-D encoding).
std::vector<int> sections_of(const rotary_encoding& e) {
  std::vector<int> counts(static_cast<std::size_t>(e.spec.num_axes), 0);
  if (e.spec.plane_axis.empty()) counts[0] = e.spec.rotary_dim / 2;
  for (int a : e.spec.plane_axis) ++counts[static_cast<std::size_t>(a)];
  return counts;
}

std::string describe(const rotary_encoding& e) {
  const std::string axes =
      e.spec.num_axes == 1 ? "" : fmt::format(", planes in sections {} of {} position axes", fmt::join(sections_of(e), "/"),
                                              e.spec.num_axes);
  return fmt::format("{}: rotary, {} of {} channels rotated ({} layout), attention_factor {}, {}{}", e.label,
                     e.spec.rotary_dim, e.spec.head_dim, math::layout_name(e.spec.layout), e.spec.attention_factor,
                     e.schedule, axes);
}

}  // namespace

void bind_encodings(nb::module_& m) {
  nb::class_<rotary_encoding>(m, "RotaryEncoding",
                              "A rotary encoding's kernel parameters: plane i turns by position * inv_freq[i].")
      .def_prop_ro("inv_freq", [](const rotary_encoding& e) { return numpy_copy(e.spec.inv_freq); },
                   nb::rv_policy::automatic, "theta_i in radians per position (float64, rotary_dim / 2 values)")
      .def_prop_ro("attention_factor", [](const rotary_encoding& e) { return e.spec.attention_factor; },
                   "multiplies cos and sin (YaRN, LongRoPE)")
      .def_prop_ro("layout", [](const rotary_encoding& e) { return std::string(math::layout_name(e.spec.layout)); },
                   "'half_split' (plane i = channels i, i + d/2) or 'interleaved' (2i, 2i + 1)")
      .def_prop_ro("rotary_dim", [](const rotary_encoding& e) { return e.spec.rotary_dim; })
      .def_prop_ro("head_dim", [](const rotary_encoding& e) { return e.spec.head_dim; })
      .def_prop_ro("num_axes", [](const rotary_encoding& e) { return e.spec.num_axes; },
                   "position axes: 1, or the number of sections (M-RoPE: 3, positions (t, h, w))")
      .def_prop_ro("sections", &sections_of, "planes per position axis, in order")
      .def("with_sections", &with_sections, "sections"_a,
           "The same table with its planes in consecutive sections, section k turning with position axis k: "
           "M-RoPE's mrope_section (t, h, w). rotate_qk then takes positions [num_axes, tokens].")
      .def("with_inv_freq",
           [](const rotary_encoding& e, std::vector<double> inv_freq) {
             rotary_encoding r = e;
             r.spec.inv_freq = std::move(inv_freq);
             require_table(r.spec);
             r.schedule = "explicit frequency table";
             return r;
           },
           "inv_freq"_a, "The same encoding with another frequency table (e.g. learned frequencies).")
      .def("describe", &describe)
      .def("__repr__", &describe);

  nb::class_<alibi_encoding>(m, "AlibiEncoding", "ALiBi: bias -slope_h * |i - j| per head.")
      .def_prop_ro("slopes", [](const alibi_encoding& e) { return numpy_copy(e.slopes); }, nb::rv_policy::automatic)
      .def("describe", [](const alibi_encoding& e) { return fmt::format("{}: ALiBi, {} heads", e.label, e.slopes.size()); })
      .def("__repr__", [](const alibi_encoding& e) { return fmt::format("AlibiEncoding({} heads)", e.slopes.size()); });

  nb::class_<t5_encoding>(m, "T5Encoding", "T5 relative-position buckets (learned bias per bucket).")
      .def_ro("num_buckets", &t5_encoding::num_buckets)
      .def_ro("max_distance", &t5_encoding::max_distance)
      .def_ro("bidirectional", &t5_encoding::bidirectional)
      .def("describe",
           [](const t5_encoding& e) {
             return fmt::format("{}: T5 buckets, {} buckets, max_distance {}, {}", e.label, e.num_buckets,
                                e.max_distance, e.bidirectional ? "bidirectional" : "causal");
           })
      .def_ro("heads", &t5_encoding::heads, "heads of the table (0: no table)")
      .def_prop_ro("table", [](const t5_encoding& e) { return numpy_copy(e.table); }, nb::rv_policy::automatic,
                   "the bias per (bucket, head), flattened [num_buckets * heads] (float64; empty without a table)")
      .def("with_table", &with_t5_table, "table"_a, "heads"_a,
           "The same buckets with this table (num_buckets * heads values, bucket-major; e.g. learned).")
      .def("__repr__", [](const t5_encoding& e) { return fmt::format("T5Encoding({} buckets)", e.num_buckets); });

  m.def("rope", &make_rope, "head_dim"_a, "base"_a = 10000.0, "rotary_dim"_a = nb::none(), "layout"_a = "half_split",
        "attention_factor"_a = 1.0, "RoPE with the default table 1 / base^(2i/d) (float64).");
  m.def("alibi",
        [](std::optional<int> heads, std::optional<std::vector<double>> slopes, double max_bias) {
          if (slopes) {
            if (heads && *heads != static_cast<int>(slopes->size()))
              throw input_error(fmt::format("heads: {} does not match the {} slopes given", *heads, slopes->size()));
            if (slopes->empty()) throw input_error("slopes: must hold one value per head");
            for (std::size_t h = 0; h < slopes->size(); ++h)
              if (!std::isfinite((*slopes)[h])) throw input_error(fmt::format("slopes[{}]: must be finite", h));
            return alibi_encoding{*slopes, "alibi(slopes)"};
          }
          if (!heads) throw input_error("alibi: give heads or slopes");
          return alibi_encoding{alibi_slopes(*heads, max_bias), fmt::format("alibi(heads={})", *heads)};
        },
        "heads"_a = nb::none(), "slopes"_a = nb::none(), "max_bias"_a = 8.0,
        "ALiBi with the standard slopes for `heads` (any count), or with explicit (e.g. learned) slopes.");
  m.def("_t5",
        [](std::vector<double> table, int heads, int max_distance, bool bidirectional) {
          if (heads < 1) throw input_error("table: must be [num_buckets, heads] with at least one head");
          const int buckets = static_cast<int>(table.size()) / heads;
          t5_encoding e{buckets, max_distance, bidirectional, fmt::format("t5({} buckets, {} heads)", buckets, heads), 0, {}};
          return with_t5_table(e, std::move(table), heads);
        },
        "table"_a, "heads"_a, "max_distance"_a, "bidirectional"_a);
  m.def("rotary", &make_rotary, "inv_freq"_a, "head_dim"_a = nb::none(), "rotary_dim"_a = nb::none(),
        "layout"_a = "half_split", "attention_factor"_a = 1.0,
        "A rotary encoding from an explicit frequency table of rotary_dim / 2 values; head_dim defaults to twice "
        "the table's length, rotary_dim (a partial rotary: fewer channels turned) to head_dim.");
  m.def("_config_from_file",
        [](const std::string& path, std::optional<std::int64_t> seq_len, const std::string& precision) {
          return from_model(model::load_model_config(path), seq_len, precision);
        },
        "path"_a, "seq_len"_a = nb::none(), "precision"_a = "float32_reference");
  m.def("_config_from_text",
        [](const std::string& text, const std::string& label, std::optional<std::int64_t> seq_len,
           const std::string& precision) {
          return from_model(model::parse_model_config(text, label), seq_len, precision);
        },
        "text"_a, "label"_a, "seq_len"_a = nb::none(), "precision"_a = "float32_reference");
}

}  // namespace grape::python
