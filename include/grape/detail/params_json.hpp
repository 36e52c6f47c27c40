#pragma once
// An encoding's parameters from JSON and back (`grape check NAME --params '{...}'`, grape.encoding
// objects, grape.load_encoding): the members of its params struct by name through Hana's reflection
// (BOOST_HANA_DEFINE_STRUCT), those not given left as they were (the encoding's default_params());
// a params struct that is a plain aggregate, whose members have no names to read, from a JSON list
// in member order, every member given. A wrong name, count or type is one input_error naming it.
#include <boost/hana.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstddef>
#include <string>
#include <type_traits>
#include <vector>

#include "grape/detail/aggregate_members.hpp"
#include "grape/detail/error.hpp"

namespace grape::detail {

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
  if constexpr (!boost::hana::Struct<P>::value) {
    constexpr std::size_t n = member_count<P>();
    if (!given.is_array() || given.size() != n)
      throw input_error(fmt::format("{}: its params struct names no members (no BOOST_HANA_DEFINE_STRUCT): give its "
                                    "{} values in order as a list (got {})",
                                    where, n, given.dump()));
    std::size_t i = 0;
    for_each_member(p, [&](auto& member) {
      read_json_value(member, given[i], fmt::format("{}[{}]", where, i));
      ++i;
    });
  } else {
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
}

/// The parameters as JSON: an object by member name, or a list in member order for a plain aggregate.
template <class P>
nlohmann::json params_to_json(const P& p) {
  auto value = [](const auto& member) -> nlohmann::json {
    if constexpr (boost::hana::Struct<std::remove_cvref_t<decltype(member)>>::value) return params_to_json(member);
    else return member;
  };
  nlohmann::json out;
  if constexpr (boost::hana::Struct<P>::value) {
    out = nlohmann::json::object();
    boost::hana::for_each(boost::hana::accessors<P>(), [&](auto pair) {
      out[boost::hana::to<char const*>(boost::hana::first(pair))] = value(boost::hana::second(pair)(p));
    });
  } else {
    out = nlohmann::json::array();
    for_each_member(p, [&](const auto& member) { out.push_back(value(member)); });
  }
  return out;
}

}  // namespace grape::detail
