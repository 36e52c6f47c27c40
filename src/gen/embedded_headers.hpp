#pragma once
// The device-safe element math (grape/config.hpp, math/phase.hpp, math/sincos.hpp,
// math/rotate.hpp) and the representation views (math/dot.hpp, math/rank2.hpp, view/planes.hpp,
// view/scaled_planes.hpp, view/rank2.hpp, view/skew.hpp) as text, embedded at build time
// (embed_headers.cmake, embedded_header_list.cmake), so a generated kernel carries the same code
// the library compiles, not a retyped copy.
#include <string>
#include <vector>

namespace grape::gen {

struct embedded_header {
  const char* path;  // as included: "grape/math/phase.hpp"
  const char* text;  // the file's text, unchanged
  const char* origin = "the grape library";  // named in the file: where the text comes from
};

/// In dependency order.
const std::vector<embedded_header>& embedded_math_headers();
/// In dependency order, after the math headers (which they include).
const std::vector<embedded_header>& embedded_view_headers();
/// The CUDA kernels' storage conversions (cuda/storage.hpp: grape::cuda::storage<T>), after the
/// math headers: what a CUDA source adds.
const std::vector<embedded_header>& embedded_cuda_headers();

/// The headers made fit to paste into one file: `#pragma once` and every `#include` line
/// removed; the standard headers they included are added to `std_includes` (each once, e.g.
/// "<cstdint>"). An include of a project header that is not embedded is an input_error.
/// `cuda`: the CUDA headers follow.
std::string embeddable_math_text(std::vector<std::string>& std_includes, bool cuda);
/// The same for the math headers followed by the view headers, then `user_headers` (a user's
/// view: docs/generated-kernels.md).
std::string embeddable_view_text(std::vector<std::string>& std_includes, bool cuda,
                                 const std::vector<embedded_header>& user_headers = {});

}  // namespace grape::gen
