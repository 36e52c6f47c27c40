// launch_items: which items run on a thread team and which on the caller alone.
#include <gtest/gtest.h>
#include <omp.h>

#include <set>
#include <vector>

#include "cpu/launch.hpp"

namespace grape {
namespace {

std::set<int> threads_used(std::int64_t count, std::int64_t min_parallel) {
  std::vector<int> thread_of(static_cast<std::size_t>(count), -1);
  cpu::detail::launch_items(count, 0, 2, [&](std::int64_t t, float*) { thread_of[t] = omp_get_thread_num(); },
                            min_parallel);
  return {thread_of.begin(), thread_of.end()};
}

/// Decode has a few large items (one per ~1024 cached tokens) and lowers min_parallel to 2: four
/// items must run on two threads (a 4k-token decode ran on one while the bound was fixed at 16).
TEST(LaunchItems, MinParallelDecidesWhetherTheTeamRuns) {
  EXPECT_EQ(threads_used(4, 2), (std::set<int>{0, 1}));
  EXPECT_EQ(threads_used(4, 16), (std::set<int>{0}));
  EXPECT_EQ(threads_used(16, 16), (std::set<int>{0, 1}));
  EXPECT_EQ(threads_used(1, 2), (std::set<int>{0}));
}

}  // namespace
}  // namespace grape
