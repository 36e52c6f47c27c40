// grape list [--json] [--names]: every built-in encoding with the laws it claims.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/command_registry.hpp"
#include "grape/check/builtin_list.hpp"

namespace {

struct list_options {
  bool json = false;
  bool names = false;
};

void run_list(const list_options& o) {
  nlohmann::json all = nlohmann::json::array();
  for (const grape::builtin_info& e : grape::builtin_infos()) {
    if (o.names) {
      fmt::print("{}\n", e.name);
    } else if (!o.json) {
      fmt::print("{:<18} {:<15} {}\n{:<18} claims: {}\n", e.name, e.group, e.summary, "", fmt::join(e.claims, ", "));
    }
    all.push_back({{"name", e.name},
                   {"summary", e.summary},
                   {"group", e.group},
                   {"injection", e.injection},
                   {"claims", e.claims}});
  }
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
