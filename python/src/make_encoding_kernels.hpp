#pragma once
// encoding_kernels for any encoding type E at given parameters: the kernels its injection takes,
// found by what cpu:: accepts for E's instance. builtin_encoding.cpp makes the built-ins' with it;
// a library that grape.load_encoding compiles makes a user's type's (user_encoding.tpp): the same
// template, so a user's encoding has exactly the calls a built-in has.
#include <cmath>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "attention_kernels.hpp"
#include "builtin_rotate.hpp"
#include "cpu/encode_bias.hpp"
#include "cpu/encode_embedding.hpp"
#include "cpu/lift_qk.hpp"
#include "encoding_kernels.hpp"
#include "grape/detail/describe.hpp"
#include "grape/detail/params_json.hpp"
#include "grape/inject/instance_kind.hpp"
#include "grape/inject/score_bias.hpp"
#include "grape/rep/rotation_planes.hpp"
#include "grape/schedule/spec_check.hpp"

namespace grape::python {

/// The score bias of an instance, writable (a composed instance's bias part), or null.
template <class I>
auto* mutable_bias_part(I& inst) {
  using B = std::remove_cvref_t<decltype(*kernel::bias_part(inst))>;
  return const_cast<B*>(kernel::bias_part(inst));
}

/// Whether the bias of instance I has parameters to read, set and differentiate (BiasWithParameters).
template <class I>
constexpr bool has_bias_parameters = [] {
  using P = decltype(kernel::bias_part(std::declval<const I&>()));
  if constexpr (std::is_same_v<P, const void*>) return false;
  else return BiasWithParameters<std::remove_cvref_t<decltype(*std::declval<P>())>> && cpu::detail::gives_gradient<P>::value;
}();

template <class E>
encoding_kernels kernels_of_instance(std::shared_ptr<const typename E::instance> inst, const std::string& described,
                                     const std::string& params_json);

/// The kernels of a copy of `inst` that `change` alters (new bias parameters, new frequencies).
template <class E, class Change>
encoding_kernels kernels_of_changed(const typename E::instance& inst, const std::string& described,
                                    const std::string& params_json, Change&& change) {
  auto changed = std::make_shared<typename E::instance>(inst);
  change(*changed);
  return kernels_of_instance<E>(std::move(changed), described, params_json);
}

template <class E>
encoding_kernels kernels_of_instance(std::shared_ptr<const typename E::instance> inst, const std::string& described,
                                     const std::string& params_json) {
  using I = typename E::instance;
  encoding_kernels b;
  b.name = E::name;
  b.summary = E::summary;
  b.injection = E::injection::description;
  b.described = described;
  b.params_json = params_json;
  if constexpr (rotates_qk_part<I>) {  // cpu::rotate_qk takes it: a rotation, or a composition with one
    const encoding_shape shape = shape_of(rotation_part(*inst));
    b.head_dim = shape.head_dim;
    b.num_axes = shape.num_axes;
    b.rotate = [inst](const cpu::rotate_qk_args& a, bool backward) { rotate_builtin_qk(*inst, a, backward); };
  }
  if constexpr (has_score_bias<I>) {
    b.bias_heads = inst->heads();
    b.bias_tile = [inst](const cpu::bias_tile& t) { cpu::bias_tile_of(*inst, t); };
  }
  if constexpr (is_lift_instance<I>) {
    b.head_dim = inst->head_dim;
    b.lift = [inst](const cpu::rotate_qk_args& a, const cpu::lifted_tensor& q, const cpu::lifted_tensor& k,
                    bool backward) { backward ? cpu::lift_qk_backward(*inst, a, q, k) : cpu::lift_qk(*inst, a, q, k); };
  }
  if constexpr (adds_embedding<I>)
    b.add_embedding = [inst](const cpu::embedding_rows& r) { cpu::add_embedding_of(*inst, r); };
  if constexpr (cpu::attention_takes<I>) {
    b.attention = [inst](const cpu::attention_args& a) { run_attention(*inst, a); };
    b.attention_backward = [inst](const cpu::attention_args& a, const cpu::attention_grad_args& g) {
      run_attention_backward(*inst, a, g);
    };
    if constexpr (!is_lift_instance<I>)
      b.attention_decode = [inst](const cpu::decode_args& a) { run_attention_decode(*inst, a); };
  }
  if constexpr (has_bias_parameters<I>) {
    const auto* bias = kernel::bias_part(*inst);
    b.bias_parameters.resize(bias->parameter_count());
    bias->parameters(b.bias_parameters.data());
    b.with_bias_parameters = [inst, described, params_json](const std::vector<double>& values) {
      if (values.size() != kernel::bias_part(*inst)->parameter_count())
        throw input_error(fmt::format("bias_params: {} takes {} values (got {})", E::name,
                                      kernel::bias_part(*inst)->parameter_count(), values.size()));
      return kernels_of_changed<E>(*inst, described, params_json,
                                   [&](I& changed) { mutable_bias_part(changed)->set_parameters(values.data()); });
    };
  }
  if constexpr (rotates_qk_part<I>) {
    using R = std::remove_cvref_t<decltype(rotation_part(*inst).rep)>;
    if constexpr (std::is_same_v<R, rotation_planes<1>>) {
      for (const auto& w : rotation_part(*inst).rep.frequencies()) b.frequencies.push_back(w[0]);
      b.with_frequencies = [inst, described, params_json](const std::vector<double>& values) {
        if (values.size() != rotation_part(*inst).rep.frequencies().size())
          throw input_error(fmt::format("inv_freq: {} turns {} planes (got {} frequencies)", E::name,
                                        rotation_part(*inst).rep.frequencies().size(), values.size()));
        for (std::size_t i = 0; i < values.size(); ++i)
          if (!std::isfinite(values[i])) throw input_error(fmt::format("inv_freq[{}]: must be finite", i));
        return kernels_of_changed<E>(*inst, described, params_json, [&](I& changed) {
          const_cast<R&>(rotation_part(changed).rep) = R::from_inv_freq(values);
        });
      };
    }
  }
  return b;
}

/// E made from its parameters, with the kernels its injection takes.
template <class E>
encoding_kernels make_encoding_kernels(const typename E::params& p) {
  return kernels_of_instance<E>(std::make_shared<const typename E::instance>(E::make(p)), detail::describe_params(p),
                                detail::params_to_json(p).dump());
}

/// Whether E gives defaults for its parameters.
template <class E>
constexpr bool has_default_params = requires { E::default_params(); };

/// E's name, summary, injection, and its parameters' names (or count, unnamed) and defaults, as JSON.
template <class E>
nlohmann::json encoding_info() {
  using P = typename E::params;
  nlohmann::json j;
  j["name"] = std::string(E::name);
  j["summary"] = std::string(E::summary);
  j["injection"] = std::string(E::injection::description);
  if constexpr (has_default_params<E>) j["default_params"] = detail::params_to_json(E::default_params());
  if constexpr (boost::hana::Struct<P>::value) {
    j["param_names"] = nlohmann::json::array();
    boost::hana::for_each(boost::hana::accessors<P>(), [&](auto pair) {
      j["param_names"].push_back(boost::hana::to<char const*>(boost::hana::first(pair)));
    });
  } else {
    j["param_count"] = detail::member_count<P>();
  }
  return j;
}

/// E's parameters from JSON: given ones over default_params(); without default_params every one given.
template <class E>
typename E::params params_from_json(const nlohmann::json& given) {
  using P = typename E::params;
  const std::string where(E::name);
  if constexpr (has_default_params<E>) {
    P p = E::default_params();
    detail::read_json_params(p, given, where);
    return p;
  } else {
    P p{};
    detail::read_json_params(p, given, where);
    if constexpr (boost::hana::Struct<P>::value) {
      boost::hana::for_each(boost::hana::accessors<P>(), [&](auto pair) {
        const char* key = boost::hana::to<char const*>(boost::hana::first(pair));
        if (!given.contains(key))
          throw input_error(fmt::format("{}.{}: must be given ({} has no default_params())", where, key, where));
      });
    }
    return p;
  }
}

}  // namespace grape::python
