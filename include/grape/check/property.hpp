#pragma once
// Runs one law as a rapidcheck property with an explicit seed and trial count, and keeps the
// counterexample of the last failing evaluation. rapidcheck only accepts failing candidates while
// shrinking, so the last failure it evaluated is the minimal counterexample it reports.
#include <cstdint>
#include <optional>
#include <rapidcheck.h>
#include <exception>
#include <iostream>
#include <string>
#include <string_view>

#include "grape/check/report.hpp"

namespace grape::detail {

/// rapidcheck prints its global configuration to stderr the first time it loads it. grape passes
/// every parameter explicitly (seed, trials), so that line is noise in a report: load it once
/// with stderr muted.
inline void load_rapidcheck_quietly() {
  static const bool loaded = [] {
    auto* saved = std::cerr.rdbuf(nullptr);
    (void)rc::detail::configuration();
    std::cerr.rdbuf(saved);
    return true;
  }();
  (void)loaded;
}

/// grape reports failures itself; rapidcheck's own listener would print a reproduce string at exit.
struct silent_listener final : rc::detail::TestListener {
  void onTestCaseFinished(const rc::detail::CaseDescription&) override {}
  void onShrinkTried(const rc::detail::CaseDescription&, bool) override {}
  void onTestFinished(const rc::detail::TestMetadata&, const rc::detail::TestResult&) override {}
};

/// What names a law's row and seeds its property: a built-in law or a law tester.
struct law_identity {
  std::string name;
  std::string formula;
  std::uint64_t seed_offset;  // added to the report's seed: each law draws its own inputs
};

inline law_identity identity_of(law which) {
  return {std::string(to_string(which)), std::string(formula(which)), static_cast<std::uint64_t>(which)};
}

/// A law tester's seed offset: FNV-1a of its name (stable across runs and platforms).
inline law_identity identity_of(std::string_view name, std::string_view formula) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : name) h = (h ^ c) * 0x100000001b3ull;
  return {std::string(name), std::string(formula), h};
}

/// `trial` draws its inputs with rapidcheck generators and returns a counterexample or nothing.
template <class Trial>
law_result run_law(law_identity id, bool claimed, const check_options& options, std::string tolerance, Trial trial) {
  load_rapidcheck_quietly();
  std::optional<counterexample> last;
  auto property = [&]() {
    std::optional<counterexample> failure;
    try {
      failure = trial();
    } catch (const std::exception& e) {
      failure = counterexample{"", 0, 0, 0, 0, std::string("the trial threw: ") + e.what()};
    }
    if (failure) {
      last = failure;
      RC_FAIL(failure->what);
    }
  };
  rc::detail::TestParams params;
  params.seed = options.seed + id.seed_offset;
  params.maxSuccess = options.trials;
  params.maxSize = 100;
  rc::detail::TestMetadata metadata;
  metadata.id = id.name;
  silent_listener listener;
  const auto result = rc::detail::checkProperty(rc::detail::toProperty(property), metadata, params, listener);
  law_result r;
  r.name = std::move(id.name);
  r.formula = std::move(id.formula);
  r.claimed = claimed;
  r.tolerance = std::move(tolerance);
  rc::detail::FailureResult failure;
  rc::detail::SuccessResult success;
  if (result.match(failure)) {
    r.status = law_status::fails;
    r.trials = failure.numSuccess + 1;
    r.example = last;
  } else if (result.match(success)) {
    r.trials = success.numSuccess;
  } else {
    r.status = law_status::fails;  // gave up or errored: never reported as holding
    r.example = counterexample{"", 0, 0, 0, 0, "the property could not be run"};
  }
  return r;
}

}  // namespace grape::detail
