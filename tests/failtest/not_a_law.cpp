// Expected: "grape: an entry of extra_laws is not a law tester"
#include "grape/check/checker.hpp"
#include "grape/encodings/rope.hpp"
struct no_trial {
  static constexpr std::string_view name = "no_trial";
  static constexpr std::string_view formula = "";
  static constexpr std::string_view tolerance = "";
};
struct rope_with_a_bad_law : grape::rope_family<grape::layout_kind::half_split> {
  static constexpr std::string_view name = "rope_with_a_bad_law";
  static constexpr std::string_view summary = "RoPE listing a law with no trial";
  using extra_laws = grape::law_list<no_trial>;
};
int main() { return grape::check<rope_with_a_bad_law>(grape::check_options{}).passed() ? 0 : 1; }
