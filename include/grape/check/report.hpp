#pragma once
// What grape::check returns: one row per law, claimed or not, with the shrunk counterexample of
// any law that does not hold.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "grape/check/laws.hpp"

namespace grape {

struct check_options {
  int trials = 100;         // trials per law (rapidcheck maxSuccess)
  std::uint64_t seed = 1;   // the same seed gives the same report
  std::int64_t max_position = 0;  // > 0: draw |positions| below min(this, E::position_limit)
};

struct counterexample {
  std::string positions;    // e.g. "m=(0) n=(1) t=(1) head=0"
  double lhs = 0;           // the two sides that should agree (scores, norms, or max |entry|)
  double rhs = 0;
  double error = 0;
  double tolerance = 0;
  std::string what;         // what lhs and rhs are
};

/// not_run: a law whose kernel would take the encoding's kind but cannot run it (a representation
/// without a view); the row says why and claims nothing.
enum class law_status { holds, fails, not_run };

struct law_result {
  std::string name;         // a built-in law's to_string, or a law tester's name
  std::string formula;
  bool claimed = false;
  law_status status = law_status::holds;
  int trials = 0;
  std::string tolerance;    // the rule, stated
  std::optional<counterexample> example;
  std::string why_not_run;  // law_status::not_run: what the encoding lacks, and where it is explained
};

struct check_report {
  std::string encoding;
  std::string summary;
  std::string parameters;   // "random per trial" or the fixed parameters
  std::string positions;    // the range positions are drawn from, e.g. "-2147483647..2147483647"
  std::string position_note;  // why the range is below the default, when it is
  std::string position_draws;  // the share of edge-case positions (0, ±1, the ends, m = n)
  std::string reference;    // what the encoding was compared with, independently of itself, or "none"
  std::vector<std::string> notes;  // what the checker noticed about the instance (e.g. a dropped part)
  check_options options;
  std::vector<law_result> laws;

  /// Every claimed law holds.
  bool passed() const;
  const law_result* find(law l) const;
  const law_result* find(std::string_view name) const;
  std::string table() const;  // as JSON: grape/check/report_json.hpp
};

}  // namespace grape
