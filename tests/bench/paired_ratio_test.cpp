// The statistics grape-bench reports (bench/paired_ratio.hpp), against quantiles worked out by
// hand with the linear interpolation rule h = q·(n−1): x[⌊h⌋] + (h − ⌊h⌋)·(x[⌊h⌋+1] − x[⌊h⌋]).
#include <gtest/gtest.h>

#include "paired_ratio.hpp"

namespace grape_bench {
namespace {

TEST(PairedRatio, QuantilesInterpolateBetweenOrderStatistics) {
  const std::vector<double> v = {4.0, 1.0, 3.0, 2.0};  // unsorted on purpose
  EXPECT_DOUBLE_EQ(quantile(v, 0.0), 1.0);
  EXPECT_DOUBLE_EQ(quantile(v, 0.25), 1.75);  // h = 0.75
  EXPECT_DOUBLE_EQ(quantile(v, 0.5), 2.5);    // h = 1.5
  EXPECT_DOUBLE_EQ(quantile(v, 0.75), 3.25);  // h = 2.25
  EXPECT_DOUBLE_EQ(quantile(v, 1.0), 4.0);
}

TEST(PairedRatio, OddCountMedianIsTheMiddleValue) {
  EXPECT_DOUBLE_EQ(quantile({0.9, 1.2, 0.5, 1.0, 0.7}, 0.5), 0.9);
  EXPECT_DOUBLE_EQ(quantile({0.93}, 0.5), 0.93);
  EXPECT_DOUBLE_EQ(quantile({}, 0.5), 0.0);
}

TEST(PairedRatio, CaseFiguresComeFromThePairs) {
  case_result r;
  r.paired = {1.10, 0.80, 0.95, 1.00, 0.90, 0.60, 1.05, 0.97};
  // Sorted: 0.60 0.80 0.90 0.95 0.97 1.00 1.05 1.10; h = 3.5, 1.75, 5.25.
  EXPECT_DOUBLE_EQ(r.ratio(), 0.96);
  EXPECT_DOUBLE_EQ(r.lower_quartile(), 0.875);
  EXPECT_DOUBLE_EQ(r.upper_quartile(), 1.0125);
}

}  // namespace
}  // namespace grape_bench
