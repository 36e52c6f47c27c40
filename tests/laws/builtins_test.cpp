// Every built-in passes its claimed laws, and the unclaimed ones are classified as the mathematics
// says (grape-math.md): sinusoidal is shift-linear but fails the score law; learned_absolute fails
// both; fox is invariant only when the content moves with the positions; lifts and xPos are not
// norm-preserving.
#include <gtest/gtest.h>

#include <boost/hana/tuple.hpp>
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
  EXPECT_EQ(check<rope>(check_options{2, 1}).positions, "-1048575..1048575");
  EXPECT_EQ(check<xpos>(check_options{2, 1}).positions, "-4095..4095");
  EXPECT_EQ(check<fox>(check_options{2, 1}).positions, "0..255");
  EXPECT_EQ(check<learned_absolute>(check_options{2, 1}).positions, "0..1023");
  const auto table = check<alibi>(check_options{2, 1}).table();
  EXPECT_NE(table.find("positions -1048575..1048575"), std::string::npos) << table;
  EXPECT_EQ(nlohmann::json(check<alibi>(check_options{2, 1})).at("positions"), "-1048575..1048575");
}

TEST(Builtins, UnknownNameIsAnInputError) {
  EXPECT_THROW(check_builtin("no_such_encoding"), input_error);
}

}  // namespace
}  // namespace grape
