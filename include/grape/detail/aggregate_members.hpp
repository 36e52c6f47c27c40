#pragma once
// The members of a plain aggregate, in order, without names (C++20 has no reflection of them):
// how many there are, by what brace-initialises it, and each one through a structured binding. What
// grape reads and prints of a params struct that BOOST_HANA_DEFINE_STRUCT does not name.
#include <cstddef>
#include <type_traits>

namespace grape::detail {

/// Converts to any member type: counts an aggregate's members by what brace-initialises it.
struct any_member {
  template <class T>
  operator T() const;
};

template <class P, class... Members>
constexpr std::size_t member_count() {
  if constexpr (requires { P{Members{}..., any_member{}}; }) return member_count<P, Members..., any_member>();
  else return sizeof...(Members);
}

/// How many members a plain aggregate has that grape can read by position (structured bindings).
inline constexpr std::size_t max_unnamed_members = 8;

/// Whether for_each_member reads P: an aggregate of 1 to max_unnamed_members members.
template <class P>
constexpr bool members_readable = [] {
  if constexpr (!std::is_aggregate_v<P>) return false;
  else return member_count<P>() >= 1 && member_count<P>() <= max_unnamed_members;
}();

/// f(member) for each member of a plain aggregate, in order.
template <class P, class F>
void for_each_member(P& p, F&& f) {
  constexpr std::size_t n = member_count<std::remove_const_t<P>>();
  static_assert(n >= 1 && n <= max_unnamed_members,
                "grape: a params struct without BOOST_HANA_DEFINE_STRUCT is read by position, 1 to 8 members");
  if constexpr (n == 1) { auto& [a] = p; f(a); }
  else if constexpr (n == 2) { auto& [a, b] = p; f(a), f(b); }
  else if constexpr (n == 3) { auto& [a, b, c] = p; f(a), f(b), f(c); }
  else if constexpr (n == 4) { auto& [a, b, c, d] = p; f(a), f(b), f(c), f(d); }
  else if constexpr (n == 5) { auto& [a, b, c, d, e] = p; f(a), f(b), f(c), f(d), f(e); }
  else if constexpr (n == 6) { auto& [a, b, c, d, e, g] = p; f(a), f(b), f(c), f(d), f(e), f(g); }
  else if constexpr (n == 7) { auto& [a, b, c, d, e, g, h] = p; f(a), f(b), f(c), f(d), f(e), f(g), f(h); }
  else { auto& [a, b, c, d, e, g, h, i] = p; f(a), f(b), f(c), f(d), f(e), f(g), f(h), f(i); }
}

}  // namespace grape::detail
