#pragma once
// A check report as JSON (grape check --json, grape inspect): `nlohmann::json j = report;`. Kept
// out of report.hpp so a program that only checks its own encoding does not need nlohmann_json.
#include <nlohmann/json.hpp>

#include "grape/check/report.hpp"

namespace grape {

inline void to_json(nlohmann::json& j, const check_report& report) {
  j = nlohmann::json::object();
  j["encoding"] = report.encoding;
  j["summary"] = report.summary;
  j["parameters"] = report.parameters;
  j["positions"] = report.positions;
  j["position_note"] = report.position_note;
  j["position_draws"] = report.position_draws;
  j["max_position"] = report.options.max_position;
  j["reference"] = report.reference;
  j["notes"] = report.notes;
  j["seed"] = report.options.seed;
  j["trials"] = report.options.trials;
  j["passed"] = report.passed();
  j["laws"] = nlohmann::json::array();
  for (const auto& l : report.laws) {
    nlohmann::json r;
    r["law"] = l.name;
    r["formula"] = l.formula;
    r["claimed"] = l.claimed;
    r["holds"] = l.status == law_status::holds;
    r["run"] = l.status != law_status::not_run;
    if (l.status == law_status::not_run) r["why_not_run"] = l.why_not_run;
    r["trials"] = l.trials;
    r["tolerance"] = l.tolerance;
    if (l.example) {
      const auto& e = *l.example;
      r["counterexample"] = {{"positions", e.positions}, {"lhs", e.lhs}, {"rhs", e.rhs}, {"error", e.error},
                             {"tolerance", e.tolerance}, {"what", e.what}};
    }
    j["laws"].push_back(r);
  }
}

}  // namespace grape
