// Every built-in passes its claimed laws, and the unclaimed ones are classified as the mathematics
// says (grape-math.md): sinusoidal is shift-linear but fails the score law; learned_absolute fails
// both; fox is invariant only when the content moves with the positions; lifts and xPos are not
// norm-preserving.
#include <gtest/gtest.h>

#include <boost/hana/tuple.hpp>
#include <algorithm>
#include <cstdlib>
#include <set>
#include <vector>
#include <string_view>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "grape/check/builtin_checks.hpp"
#include "grape/check/report_json.hpp"

namespace grape {
namespace {

/// One typed test per built-in, the list taken from the registry: each is its own ctest entry,
/// run in parallel and named in a failure (check<E> itself is compiled once, in src/check/).
template <class Tuple>
struct gtest_types_of;
template <class... T>
struct gtest_types_of<boost::hana::tuple<T...>> {
  using type = ::testing::Types<typename T::type...>;
};
using builtin_types = gtest_types_of<std::remove_cv_t<decltype(builtin_encodings)>>::type;

template <class E>
class EveryBuiltin : public ::testing::Test {};
TYPED_TEST_SUITE(EveryBuiltin, builtin_types);

TYPED_TEST(EveryBuiltin, EveryClaimedLawHolds) {
  using E = TypeParam;
  const auto report = check<E>(check_options{});
  EXPECT_TRUE(report.passed()) << report.table();
  for (law l : all_laws) {
    if (E::claims.contains(l)) {
      EXPECT_NE(report.find(l), nullptr) << E::name << " claims " << to_string(l) << " but it was not checked";
    }
  }
  // The kernel laws run where a compiled kernel exists (lists written out, not derived from the
  // laws' own applicability), and every report names what it compared with besides itself.
  const std::set<std::string_view> rotating = {"rope",     "rope_interleaved", "xpos",     "grape_m",   "mrope",
                                               "axial_2d", "string_rope",      "liere_2d", "rope_alibi"};
  const std::set<std::string_view> tiled = {"alibi",           "t5_buckets",       "fox", "rope_alibi", "grape_a_key_gated",
                                            "grape_a_qk_gated", "grape_ap_relative"};
  const std::set<std::string_view> embedded = {"sinusoidal", "learned_absolute"};
  const std::set<std::string_view> attended = {"rope",        "rope_interleaved", "alibi",      "t5_buckets",
                                               "xpos",        "grape_m",          "grape_a",    "fox",
                                               "string_rope", "rope_alibi",       "grape_a_key_gated",
                                               "grape_a_qk_gated", "grape_ap_relative", "grape_m_contextual"};
  EXPECT_EQ(report.find(std::string_view("cpu_kernel")) != nullptr, rotating.contains(E::name)) << report.table();
  EXPECT_EQ(report.find(std::string_view("cuda_body_emulated")) != nullptr, rotating.contains(E::name)) << report.table();
  EXPECT_EQ(report.find(std::string_view("bias_tile")) != nullptr, tiled.contains(E::name)) << report.table();
  EXPECT_EQ(report.find(std::string_view("lift_kernel")) != nullptr, E::name == "grape_a") << report.table();
  EXPECT_EQ(report.find(std::string_view("embedding_kernel")) != nullptr, embedded.contains(E::name)) << report.table();
  EXPECT_EQ(report.find(std::string_view("attention_kernel")) != nullptr, attended.contains(E::name)) << report.table();
  // The relative law on the fused kernel: claimed with score_invariance, and the content-bound
  // biases (their gates held fixed while the positions move) are shown not to have it.
  const auto* shift = report.find(std::string_view("attention_shift"));
  EXPECT_EQ(shift != nullptr, attended.contains(E::name)) << report.table();
  if (shift != nullptr) {
    EXPECT_EQ(shift->claimed, E::claims.contains(law::score_invariance)) << report.table();
    // Content-bound biases (FoX, the gated GRAPE-A and GRAPE-AP) with their content held fixed, and
    // contextual GRAPE-M, whose phases stay with their tokens while the indices move.
    const bool content_bound =
        E::claims.contains(law::content_shift_invariance) || cpu::rotates_by_phase<typename E::instance>;
    EXPECT_EQ(shift->status == law_status::holds, !content_bound) << report.table();
  }
  const bool referenced = report.reference.rfind("none", 0) != 0;
  EXPECT_EQ(referenced, detail::has_representation<E> || detail::has_reference_bias<E>) << report.reference;
}

bool holds(const check_report& r, law l) {
  const auto* x = r.find(l);
  EXPECT_NE(x, nullptr) << r.encoding << ": " << to_string(l) << " was not checked";
  return x && x->status == law_status::holds;
}

TEST(Builtins, UnclaimedLawsAreClassifiedHonestly) {
  const auto sin = check<sinusoidal>(check_options{});
  EXPECT_TRUE(holds(sin, law::shift_linear));
  EXPECT_FALSE(holds(sin, law::score_invariance));
  ASSERT_TRUE(sin.find(law::score_invariance)->example.has_value());

  const auto learned = check<learned_absolute>(check_options{});
  EXPECT_FALSE(holds(learned, law::shift_linear));
  EXPECT_FALSE(holds(learned, law::score_invariance));

  const auto f = check<fox>(check_options{});
  EXPECT_TRUE(holds(f, law::content_shift_invariance));
  EXPECT_FALSE(holds(f, law::score_invariance));

  EXPECT_FALSE(holds(check<grape_a>(check_options{}), law::norm_preservation));
  EXPECT_FALSE(holds(check<xpos>(check_options{}), law::norm_preservation));
  EXPECT_TRUE(holds(check<alibi>(check_options{}), law::score_invariance));
}

TEST(Builtins, ReportsAreReproducibleFromTheSeed) {
  const auto a = check<sinusoidal>(check_options{50, 7}).table();
  const auto b = check<sinusoidal>(check_options{50, 7}).table();
  EXPECT_EQ(a, b);
}

/// Positions of both signs for the groups that have them (Z^N); from 0 for a table or a gate
/// sequence. The report says which range it drew from.
TEST(Builtins, ReportsThePositionRangeItDrewFrom) {
  EXPECT_EQ(check<rope>(check_options{2, 1}).positions, "-2147483647..2147483647");
  EXPECT_EQ(check<xpos>(check_options{2, 1}).positions, "-4095..4095");
  EXPECT_EQ(check<fox>(check_options{2, 1}).positions, "0..255");
  EXPECT_EQ(check<learned_absolute>(check_options{2, 1}).positions, "0..1023");
  const auto table = check<alibi>(check_options{2, 1}).table();
  EXPECT_NE(table.find("positions -2147483647..2147483647 with 1 draw in 8 an edge case"), std::string::npos) << table;
  EXPECT_EQ(nlohmann::json(check<alibi>(check_options{2, 1})).at("positions"), "-2147483647..2147483647");
  const auto narrowed = check<alibi>(check_options{2, 1, 100});
  EXPECT_EQ(narrowed.positions, "-99..99");
  EXPECT_NE(narrowed.table().find("(narrowed by max_position from the encoding's 2147483647)"), std::string::npos);
  EXPECT_NE(check<xpos>(check_options{2, 1}).table().find("positions -4095..4095 (the key scale"), std::string::npos);
}

/// A law that only records the positions a trial draws.
struct position_census {
  static inline std::vector<std::int64_t> drawn;
  static constexpr std::string_view name = "position_census";
  static constexpr std::string_view formula = "records the positions drawn";
  static constexpr std::string_view tolerance = "none";
  template <class E>
  static std::optional<counterexample> trial(detail::trial_inputs<E>& t) {
    drawn.push_back(t.draw_position());
    drawn.push_back(t.draw_position());  // in pairs, as a query's and a key's position
    return std::nullopt;
  }
};
struct alibi_with_census : encoding<translation<1>, no_representation, score_bias<alibi_bias>> {
  static constexpr std::string_view name = "alibi_with_census";
  static constexpr std::string_view summary = "ALiBi, recording the positions its trials draw";
  static constexpr law_set claims = alibi::claims;
  using extra_laws = law_list<position_census>;
  using params = alibi::params;
  static params random_params(std::mt19937_64& rng) { return alibi::random_params(rng); }
  static instance make(const params& p) { return alibi::make(p); }
};

TEST(Builtins, DrawsLongPositionsOfBothSignsAndKeepsMostSmall) {
  position_census::drawn.clear();
  (void)check<alibi_with_census>(check_options{400, 1});
  const auto& d = position_census::drawn;
  ASSERT_GE(d.size(), 400u);
  const auto count = [&](auto pred) { return std::count_if(d.begin(), d.end(), pred); };
  // Three in four are below 1024; one in four is log-uniform over bit lengths 11..31, so about
  // 7 in 84 lie past 2^24, where a float32 position is no longer exact.
  EXPECT_GE(count([](std::int64_t m) { return std::abs(m) < 1024; }), static_cast<long>(d.size() * 6 / 10));
  EXPECT_GE(count([](std::int64_t m) { return std::abs(m) > (std::int64_t{1} << 24); }), 10);
  EXPECT_GE(count([](std::int64_t m) { return m < 0; }), static_cast<long>(d.size() / 4));
  EXPECT_TRUE(std::all_of(d.begin(), d.end(), [](std::int64_t m) { return std::abs(m) < (std::int64_t{1} << 31); }));
}

/// One draw in eight is an edge case: each of 0, ±1 and the range's two ends comes up, and a trial's
/// second position repeats its first (m = n) far more often than uniform draws would.
TEST(Builtins, DrawsTheEdgeCasesInAFixedShare) {
  position_census::drawn.clear();
  (void)check<alibi_with_census>(check_options{400, 1});
  const auto& d = position_census::drawn;
  ASSERT_GE(d.size(), 800u);
  const std::int64_t top = (std::int64_t{1} << 31) - 1;
  for (const std::int64_t edge : {std::int64_t{0}, std::int64_t{1}, std::int64_t{-1}, top, -top})
    EXPECT_GE(std::count(d.begin(), d.end(), edge), 3) << edge;
  long repeats = 0;
  for (std::size_t i = 0; i + 1 < d.size(); i += 2) repeats += d[i] == d[i + 1] && d[i] != 0;
  EXPECT_GE(repeats, 3) << "pairs m = n away from 0";
  EXPECT_NE(check<alibi>(check_options{2, 1}).table().find(
                "with 1 draw in 8 an edge case (the previous position again, so m = n; 0, ±1, an end of the range)"),
            std::string::npos);
}

TEST(Builtins, UnknownNameIsAnInputError) {
  EXPECT_THROW(check_builtin("no_such_encoding"), input_error);
}

}  // namespace
}  // namespace grape
