// grape plot, run as a process: each kind writes a picture; bad requests exit 2 with nothing left.
#include <gtest/gtest.h>

#include "cli_util.hpp"

namespace {

using namespace grape::cli_test;

bool is_png(const fs::path& p) { return slurp(p).rfind("\x89PNG", 0) == 0; }
bool is_svg(const fs::path& p) { return slurp(p).find("<svg") != std::string::npos; }

TEST(Plot, EachKindWritesAPicture) {
  const scratch s;
  auto r = run_grape("plot rope --kind heatmap --out " + q(s / "h.png"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(is_png(s / "h.png"));
  r = run_grape("plot " + q(config_path("llama-3.1-8b")) + " --kind bands --out " + q(s / "b.svg"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(is_svg(s / "b.svg"));
  r = run_grape("plot " + q(config_path("qwen2.5-7b-instruct-yarn")) + " --kind decay --out " + q(s / "d.png"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(is_png(s / "d.png"));
  r = run_grape("plot " + q(config_path("mpt-7b")) + " --kind decay --out " + q(s / "a.svg"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(s.names(), (std::vector<std::string>{"a.svg", "b.svg", "d.png", "h.png"}));
}

TEST(Plot, BadRequestsExitTwoAndLeaveNothing) {
  const scratch s;
  for (const std::string& args :
       {"plot " + q(config_path("t5-small")) + " --kind heatmap --out " + q(s / "x.png"),
        "plot " + q(config_path("bloom")) + " --kind bands --out " + q(s / "x.png"),
        "plot rope --kind heatmap --out " + q(s / "x.jpg"),
        "plot rope --kind spiral --out " + q(s / "x.png"),
        "plot nosuchmodel --kind heatmap --out " + q(s / "x.png")}) {
    const auto r = run_grape(args);
    EXPECT_EQ(r.code, 2) << args << ": " << r.err;
    EXPECT_TRUE(s.names().empty()) << args;
  }
}

}  // namespace
