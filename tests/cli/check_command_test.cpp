// grape list and grape check, run as a user would: exit codes, output, one-line errors.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <sys/wait.h>
#include <unistd.h>

namespace {

struct run_result {
  int code;
  std::string out;
  std::string err;
};

run_result run_grape(const std::string& args) {
  // One file per process: ctest runs each test of this program as its own process, in parallel.
  const std::string err_file = std::string(GRAPE_BINARY_DIR) + "/check_command_test." + std::to_string(::getpid()) + ".err";
  const std::string cmd = std::string(GRAPE_BINARY_DIR) + "/bin/grape " + args + " 2>" + err_file;
  run_result r{0, "", ""};
  FILE* p = popen(cmd.c_str(), "r");
  std::array<char, 4096> buf{};
  while (std::fgets(buf.data(), buf.size(), p)) r.out += buf.data();
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (FILE* e = std::fopen(err_file.c_str(), "r")) {
    while (std::fgets(buf.data(), buf.size(), e)) r.err += buf.data();
    std::fclose(e);
  }
  std::remove(err_file.c_str());
  return r;
}

TEST(CheckCommand, ListNamesEveryBuiltinWithItsClaims) {
  const auto r = run_grape("list --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.size(), 19u);
  bool saw_alibi = false;
  for (const auto& e : j) {
    EXPECT_FALSE(e["claims"].empty()) << e.dump();
    if (e["name"] == "alibi") {
      saw_alibi = true;
      EXPECT_NE(e["claims"].dump().find("score_invariance"), std::string::npos);
    }
  }
  EXPECT_TRUE(saw_alibi);
}

TEST(CheckCommand, PassingEncodingExitsZero) {
  const auto r = run_grape("check rope --trials 30 --seed 3");
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("relative"), std::string::npos);
  EXPECT_NE(r.out.find("every claimed law holds"), std::string::npos);
}

TEST(CheckCommand, MaxPositionNarrowsTheRangeAndSaysSo) {
  const auto wide = run_grape("check rope --trials 10");
  EXPECT_NE(wide.out.find("positions -2147483647..2147483647 with 1 draw in 8 an edge case"), std::string::npos)
      << wide.out;
  const auto r = run_grape("check rope --trials 10 --max-position 1000");
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("positions -999..999 (narrowed by max_position"), std::string::npos) << r.out;
  const auto bad = run_grape("check rope --max-position 0");
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("--max-position: must be >= 1 (got 0)"), std::string::npos) << bad.err;
  const auto fox = run_grape("check fox --trials 10");
  EXPECT_NE(fox.out.find("positions 0..255 (the gate sequence"), std::string::npos) << fox.out;
}

TEST(CheckCommand, ParamsFixTheEncodingsParametersAndBadOnesAreOneLine) {
  const auto r = run_grape("check rope --trials 10 --params '{\"head_dim\": 16, \"rotary_dim\": 16, \"base\": 500.0}'");
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("parameters fixed: head_dim=16 rotary_dim=16 base=500 attention_factor=1"), std::string::npos)
      << r.out;
  const std::array<std::pair<const char*, const char*>, 4> bad{{
      {"'{\"bse\": 1}'", "grape: --params: rope: no parameter 'bse' (it takes head_dim, rotary_dim, base, attention_factor)"},
      {"'{\"base\": \"x\"}'", "grape: --params: rope.base: must be a number (got \"x\")"},
      {"'{\"head_dim\": 16.5}'", "grape: --params: rope.head_dim: must be an integer (got 16.5)"},
      {"'[1]'", "grape: --params: rope: must be a JSON object (got [1])"},
  }};
  for (const auto& [json, message] : bad) {
    const auto b = run_grape(std::string("check rope --params ") + json);
    EXPECT_EQ(b.code, 2) << json;
    EXPECT_EQ(b.err, std::string(message) + "\n") << json;
  }
  const auto broken = run_grape("check rope --params '{'");
  EXPECT_EQ(broken.code, 2);
  EXPECT_EQ(broken.err.rfind("grape: --params: not JSON", 0), 0u) << broken.err;
}

TEST(CheckCommand, UnclaimedFailuresAreReportedButDoNotFail) {
  const auto r = run_grape("check sinusoidal --json");
  EXPECT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  bool score_law_reported = false;
  for (const auto& law : j["laws"])
    if (law["law"] == "score_invariance") {
      score_law_reported = true;
      EXPECT_FALSE(law["claimed"].get<bool>());
      EXPECT_FALSE(law["holds"].get<bool>());
      EXPECT_TRUE(law.contains("counterexample"));
    }
  EXPECT_TRUE(score_law_reported);
}

TEST(CheckCommand, BadInputExitsTwoWithOneLine) {
  for (const char* args : {"check no_such_encoding", "check rope --trials 0", "check rope --seed banana",
                           "check", "frobnicate"}) {
    const auto r = run_grape(args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.err;
    EXPECT_FALSE(r.err.empty()) << args;
  }
  const auto r = run_grape("check no_such_encoding");
  EXPECT_EQ(r.err, "grape: encoding: unknown name 'no_such_encoding' (grape list names them)\n");
}

}  // namespace
