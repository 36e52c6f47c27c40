// grape plot, run as a process: each kind writes a picture; bad requests exit 2 with nothing left.
#include <gtest/gtest.h>

#include "cli_util.hpp"

namespace {

using namespace grape::cli_test;

bool is_png(const fs::path& p) { return slurp(p).rfind("\x89PNG", 0) == 0; }
bool is_svg(const fs::path& p) { return slurp(p).find("<svg") != std::string::npos; }

// A horizontal text of gnuplot's svg terminal: <g transform="translate(x,y)" ... text-anchor="a">
// <text><tspan ...>label</tspan>...</text>.
struct svg_text {
  double x = 0;
  std::string anchor, label;
};

std::vector<svg_text> texts_of(const std::string& svg) {
  std::vector<svg_text> out;
  const std::string open = "<g transform=\"translate(";
  for (auto at = svg.find(open); at != std::string::npos; at = svg.find(open, at + 1)) {
    const auto tag_end = svg.find('>', at);
    const std::string tag = svg.substr(at, tag_end - at);
    const auto text = svg.find_first_not_of(" \t\n", tag_end + 1);
    if (tag.find("rotate") != std::string::npos || svg.compare(text, 6, "<text>") != 0) continue;  // vertical, or no text
    svg_text t;
    t.x = std::stod(tag.substr(open.size()));
    const auto a = tag.find("text-anchor=\"");
    if (a != std::string::npos) t.anchor = tag.substr(a + 13, tag.find('"', a + 13) - a - 13);
    bool in_tag = false;
    for (char c : svg.substr(text, svg.find("</text>", text) - text)) {
      if (c == '<' || c == '>') in_tag = c == '<';
      else if (!in_tag && c != ' ') t.label += c;
    }
    out.push_back(t);
  }
  return out;
}

// The horizontal extent of a text, from a generous 0.7 em per character (12 px Arial averages ~0.55).
std::pair<double, double> extent(const svg_text& t) {
  const double w = 0.7 * 12 * static_cast<double>(t.label.size());
  if (t.anchor == "middle") return {t.x - w / 2, t.x + w / 2};
  if (t.anchor == "end") return {t.x - w, t.x};
  return {t.x, t.x + w};
}

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

TEST(Plot, BandsAxisEndsAtTheLastPlane) {
  // head_dim 128: planes 0 .. 63; the x tick labels (centred integers) stop at 60, not 70.
  const scratch s;
  const auto r = run_grape("plot " + q(config_path("llama-3.1-8b")) + " --kind bands --out " + q(s / "b.svg"));
  ASSERT_EQ(r.code, 0) << r.err;
  int last_tick = -1;
  for (const auto& t : texts_of(slurp(s / "b.svg")))
    if (t.anchor == "middle" && !t.label.empty() && t.label.find_first_not_of("0123456789") == std::string::npos)
      last_tick = std::max(last_tick, std::stoi(t.label));
  EXPECT_EQ(last_tick, 60);
}

TEST(Plot, DecayTickLabelsLieInsideThePicture) {
  const scratch s;
  for (const char* model : {"llama-3.1-8b", "qwen2.5-7b-instruct-yarn", "mpt-7b"}) {
    const auto r = run_grape("plot " + q(config_path(model)) + " --kind decay --out " + q(s / "d.svg"));
    ASSERT_EQ(r.code, 0) << r.err;
    const auto texts = texts_of(slurp(s / "d.svg"));
    ASSERT_GT(texts.size(), 10u) << model;
    for (const auto& t : texts) {
      if (t.label.find_first_not_of("0123456789.-x") != std::string::npos) continue;  // tick labels only
      const auto [left, right] = extent(t);
      EXPECT_GE(left, 0) << model << ": " << t.label;
      // The svg terminal's width, less an em: the PNG terminals' fonts run wider than the estimate.
      EXPECT_LE(right, 900 - 12) << model << ": " << t.label;
    }
  }
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
