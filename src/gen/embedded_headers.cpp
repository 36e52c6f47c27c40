// Making the embedded math headers fit to paste into one generated file (embedded_headers.hpp).
#include "gen/embedded_headers.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <sstream>

#include "grape/detail/error.hpp"

namespace grape::gen {

namespace {

std::string_view trim_left(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  return s;
}

// `headers` made fit to paste, in order (each includes only earlier ones).
std::string embeddable_text(const std::vector<embedded_header>& headers,
                            std::vector<std::string>& std_includes) {
  std::string out;
  for (const auto& h : headers) {
    out += fmt::format("// ---- begin {} (embedded from {}) ----\n", h.path, h.origin);
    std::istringstream in{std::string(h.text)};
    std::string line;
    while (std::getline(in, line)) {
      std::string_view l = trim_left(line);
      if (l.rfind("#pragma once", 0) == 0) continue;
      if (l.rfind("#include", 0) == 0) {
        std::string_view target = trim_left(l.substr(8));
        if (!target.empty() && target.front() == '<') {
          const std::string inc(target.substr(0, target.find('>') + 1));
          if (std::find(std_includes.begin(), std_includes.end(), inc) == std_includes.end())
            std_includes.push_back(inc);
          continue;
        }
        // A project header: it must be one of the embedded ones (which come earlier).
        const auto name = target.substr(1, target.find('"', 1) - 1);
        const bool embedded = std::any_of(headers.begin(), headers.end(),
                                          [&](const embedded_header& e) { return name == e.path; });
        if (!embedded)
          throw input_error(fmt::format("gen: embedded header {} includes {}, which is not embedded",
                                        h.path, name));
        continue;
      }
      out += line;
      out += '\n';
    }
    out += fmt::format("// ---- end {} ----\n\n", h.path);
  }
  return out;
}

// The math headers, then `after`, then (for CUDA) the CUDA headers.
std::string embeddable_after_math(const std::vector<embedded_header>& after, std::vector<std::string>& std_includes,
                                    bool cuda) {
  std::vector<embedded_header> all = embedded_math_headers();
  all.insert(all.end(), after.begin(), after.end());
  if (cuda) all.insert(all.end(), embedded_cuda_headers().begin(), embedded_cuda_headers().end());
  return embeddable_text(all, std_includes);
}

}  // namespace

std::string embeddable_math_text(std::vector<std::string>& std_includes, bool cuda) {
  return embeddable_after_math({}, std_includes, cuda);
}

std::string embeddable_view_text(std::vector<std::string>& std_includes, bool cuda,
                                 const std::vector<embedded_header>& user_headers) {
  std::vector<embedded_header> views = embedded_view_headers();
  views.insert(views.end(), user_headers.begin(), user_headers.end());
  return embeddable_after_math(views, std_includes, cuda);
}

}  // namespace grape::gen
