#pragma once
// Parameters as text, through Hana's reflection of BOOST_HANA_DEFINE_STRUCT: "head_dim=128
// base=10000 ..."; a plain aggregate that it does not name, its values in order: "8 10000 7".
// Lists print their length (a 48-value factor list is not a report line).
#include <boost/hana/accessors.hpp>
#include <boost/hana/for_each.hpp>
#include <boost/hana/concept/struct.hpp>
#include <fmt/format.h>
#include <string>
#include <type_traits>
#include <vector>

#include "grape/detail/aggregate_members.hpp"

namespace grape::detail {

template <class P>
std::string describe_params(const P& p);

template <class T>
std::string describe_value(const T& v) {
  if constexpr (boost::hana::Struct<T>::value) {
    return "{" + describe_params(v) + "}";
  } else if constexpr (requires { v.size(); v.begin(); }) {
    return fmt::format("[{} values]", v.size());
  } else if constexpr (std::is_arithmetic_v<T>) {
    return fmt::format("{}", v);
  } else if constexpr (requires { layout_name(v); }) {  // found by ADL for grape::math::layout_kind
    return layout_name(v);
  } else if constexpr (std::is_enum_v<T>) {
    return fmt::format("{}", static_cast<std::underlying_type_t<T>>(v));
  } else {
    return "?";
  }
}

template <class P>
std::string describe_params(const P& p) {
  if constexpr (!boost::hana::Struct<P>::value && !members_readable<P>) {
    return "(not reflected)";
  } else if constexpr (!boost::hana::Struct<P>::value) {  // a plain aggregate: its values in order
    std::string out;
    for_each_member(p, [&](const auto& member) { out += (out.empty() ? "" : " ") + describe_value(member); });
    return out;
  } else {
    std::string out;
    boost::hana::for_each(boost::hana::accessors<P>(), [&](auto pair) {
      if (!out.empty()) out += ' ';
      out += std::string(boost::hana::to<char const*>(boost::hana::first(pair))) + "=" +
             describe_value(boost::hana::second(pair)(p));
    });
    return out;
  }
}

}  // namespace grape::detail
