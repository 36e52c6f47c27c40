// Name -> built-in dispatch over the Hana registry.
#include <boost/hana/for_each.hpp>
#include <fmt/format.h>

#include "grape/check/builtin_checks.hpp"

namespace grape {

check_report check_builtin(std::string_view name, const check_options& options) {
  std::optional<check_report> report;
  boost::hana::for_each(builtin_encodings, [&](auto t) {
    using E = typename decltype(t)::type;
    if (E::name == name) report = check<E>(options);
  });
  if (!report) throw input_error(fmt::format("encoding: unknown name '{}' (grape list names them)", name));
  return *report;
}

}  // namespace grape
