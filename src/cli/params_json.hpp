#pragma once
// A built-in's parameters read from JSON (`grape check NAME --params '{...}'`): the members of its
// params struct by name through Hana's reflection, those not given left at the encoding's
// default_params(); a wrong name or type is one input_error naming the member.
#include <boost/hana.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <string>
#include <type_traits>
#include <vector>

#include "grape/detail/error.hpp"

namespace grape::cli {

template <class T>
constexpr const char* json_kind_of() {
  if constexpr (std::is_same_v<T, bool>) return "a bool";
  else if constexpr (std::is_integral_v<T>) return "an integer";
  else if constexpr (std::is_floating_point_v<T>) return "a number";
  else if constexpr (std::is_same_v<T, std::vector<int>>) return "a list of integers";
  else return "a list of numbers";
}

template <class P>
void read_json_params(P& p, const nlohmann::json& given, const std::string& where);

/// One member from its JSON value; a nested struct (rope_alibi's rotary) from an object.
template <class T>
void read_json_value(T& member, const nlohmann::json& value, const std::string& where) {
  if constexpr (boost::hana::Struct<T>::value) {
    read_json_params(member, value, where);
  } else {
    const bool fits = [&] {
      if constexpr (std::is_same_v<T, bool>) return value.is_boolean();
      else if constexpr (std::is_integral_v<T>) return value.is_number_integer();
      else if constexpr (std::is_floating_point_v<T>) return value.is_number();
      else if constexpr (std::is_same_v<T, std::vector<int>>)
        return value.is_array() && std::all_of(value.begin(), value.end(), [](auto& x) { return x.is_number_integer(); });
      else return value.is_array() && std::all_of(value.begin(), value.end(), [](auto& x) { return x.is_number(); });
    }();
    if (!fits) throw input_error(fmt::format("{}: must be {} (got {})", where, json_kind_of<T>(), value.dump()));
    member = value.template get<T>();
  }
}

template <class P>
void read_json_params(P& p, const nlohmann::json& given, const std::string& where) {
  if (!given.is_object()) throw input_error(fmt::format("{}: must be a JSON object (got {})", where, given.dump()));
  std::vector<std::string> known;
  boost::hana::for_each(boost::hana::accessors<P>(), [&](auto pair) {
    const std::string key = boost::hana::to<char const*>(boost::hana::first(pair));
    known.push_back(key);
    if (given.contains(key)) read_json_value(boost::hana::second(pair)(p), given[key], fmt::format("{}.{}", where, key));
  });
  for (const auto& item : given.items())
    if (std::find(known.begin(), known.end(), item.key()) == known.end())
      throw input_error(fmt::format("{}: no parameter '{}' (it takes {})", where, item.key(), fmt::join(known, ", ")));
}

}  // namespace grape::cli
