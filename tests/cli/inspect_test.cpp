// grape inspect, run as a process: every bundled config, the JSON form against the formulas, and
// bad input (exit 2, one line on stderr naming file and field).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "../model/formulas.hpp"
#include "cli_util.hpp"

namespace {

using namespace grape::cli_test;
namespace tf = grape::test_formulas;
using nlohmann::json;

const char* const bundled[] = {"llama-2-7b",   "llama-3.1-8b", "mistral-7b-v0.1", "qwen2.5-7b-instruct-yarn",
                               "codellama-7b", "gemma-2b",     "deepseek-v3",     "gpt-neox-20b",
                               "gpt-j-6b",     "falcon-7b",    "bloom",           "mpt-7b",
                               "t5-small",     "synthetic-longrope"};

TEST(Inspect, EveryBundledConfigSucceeds) {
  for (const char* name : bundled) {
    const auto r = run_grape("inspect --trials 5 " + q(config_path(name)));
    EXPECT_EQ(r.code, 0) << name << ": " << r.err;
    EXPECT_EQ(r.err, "") << name;
    EXPECT_NE(r.out.find("KV cache (bf16"), std::string::npos) << name;
    const auto j = run_grape("inspect --trials 5 --json " + q(config_path(name)));
    ASSERT_EQ(j.code, 0) << name << ": " << j.err;
    const auto o = json::parse(j.out);
    for (const char* key : {"kind", "layout", "head_dim", "rotary_dim", "inv_freq", "attention_factor",
                            "alibi_slopes", "frequency_precision", "kv_cache"})
      EXPECT_TRUE(o.contains(key)) << name << " lacks " << key;
  }
}

TEST(Inspect, JsonMatchesFormulasForQwenYarn) {
  const auto r = run_grape("inspect --trials 5 --json --precision float64 " + q(config_path("qwen2.5-7b-instruct-yarn")));
  ASSERT_EQ(r.code, 0) << r.err;
  const auto o = json::parse(r.out);
  EXPECT_EQ(o["kind"], "rotary");
  EXPECT_EQ(o["layout"], "half_split");
  EXPECT_EQ(o["head_dim"], 128);
  EXPECT_EQ(o["rotary_dim"], 128);
  EXPECT_EQ(o["frequency_precision"], "float64");
  const auto want = tf::rope_yarn(1e6, 128, 4.0, 32768);
  const auto got = o["inv_freq"].get<std::vector<double>>();
  ASSERT_EQ(got.size(), 64u);
  for (int i = 0; i < 64; ++i) EXPECT_TRUE(tf::near_rel(got[i], want.inv_freq[i], 1e-13)) << i;
  EXPECT_NEAR(o["attention_factor"].get<double>(), 1.138629436111989, 1e-15);
  EXPECT_EQ(o["kv_cache"]["bytes_per_token"], 2 * 28 * 4 * 128 * 2);
  EXPECT_FALSE(o["laws"].is_null());  // the claimed laws were checked (and held: exit 0)
}

TEST(Inspect, JsonForAlibiAndInterleaved) {
  auto r = run_grape("inspect --trials 5 --json " + q(config_path("bloom")));
  ASSERT_EQ(r.code, 0) << r.err;
  auto o = json::parse(r.out);
  EXPECT_EQ(o["kind"], "alibi");
  const auto slopes = o["alibi_slopes"].get<std::vector<double>>();
  const auto want = tf::alibi_slopes(112);
  ASSERT_EQ(slopes.size(), 112u);
  for (int h = 0; h < 112; ++h) EXPECT_TRUE(tf::near_rel(slopes[h], want[h], 1e-14)) << h;
  r = run_grape("inspect --trials 5 --json " + q(config_path("deepseek-v3")));
  o = json::parse(r.out);
  EXPECT_EQ(o["layout"], "interleaved");
  EXPECT_EQ(o["rotary_dim"], 64);
  EXPECT_EQ(o["attention_factor"], 1.0);
}

TEST(Inspect, SeqLenAndPrecisionOptions) {
  const auto path = q(config_path("synthetic-longrope"));
  auto o = json::parse(run_grape("inspect --trials 5 --json --seq-len 4096 " + path).out);
  EXPECT_EQ(o["schedule"]["factors_used"], "short_factor");
  o = json::parse(run_grape("inspect --trials 5 --json --seq-len 4097 " + path).out);
  EXPECT_EQ(o["schedule"]["factors_used"], "long_factor");
  // The default is the reference's float32 table; --precision float64 gives the formulas'.
  o = json::parse(run_grape("inspect --trials 5 --json " + path).out);
  EXPECT_EQ(o["frequency_precision"], "float32_reference");
  for (double v : o["inv_freq"].get<std::vector<double>>()) EXPECT_EQ(static_cast<double>(static_cast<float>(v)), v);
  EXPECT_NE(run_grape("inspect --trials 5 " + path).out.find("frequencies: float32_reference"), std::string::npos);
  o = json::parse(run_grape("inspect --trials 5 --json --precision float64 " + path).out);
  EXPECT_EQ(o["frequency_precision"], "float64");
  int wider = 0;
  for (double v : o["inv_freq"].get<std::vector<double>>()) wider += static_cast<double>(static_cast<float>(v)) != v;
  EXPECT_GT(wider, 0);
}

TEST(Inspect, DynamicNtkRecomputesOnlyBeyondMax) {
  const scratch s;
  write_text(s / "config.json", R"({"hidden_size": 512, "num_attention_heads": 8, "max_position_embeddings": 2048,
                                    "rope_scaling": {"type": "dynamic", "factor": 2.0}})");
  for (std::int64_t len : {1000, 2048, 8192}) {
    const auto r = run_grape("inspect --trials 5 --json --precision float64 --seq-len " + std::to_string(len) + " " +
                             q(s / "config.json"));
    ASSERT_EQ(r.code, 0) << r.err;
    const auto got = json::parse(r.out)["inv_freq"].get<std::vector<double>>();
    const auto want = tf::rope_dynamic(10000.0, 64, 2.0, 2048, len);
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(tf::near_rel(got[i], want[i], 1e-13)) << len << " " << i;
  }
}

TEST(Inspect, BadInputExitsTwoWithOneLine) {
  const scratch s;
  write_text(s / "config.json", R"({"hidden_size": 4096, "num_attention_heads": 32, "max_position_embeddings": 4096,
                                    "rope_scaling": {"type": "yarn", "factor": 0.5}})");
  auto r = run_grape("inspect " + q(s / "config.json"));
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "grape: " + (s / "config.json").string() +
                       ": rope_scaling.factor: must be >= 1 for yarn (got 0.5)\n");
  EXPECT_EQ(r.out, "");
  write_text(s / "bad.json", "{\"rope_scaling\": ");
  r = run_grape("inspect " + q(s / "bad.json"));
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1);
  EXPECT_NE(r.err.find("bad.json: malformed JSON"), std::string::npos) << r.err;
  r = run_grape("inspect " + q(s / "missing.json"));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("missing.json"), std::string::npos);
  r = run_grape("inspect --precision float16 " + q(config_path("llama-2-7b")));
  EXPECT_EQ(r.code, 2);
  // A base float32 cannot hold: the default (float32) table is refused, naming the file; float64 works.
  write_text(s / "huge.json", R"({"hidden_size": 256, "num_attention_heads": 4, "rope_theta": 1e39})");
  r = run_grape("inspect " + q(s / "huge.json"));
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "grape: " + (s / "huge.json").string() +
                       ": rope schedule: rope_theta 1e+39 is beyond float32, where the reference's float32 "
                       "table lives (use --precision float64)\n");
  EXPECT_EQ(run_grape("inspect --trials 2 --precision float64 " + q(s / "huge.json")).code, 0);
}

}  // namespace
