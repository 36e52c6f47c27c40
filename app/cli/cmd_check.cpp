// grape check NAME [--params JSON] [--trials N] [--seed S] [--max-position P] [--json]: checks a built-in's laws,
// with random parameters or the ones given. Exit 0 when every claimed law holds, 1 when one fails, 2 on bad input.
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli/command_registry.hpp"
#include "grape/detail/params_json.hpp"
#include "grape/check/builtin_checks.hpp"
#include "grape/check/report_json.hpp"

namespace {

struct check_cli_options {
  std::string name;
  int trials = 100;
  std::uint64_t seed = 1;
  std::optional<std::int64_t> max_position;
  std::optional<std::string> params;
  bool json = false;
};

/// The built-in's laws at the parameters given as JSON (the encoding's defaults where not given).
grape::check_report check_with_params(const std::string& name, const std::string& text,
                                      const grape::check_options& options) {
  nlohmann::json given;
  try {
    given = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw grape::input_error(fmt::format("--params: not JSON ({})", e.what()));
  }
  std::optional<grape::check_report> report;
  boost::hana::for_each(grape::builtin_encodings, [&](auto t) {
    using E = typename decltype(t)::type;
    if (E::name != name) return;
    typename E::params p = E::default_params();
    grape::detail::read_json_params(p, given, fmt::format("--params: {}", name));
    report = grape::check<E>(std::optional<typename E::params>(p), options);
  });
  if (!report) throw grape::input_error(fmt::format("encoding: unknown name '{}' (grape list names them)", name));
  return *report;
}

void run_check(const check_cli_options& o) {
  if (o.trials < 1) throw grape::input_error(fmt::format("--trials: must be >= 1 (got {})", o.trials));
  if (o.max_position && *o.max_position < 1)
    throw grape::input_error(fmt::format("--max-position: must be >= 1 (got {})", *o.max_position));
  const grape::check_options options{o.trials, o.seed, o.max_position.value_or(0)};
  const auto report = o.params ? check_with_params(o.name, *o.params, options) : grape::check_builtin(o.name, options);
  if (o.json) fmt::print("{}\n", nlohmann::json(report).dump(2));
  else fmt::print("{}", report.table());
  grape::cli::exit_code() = report.passed() ? 0 : 1;
}

const grape::cli::registrar reg{"check", [](CLI::App& app) {
  auto opts = std::make_shared<check_cli_options>();
  auto* cmd = app.add_subcommand("check", "Check a built-in encoding's laws with random trials");
  cmd->add_option("name", opts->name, "Built-in encoding (grape list)")->required();
  cmd->add_option("--trials", opts->trials, "Trials per law")->capture_default_str();
  cmd->add_option("--seed", opts->seed, "Random seed; the same seed gives the same report")->capture_default_str();
  cmd->add_option("--max-position", opts->max_position,
                  "Draw positions with |m| < P (default: the encoding's documented range, 2^31 for rotary "
                  "encodings)");
  cmd->add_option("--params", opts->params,
                  "The encoding's parameters as a JSON object (grape.encoding's names; the rest at their defaults) "
                  "instead of random ones");
  cmd->add_flag("--json", opts->json, "Print the report as JSON");
  cmd->callback([opts] { run_check(*opts); });
}};

}  // namespace
