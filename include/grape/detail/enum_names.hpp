#pragma once
// An enum's names as one table, read both ways: a value's name, and the value a name stands for.
#include <array>
#include <cstddef>
#include <optional>
#include <string_view>
#include <utility>

namespace grape::detail {

template <class E, std::size_t N>
using enum_names = std::array<std::pair<E, std::string_view>, N>;

/// v's name: the table's first entry for v ("?" for a value the table lacks).
template <class E, std::size_t N>
constexpr std::string_view name_of(const enum_names<E, N>& names, E v) {
  for (const auto& [value, name] : names)
    if (value == v) return name;
  return "?";
}

/// The value `name` stands for, if the table has it (a value may have more than one name).
template <class E, std::size_t N>
constexpr std::optional<E> value_named(const enum_names<E, N>& names, std::string_view name) {
  for (const auto& [value, n] : names)
    if (n == name) return value;
  return std::nullopt;
}

}  // namespace grape::detail
