// Rendering a check report as a table (as JSON: grape/check/report_json.hpp).
#include "grape/check/report.hpp"

#include <fmt/format.h>

namespace grape {

bool check_report::passed() const {
  for (const auto& l : laws)
    if (l.claimed && l.status == law_status::fails) return false;
  return true;
}

const law_result* check_report::find(std::string_view name) const {
  for (const auto& l : laws)
    if (l.name == name) return &l;
  return nullptr;
}

const law_result* check_report::find(law which) const { return find(to_string(which)); }

static std::string verdict(const law_result& l) {
  if (l.status == law_status::not_run) return "not run: " + l.why_not_run;
  if (l.status == law_status::holds) return l.claimed ? "holds" : "holds (not claimed)";
  return l.claimed ? "FAILS" : "does not hold (not claimed)";
}

std::string check_report::table() const {
  std::string out = fmt::format("{}: {}\nparameters {}, positions {}{}{}, seed {}, {} trials per law\n", encoding,
                                summary, parameters, positions,
                                position_note.empty() ? "" : fmt::format(" ({})", position_note),
                                position_draws.empty() ? "" : fmt::format(" with {}", position_draws), options.seed,
                                options.trials);
  out += fmt::format("reference: {}\n", reference);
  for (const auto& n : notes) out += fmt::format("note: {}\n", n);
  out += fmt::format("  {:<26} {:<8} {:<28} {:>6}  {}\n", "law", "claimed", "result", "trials", "tolerance");
  for (const auto& l : laws) {
    if (l.status == law_status::not_run)  // nothing was tried: no trials, no tolerance
      out += fmt::format("  {:<26} {:<8} {}\n", l.name, "-", verdict(l));
    else
      out += fmt::format("  {:<26} {:<8} {:<28} {:>6}  {}\n", l.name, l.claimed ? "yes" : "no", verdict(l),
                         l.trials, l.tolerance);
  }
  for (const auto& l : laws) {
    if (!l.example) continue;
    const auto& e = *l.example;
    out += fmt::format("  counterexample for {} (shrunk): {}\n    {}: {:.17g} vs {:.17g}, error {:.3g} > tolerance {:.3g}\n",
                       l.name, e.positions, e.what, e.lhs, e.rhs, e.error, e.tolerance);
  }
  out += "  (trials: the trials that passed, plus the failing one when a law fails; its shrunk\n"
         "   counterexample prints the two sides of the law where they differ most)\n";
  out += passed() ? "result: every claimed law holds\n" : "result: a claimed law FAILS\n";
  return out;
}

}  // namespace grape
