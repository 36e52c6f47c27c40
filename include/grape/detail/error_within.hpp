#pragma once
// Re-throwing a grape::input_error with the file or object it was about in front of its message.
#include <string>
#include <string_view>

#include "grape/detail/error.hpp"

namespace grape {

/// e with `where: ` in front of its message (after input_error's "grape: " head).
inline input_error within(const std::string& where, const input_error& e) {
  constexpr std::string_view head = "grape: ";
  std::string_view message = e.what();
  if (message.starts_with(head)) message.remove_prefix(head.size());
  return input_error(where + ": " + std::string(message));
}

}  // namespace grape
