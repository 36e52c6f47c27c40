#pragma once
// Each subcommand lives in its own file and registers itself with a static registrar, so adding a
// command touches no other file:
//   static const grape::cli::registrar reg{"inspect", [](CLI::App& app) { ... }};
// A subcommand's callback returns its exit code through grape::cli::exit_code().
#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

namespace grape::cli {

struct command {
  std::string name;  // commands are added to the app in name order, so help is stable
  std::function<void(CLI::App&)> add;
};

std::vector<command>& registry();

struct registrar {
  registrar(std::string name, std::function<void(CLI::App&)> add) {
    registry().push_back({std::move(name), std::move(add)});
  }
};

/// The process exit code a subcommand sets: 0 ok, 1 a claimed law failed, 2 bad input.
int& exit_code();

}  // namespace grape::cli
