#pragma once
// The laws an encoding can claim. Each is checked by a law tester (check/builtin_laws.hpp) run as
// a rapidcheck property (check/checker.hpp); docs/concepts.md states them as formulas.
#include <array>
#include <string_view>

namespace grape {

enum class law : unsigned {
  group = 1u << 0,                     // identity, associativity, inverse of the position group
  homomorphism = 1u << 1,              // ρ(a∘b) = ρ(a)ρ(b)
  relative = 1u << 2,                  // ρ(m)ᵀκ(n) = ρ(e)ᵀκ(m⁻¹∘n): the bilinear form depends on the offset
  score_invariance = 1u << 3,          // score(q, k, t∘m, t∘n) = score(q, k, m, n), content fixed
  content_shift_invariance = 1u << 4,  // the same with the content moved along with the positions
  norm_preservation = 1u << 5,         // ‖ρ(m)x‖ = ‖x‖
  reference_agreement = 1u << 6,       // apply (float64) = exp(Σ c_k L_k) x (Eigen, dense)
  float32_agreement = 1u << 7,          // apply in float32 (the element code the kernels inline) = reference
  shift_linear = 1u << 8,              // PE(m + k) = M_k·PE(m) with M_k independent of m
};

inline constexpr std::array<law, 9> all_laws = {
    law::group,     law::homomorphism,        law::relative,
    law::score_invariance, law::content_shift_invariance, law::norm_preservation,
    law::reference_agreement, law::float32_agreement, law::shift_linear};

inline constexpr std::string_view to_string(law l) {
  switch (l) {
    case law::group: return "group";
    case law::homomorphism: return "homomorphism";
    case law::relative: return "relative";
    case law::score_invariance: return "score_invariance";
    case law::content_shift_invariance: return "content_shift_invariance";
    case law::norm_preservation: return "norm_preservation";
    case law::reference_agreement: return "reference_agreement";
    case law::float32_agreement: return "float32_agreement";
    case law::shift_linear: return "shift_linear";
  }
  return "?";
}

inline constexpr std::string_view formula(law l) {
  switch (l) {
    case law::group: return "e∘a = a, (a∘b)∘c = a∘(b∘c), a⁻¹∘a = e";
    case law::homomorphism: return "ρ(a∘b)x = ρ(a)ρ(b)x";
    case law::relative: return "(ρ(m)x)ᵀ(κ(n)y) = (ρ(e)x)ᵀ(κ(m⁻¹∘n)y)";
    case law::score_invariance: return "score(q,k,t∘m,t∘n) = score(q,k,m,n)";
    case law::content_shift_invariance: return "score with content shifted by t = unshifted score";
    case law::norm_preservation: return "‖ρ(m)x‖ = ‖x‖";
    case law::reference_agreement: return "ρ(c)x = exp(Σ c_k L_k)x in float64";
    case law::float32_agreement: return "float32 element path ρ(c)x = exp(Σ c_k L_k)x";
    case law::shift_linear: return "PE(m+k) = M_k·PE(m), M_k independent of m";
  }
  return "?";
}

/// A set of laws (bit flags).
struct law_set {
  unsigned bits = 0;
  constexpr law_set() = default;
  constexpr law_set(law l) : bits(static_cast<unsigned>(l)) {}
  constexpr bool contains(law l) const { return (bits & static_cast<unsigned>(l)) != 0; }
  friend constexpr law_set operator|(law_set a, law_set b) {
    law_set s;
    s.bits = a.bits | b.bits;
    return s;
  }
};
constexpr law_set operator|(law a, law b) { return law_set(a) | law_set(b); }

/// Laws of your own, added without editing grape: an encoding claims them by listing their tester
/// types, `using extra_laws = grape::law_list<my_law, ...>;`. A tester is a type with
///   static constexpr std::string_view name, formula, tolerance;
///   template <class E> static std::optional<counterexample> trial(detail::trial_inputs<E>& t);
/// (the LawTester concept, check/checker.hpp): `trial` gets the trial's parameters, instance,
/// head and a seeded generator, draws what else it needs with rapidcheck generators (which
/// shrink), and returns a counterexample when the law fails. The built-in laws are testers of the
/// same kind (check/builtin_laws.hpp), and the checker runs both through one runner: same seed
/// handling, trial count, shrinking and report row.
template <class... Laws>
struct law_list {};

namespace detail {
template <class E>
struct trial_inputs;  // one trial's draws (check/checker.hpp)
}  // namespace detail

/// The laws every orthogonal rotary encoding claims.
inline constexpr law_set rotary_laws = law::group | law::homomorphism | law::relative |
                                       law::score_invariance | law::norm_preservation |
                                       law::reference_agreement | law::float32_agreement;

}  // namespace grape
