// grape.encoding(name, **params): any built-in encoding made from its parameters (those not given
// take the type's default_params()), read through Hana's reflection of its params struct, so a new
// built-in needs nothing here (its kernels: builtin_kernels.hpp). Those that rotate Q and K run
// grape.rotate_qk and its backward through the instance kernel (xPos, GRAPE-M, STRING, LieRE, ...); those with
// a score bias give its tile (cpu::bias_tile_of: ALiBi, T5, FoX, RoPE+ALiBi's bias, gated GRAPE-A,
// GRAPE-AP), those added to the input their embedding (cpu::add_embedding_of).
#include <boost/hana/accessors.hpp>
#include <boost/hana/concept/struct.hpp>
#include <boost/hana/for_each.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "bias_tile_array.hpp"
#include "builtin_encoding.hpp"
#include "builtin_kernels.hpp"
#include "grape/builtins.hpp"
#include "grape/detail/error.hpp"
#include "grape/schedule/spec_check.hpp"
#include "qk_args.hpp"

namespace grape::python {

namespace nb = nanobind;
using namespace nb::literals;

namespace {


template <class T>
constexpr const char* kind_of() {
  if constexpr (std::is_same_v<T, bool>) return "a bool";
  else if constexpr (std::is_integral_v<T>) return "an int";
  else if constexpr (std::is_floating_point_v<T>) return "a float";
  else if constexpr (std::is_same_v<T, std::vector<int>>) return "a list of ints";
  else return "a list of floats";
}

template <class P>
void read_params(P& p, const nb::dict& given, const std::string& where);

/// One member from the Python value; a nested struct (rope_alibi's rotary) from a dict.
template <class T>
void read_value(T& member, nb::handle value, const std::string& where) {
  if constexpr (boost::hana::Struct<T>::value) {
    if (!nb::isinstance<nb::dict>(value)) throw input_error(fmt::format("{}: must be a dict", where));
    read_params(member, nb::borrow<nb::dict>(value), where);
  } else {
    // A bool is an int to Python: refuse it where a number is meant, and a number where a bool is.
    if (nb::isinstance<nb::bool_>(value) != std::is_same_v<T, bool> || !nb::try_cast(value, member))
      throw input_error(fmt::format("{}: must be {}", where, kind_of<T>()));
  }
}

template <class P>
void read_params(P& p, const nb::dict& given, const std::string& where) {
  std::vector<std::string> known;
  boost::hana::for_each(boost::hana::accessors<P>(), [&](auto pair) {
    const std::string key = boost::hana::to<char const*>(boost::hana::first(pair));
    known.push_back(key);
    if (given.contains(key.c_str()))
      read_value(boost::hana::second(pair)(p), given[key.c_str()], fmt::format("{}.{}", where, key));
  });
  for (auto item : given) {
    const std::string key = nb::cast<std::string>(nb::str(item.first));
    if (std::find(known.begin(), known.end(), key) == known.end())
      throw input_error(fmt::format("{}: no parameter '{}' (it takes {})", where, key, fmt::join(known, ", ")));
  }
}

template <class P>
nb::dict params_dict(const P& p) {
  nb::dict d;
  boost::hana::for_each(boost::hana::accessors<P>(), [&](auto pair) {
    const auto& member = boost::hana::second(pair)(p);
    if constexpr (boost::hana::Struct<std::remove_cvref_t<decltype(member)>>::value)
      d[boost::hana::to<char const*>(boost::hana::first(pair))] = params_dict(member);
    else
      d[boost::hana::to<char const*>(boost::hana::first(pair))] = nb::cast(member);
  });
  return d;
}

template <class E>
builtin_encoding make_builtin(const nb::dict& given) {
  typename E::params p = E::default_params();
  read_params(p, given, std::string(E::name));
  return builtin_encoding(builtin_kernels<E>(p), params_dict(p));
}

builtin_encoding make_named(const std::string& name, const nb::dict& given) {
  std::optional<builtin_encoding> made;
  std::vector<std::string> names;
  boost::hana::for_each(builtin_encodings, [&](auto type) {
    using E = typename decltype(type)::type;
    names.emplace_back(E::name);
    if (!made && E::name == name) made = make_builtin<E>(given);
  });
  if (!made) throw input_error(fmt::format("encoding: no built-in '{}' (grape.list(): {})", name, fmt::join(names, ", ")));
  return std::move(*made);
}

/// with_bias_params / with_inv_freq: the encoding with new values of one kind of its parameters,
/// or one line naming the argument and saying it has none (`what`, after the encoding's name).
auto with_values(std::function<encoding_kernels(const std::vector<double>&)> encoding_kernels::*make,
                 const char* argument, const char* what) {
  return [make, argument, what](const builtin_encoding& e, const std::vector<double>& values) {
    if (!(e.*make)) throw input_error(fmt::format("{}: {} {}", argument, e.name, what));
    return builtin_encoding((e.*make)(values), e.params);
  };
}

std::string describe(const builtin_encoding& e) {
  return fmt::format("{}({}): {}; {}", e.name, e.described, e.summary, e.injection);
}

}  // namespace

void bind_builtin_encodings(nb::module_& m) {
  nb::class_<builtin_encoding>(m, "BuiltinEncoding",
                               "A built-in encoding made from its parameters (grape.encoding(name, **params)).")
      .def_ro("name", &builtin_encoding::name)
      .def_ro("summary", &builtin_encoding::summary)
      .def_ro("injection", &builtin_encoding::injection, "where it enters attention")
      .def_prop_ro("params",
                   [](const builtin_encoding& e) { return nb::module_::import_("copy").attr("deepcopy")(e.params); },
                   "every parameter, defaults filled in (a copy)")
      .def_prop_ro("rotates_qk", [](const builtin_encoding& e) { return static_cast<bool>(e.rotate); },
                   "whether grape.rotate_qk takes it (its injection rotates Q and K)")
      .def_ro("head_dim", &builtin_encoding::head_dim, "channels per head (rotating encodings; else 0)")
      .def_ro("num_axes", &builtin_encoding::num_axes, "position axes rotate_qk reads per token")
      .def_prop_ro("has_bias_tile", [](const builtin_encoding& e) { return static_cast<bool>(e.bias_tile); },
                   "whether bias_tile takes it (a score bias, alone or composed with a rotation)")
      .def_prop_ro("has_embedding", [](const builtin_encoding& e) { return static_cast<bool>(e.add_embedding); },
                   "whether add_embedding takes it (an absolute embedding added to the input)")
      .def(
          "bias_tile",
          [](const builtin_encoding& e, std::int64_t q_len, std::int64_t k_len, std::int64_t q_start,
             std::int64_t k_start, int threads) {
            if (!e.bias_tile)
              throw input_error(fmt::format("encoding: {} enters attention as '{}'; bias_tile takes encodings with a "
                                            "score bias",
                                            e.name, e.injection));
            new_tile t = make_tile(e.bias_heads, q_start, q_len, k_start, k_len, threads);
            {
              nb::gil_scoped_release release;
              e.bias_tile(t.tile);
            }
            return t.array;
          },
          "q_len"_a, "k_len"_a, "q_start"_a = 0, "k_start"_a = 0, "threads"_a = 0,
          "The score bias b_h(i, j) for query positions q_start.. and key positions k_start..: a new float32 "
          "NumPy array [heads, q_len, k_len] (causal biases give keys after the query -inf).")
      .def(
          "add_embedding",
          [](const builtin_encoding& e, const array& x, const array& positions, int threads) {
            if (!e.add_embedding)
              throw input_error(fmt::format("encoding: {} enters attention as '{}'; add_embedding takes encodings "
                                            "added to the input",
                                            e.name, e.injection));
            const cpu::embedding_rows rows = embedding_rows_of(x, positions, threads);
            {
              nb::gil_scoped_release release;
              e.add_embedding(rows);
            }
            return x;
          },
          "x"_a, "positions"_a, "threads"_a = 0,
          "x[t] += PE(positions[t]) in place (x float32 [tokens, dim], positions int64 [tokens]); returns x.")
      .def_prop_ro("lifts_qk", [](const builtin_encoding& e) { return static_cast<bool>(e.lift); },
                   "whether grape.lift_qk takes it (GRAPE-A: Q and K lifted to head_dim + 2 channels)")
      .def_prop_ro("bias_params", [](const builtin_encoding& e) { return e.bias_parameters; },
                   "the score bias's own parameters (BiasWithParameters: ALiBi's slopes, a log-distance bias's), "
                   "whose gradient grape.torch.attention(bias_params=...) gives; empty if it has none")
      .def("with_bias_params", with_values(&encoding_kernels::with_bias_parameters, "bias_params",
                                                 "has no score bias with parameters"),
           "values"_a, "The same encoding with its score bias's parameters set to these values.")
      .def_prop_ro("inv_freq", [](const builtin_encoding& e) { return e.frequencies; },
                   "a rotation by planes on one position axis: each plane's frequency (radians per position), "
                   "whose gradient grape.torch.attention(inv_freq=...) gives; empty for other representations")
      .def("with_inv_freq", with_values(&encoding_kernels::with_frequencies, "inv_freq",
                                              "is not a rotation by planes on one axis"),
           "values"_a, "The same encoding with its planes turning by these frequencies.")
      .def("describe", &describe)
      .def("__repr__", &describe);

  m.def("_builtin_encoding", &make_named, "name"_a, "params"_a);

  // Forward: q, k in, q_lifted, k_lifted out. Backward: dL/d(lifted) in (q_lifted, k_lifted), dL/dq and
  // dL/dk out (written into q, k, which give the shapes).
  m.def("_lift_qk_builtin",
        [](const builtin_encoding& e, const array& q, const array& k, const array& q_lifted, const array& k_lifted,
           optional_array positions, optional_array offsets, optional_array cu_seqlens,
           std::optional<std::int64_t> max_position, int threads, bool backward) {
          if (!e.lift)
            throw input_error(fmt::format("encoding: {} enters attention as '{}'; lift_qk takes lifts (GRAPE-A)",
                                          e.name, e.injection));
          cpu::rotate_qk_args args = make_qk_args(e.head_dim, 1, {q, std::nullopt, k, std::nullopt}, positions,
                                                  offsets, cu_seqlens, max_position, threads);
          if (backward) {
            args.q.out = const_cast<void*>(args.q.in);
            args.k.out = const_cast<void*>(args.k.in);
            args.q.in = args.k.in = nullptr;
          } else {
            args.q.out = args.k.out = nullptr;
          }
          auto lifted = [&](const array& a, const char* name) {
            const qk_shape s = qk_shape_of(a, name);
            if (storage_type(a, name) != args.type) throw input_error(fmt::format("{}: dtype must match q's", name));
            return cpu::lifted_tensor{a.data(), s.span, s.batch_stride, s.token_stride, s.head_stride};
          };
          const cpu::lifted_tensor ql = lifted(q_lifted, "q_lifted"), kl = lifted(k_lifted, "k_lifted");
          nb::gil_scoped_release release;
          e.lift(args, ql, kl, backward);
        },
        "encoding"_a, "q"_a, "k"_a, "q_lifted"_a, "k_lifted"_a, "positions"_a.none(), "offsets"_a.none(),
        "cu_seqlens"_a.none(), "max_position"_a.none(), "threads"_a, "backward"_a);


  m.def("_rotate_qk_builtin",
        [](const builtin_encoding& e, optional_array q, optional_array q_out, optional_array k, optional_array k_out,
           optional_array positions, optional_array offsets, optional_array cu_seqlens,
           std::optional<std::int64_t> max_position, int threads, bool backward) {
          if (!e.rotate)
            throw input_error(fmt::format("encoding: {} enters attention as '{}'; rotate_qk takes encodings that "
                                          "rotate Q and K",
                                          e.name, e.injection));
          const auto args = make_qk_args(e.head_dim, e.num_axes, {q, q_out, k, k_out}, positions, offsets, cu_seqlens,
                                         max_position, threads);
          nb::gil_scoped_release release;
          e.rotate(args, backward);
        },
        "encoding"_a, "q"_a.none(), "q_out"_a.none(), "k"_a.none(), "k_out"_a.none(), "positions"_a.none(),
        "offsets"_a.none(), "cu_seqlens"_a.none(), "max_position"_a.none(), "threads"_a, "backward"_a);
}

}  // namespace grape::python
