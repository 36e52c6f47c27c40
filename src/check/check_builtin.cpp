// Name -> built-in dispatch over the Hana registry, and what `grape list` says of each.
#include <boost/hana/for_each.hpp>
#include <fmt/format.h>

#include "grape/check/builtin_checks.hpp"

namespace grape {

namespace {

/// The names of an encoding's laws of its own (extra_laws), which it claims too.
template <class... L>
void append_names(law_list<L...>, std::vector<std::string>& names) {
  (names.emplace_back(L::name), ...);
}

}  // namespace

std::vector<builtin_info> builtin_infos() {
  std::vector<builtin_info> all;
  boost::hana::for_each(builtin_encodings, [&](auto t) {
    using E = typename decltype(t)::type;
    builtin_info info{std::string(E::name), std::string(E::summary), std::string(E::group::name()),
                      std::string(E::injection::description), {}};
    for (law l : all_laws)
      if (E::claims.contains(l)) info.claims.emplace_back(to_string(l));
    if constexpr (requires { typename E::extra_laws; }) append_names(typename E::extra_laws{}, info.claims);
    all.push_back(std::move(info));
  });
  return all;
}

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
