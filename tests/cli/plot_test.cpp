// grape plot, run as a process: each kind writes a picture; bad requests exit 2 with nothing left.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

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

/// The centred text labels of a gnuplot svg (tick labels on the x axis among them): x and text.
std::vector<std::pair<double, std::string>> centred_labels(const std::string& svg) {
  std::vector<std::pair<double, std::string>> out;
  for (std::size_t at = svg.find("<g transform=\"translate("); at != std::string::npos;
       at = svg.find("<g transform=\"translate(", at + 1)) {
    const std::size_t tag_end = svg.find('>', at);
    if (svg.substr(at, tag_end - at).find("text-anchor=\"middle\"") == std::string::npos) continue;
    const std::size_t text = svg.find("<tspan", tag_end), open = svg.find('>', text), close = svg.find('<', open);
    if (text == std::string::npos || svg.substr(tag_end, text - tag_end).find("<g") != std::string::npos) continue;
    out.emplace_back(std::stod(svg.substr(at + 24)), svg.substr(open + 1, close - open - 1));
  }
  return out;
}

TEST(Plot, AxesEndAtTheDataAndLabelsStayInsideThePicture) {
  const scratch s;
  auto r = run_grape("plot " + q(config_path("llama-3.1-8b")) + " --kind bands --out " + q(s / "b.svg"));
  ASSERT_EQ(r.code, 0) << r.err;
  int last_tick = -1;  // llama-3.1-8b: 64 planes, 0..63
  for (const auto& [x, label] : centred_labels(slurp(s / "b.svg")))
    if (label.find_first_not_of(" 0123456789") == std::string::npos && label.find_first_of("0123456789") != std::string::npos)
      last_tick = std::max(last_tick, std::stoi(label));
  EXPECT_EQ(last_tick, 60);  // not 70: the axis ends at the last plane
  r = run_grape("plot " + q(config_path("llama-3.1-8b")) + " --kind decay --out " + q(s / "d.svg"));
  ASSERT_EQ(r.code, 0) << r.err;
  const auto labels = centred_labels(slurp(s / "d.svg"));
  ASSERT_FALSE(labels.empty());
  for (const auto& [x, label] : labels)  // 900 px wide; Arial 12 is under 7 px a character
    EXPECT_LT(x + 3.5 * static_cast<double>(label.size()), 900.0) << "'" << label << "' is clipped";
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
