// The GRAPE paper's path-integral bias checked as a user would: the authors' formula
// (grape_ap_reference.hpp) against grape's variant with both sides rotated (grape_ap_relative).
// Exits 0 when the checker finds what docs/grape-paper.md reports: the authors' formula is not
// translation invariant with the content moved along (a counterexample), grape's variant is, and
// both are causal, non-positive and monotone along the path; and contextual GRAPE-M (the authors'
// formula as it is) is relative in its real phases, not in the token index for fixed content.
#include <cstdio>

#include "grape/check/builtin_checks.hpp"
#include "grape_ap_reference.hpp"

namespace {
bool holds(const grape::check_report& r, std::string_view law) {
  const auto* row = r.find(law);
  return row && row->status == grape::law_status::holds;
}
}  // namespace

int main() {
  const auto reference = grape::check<grape_ap_reference>(grape::check_options{});
  std::printf("%s\n", reference.table().c_str());
  const auto relative = grape::check<grape::grape_ap_relative>(grape::check_options{});
  std::printf("%s\n", relative.table().c_str());

  const auto* shift = reference.find(grape::law::content_shift_invariance);
  const bool reference_not_relative = shift && shift->status == grape::law_status::fails && shift->example;
  bool both_causal_penalties = true;
  for (const auto* r : {&reference, &relative})
    for (std::string_view law : {"causal_mask", "nonpositive_bias", "monotone_path"})
      both_causal_penalties = both_causal_penalties && holds(*r, law);
  const auto contextual = grape::check<grape::grape_m_contextual>(grape::check_options{});
  std::printf("%s\n", contextual.table().c_str());
  const bool phases_relative = contextual.passed() && holds(contextual, "phase_shift_invariance") &&
                               holds(contextual, "phase_difference") && !holds(contextual, "score_invariance");
  const bool ok = reference_not_relative && holds(reference, "reference_agreement") && relative.passed() &&
                  both_causal_penalties && phases_relative;
  std::printf("%s\n", ok ? "as documented: the authors' GRAPE-AP is not relative; grape_ap_relative is; "
                           "contextual GRAPE-M is relative in its phases"
                         : "NOT as documented");
  return ok ? 0 : 1;
}
