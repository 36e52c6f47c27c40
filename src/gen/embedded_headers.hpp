#pragma once
// The device-safe element math (grape/config.hpp, math/phase.hpp, math/sincos.hpp,
// math/rotate.hpp) as text, embedded at build time (embed_headers.cmake), so a generated kernel
// carries the same code the library compiles, not a retyped copy.
#include <string>
#include <vector>

namespace grape::gen {

struct embedded_header {
  const char* path;  // as included: "grape/math/phase.hpp"
  const char* text;  // the file's text, unchanged
};

/// In dependency order.
const std::vector<embedded_header>& embedded_math_headers();

/// The headers made fit to paste into one file: `#pragma once` and every `#include` line
/// removed; the standard headers they included are added to `std_includes` (each once, e.g.
/// "<cstdint>"). An include of a project header that is not embedded is an input_error.
std::string embeddable_math_text(std::vector<std::string>& std_includes);

}  // namespace grape::gen
