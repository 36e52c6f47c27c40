// grape list [--json] [--names]: every built-in encoding with the laws it claims.
#include <boost/hana/for_each.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/command_registry.hpp"
#include "grape/builtins.hpp"

namespace {

struct list_options {
  bool json = false;
  bool names = false;
};

/// The names of an encoding's laws of its own (extra_laws), which it claims too.
template <class... L>
void append_names(grape::law_list<L...>, std::vector<std::string>& names) {
  (names.emplace_back(L::name), ...);
}

void run_list(const list_options& o) {
  nlohmann::json all = nlohmann::json::array();
  boost::hana::for_each(grape::builtin_encodings, [&](auto t) {
    using E = typename decltype(t)::type;
    std::vector<std::string> claims;
    for (grape::law l : grape::all_laws)
      if (E::claims.contains(l)) claims.emplace_back(grape::to_string(l));
    if constexpr (requires { typename E::extra_laws; }) append_names(typename E::extra_laws{}, claims);
    if (o.names) {
      fmt::print("{}\n", E::name);
    } else if (!o.json) {
      fmt::print("{:<18} {:<15} {}\n{:<18} claims: {}\n", E::name, E::group::name(), E::summary, "",
                 fmt::join(claims, ", "));
    }
    all.push_back({{"name", std::string(E::name)},
                   {"summary", std::string(E::summary)},
                   {"group", std::string(E::group::name())},
                   {"injection", std::string(E::injection::description)},
                   {"claims", claims}});
  });
  if (o.json) fmt::print("{}\n", all.dump(2));
}

const grape::cli::registrar reg{"list", [](CLI::App& app) {
  auto opts = std::make_shared<list_options>();
  auto* cmd = app.add_subcommand("list", "Name every built-in encoding with the laws it claims");
  cmd->add_flag("--json", opts->json, "One JSON array");
  cmd->add_flag("--names", opts->names, "Names only, one a line");
  cmd->callback([opts] { run_list(*opts); });
}};

}  // namespace
