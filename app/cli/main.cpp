// The grape command line: subcommands register themselves (command_registry.hpp).
#include <algorithm>
#include <cstdio>
#include <exception>

#include "cli/command_registry.hpp"
#include "grape/detail/error.hpp"

namespace grape::cli {

std::vector<command>& registry() {
  static std::vector<command> commands;
  return commands;
}

int& exit_code() {
  static int code = 0;
  return code;
}

}  // namespace grape::cli

int main(int argc, char** argv) {
  using namespace grape::cli;
  CLI::App app{"grape: position encodings as group representations - check their laws, inspect "
               "models, apply and generate kernels"};
  app.require_subcommand(1);
  auto& commands = registry();
  std::sort(commands.begin(), commands.end(),
            [](const command& a, const command& b) { return a.name < b.name; });
  for (auto& c : commands) c.add(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;  // bad arguments: exit 2, as for any bad input
  } catch (const grape::input_error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "grape: internal error: %s\n", e.what());
    return 3;
  }
  return exit_code();
}
