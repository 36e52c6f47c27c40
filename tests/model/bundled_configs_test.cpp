// Every config in examples/configs/ against values computed here from the formulas (formulas.hpp)
// and the pins in the reference's models.md.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "formulas.hpp"
#include "model/model_config.hpp"
#include "model/model_json.hpp"

namespace {

using namespace grape;
namespace tf = grape::test_formulas;

model::model_description load(const std::string& name) {
  return model::load_model_config(std::string(GRAPE_SOURCE_DIR) + "/examples/configs/" + name +
                                  "/config.json");
}

schedule_table table_of(const model::model_description& m, std::int64_t seq_len = -1) {
  return evaluate(m.rotary.schedule, seq_len < 0 ? m.max_position_embeddings : seq_len);
}

void expect_table(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i)
    EXPECT_TRUE(tf::near_rel(got[i], want[i], 1e-13)) << "plane " << i << ": " << got[i] << " vs " << want[i];
}

void expect_rotary(const model::model_description& m, int head_dim, int rotary_dim,
                   layout_kind layout) {
  ASSERT_EQ(m.kind, model::encoding_kind::rotary);
  EXPECT_EQ(m.rotary.head_dim, head_dim);
  EXPECT_EQ(m.rotary.rotary_dim, rotary_dim);
  EXPECT_EQ(m.rotary.layout, layout);
}

TEST(BundledConfigs, Llama2IsDefaultRope) {
  const auto m = load("llama-2-7b");
  expect_rotary(m, 128, 128, layout_kind::half_split);
  EXPECT_EQ(m.rotary.schedule.type, rope_type::default_rope);
  const auto t = table_of(m);
  expect_table(t.inv_freq, tf::rope_default(10000.0, 128));
  EXPECT_EQ(t.attention_factor, 1.0);
  EXPECT_EQ(m.kv_elements_per_token, 2 * 32 * 32 * 128);
  EXPECT_EQ(model::kv_bytes_at_max_context(m, 2), std::int64_t{2} * 32 * 32 * 128 * 2 * 4096);
}

TEST(BundledConfigs, Llama31IsLlama3Schedule) {
  const auto m = load("llama-3.1-8b");
  expect_rotary(m, 128, 128, layout_kind::half_split);
  EXPECT_EQ(m.rotary.schedule.type, rope_type::llama3);
  const auto t = table_of(m);
  expect_table(t.inv_freq, tf::rope_llama3(500000.0, 128, 8.0, 1.0, 4.0, 8192));
  EXPECT_EQ(t.attention_factor, 1.0);
  EXPECT_EQ(m.num_kv_heads, 8);
  EXPECT_EQ(m.kv_elements_per_token, 2 * 32 * 8 * 128);
  // High-frequency planes are kept, the lowest is divided by the full factor.
  EXPECT_EQ(t.bands.front(), band_kind::kept);
  EXPECT_EQ(t.bands.back(), band_kind::interpolated);
}

TEST(BundledConfigs, MistralIsDefaultRopeWithSlidingWindowNote) {
  const auto m = load("mistral-7b-v0.1");
  expect_rotary(m, 128, 128, layout_kind::half_split);
  expect_table(table_of(m).inv_freq, tf::rope_default(10000.0, 128));
  ASSERT_EQ(m.notes.size(), 1u);
  EXPECT_NE(m.notes[0].find("sliding_window 4096"), std::string::npos);
}

TEST(BundledConfigs, Qwen25YarnMatchesPins) {
  const auto m = load("qwen2.5-7b-instruct-yarn");
  expect_rotary(m, 128, 128, layout_kind::half_split);
  const auto t = table_of(m);
  const auto want = tf::rope_yarn(1e6, 128, 4.0, 32768);
  expect_table(t.inv_freq, want.inv_freq);
  EXPECT_EQ(t.yarn_low, 23.0);
  EXPECT_EQ(t.yarn_high, 40.0);
  EXPECT_EQ(want.low, 23.0);
  EXPECT_EQ(want.high, 40.0);
  EXPECT_NEAR(t.attention_factor, 1.138629436111989, 1e-15);
  EXPECT_EQ(t.bands[23], band_kind::kept);
  EXPECT_EQ(t.bands[24], band_kind::blended);
  EXPECT_EQ(t.bands[40], band_kind::interpolated);
}

TEST(BundledConfigs, CodeLlamaUsesBaseOneMillion) {
  const auto m = load("codellama-7b");
  expect_rotary(m, 128, 128, layout_kind::half_split);
  expect_table(table_of(m).inv_freq, tf::rope_default(1e6, 128));
  EXPECT_EQ(m.max_position_embeddings, 16384);
}

TEST(BundledConfigs, GemmaUsesListedHeadDim) {
  const auto m = load("gemma-2b");
  expect_rotary(m, 256, 256, layout_kind::half_split);
  expect_table(table_of(m).inv_freq, tf::rope_default(10000.0, 256));
  EXPECT_EQ(m.kv_elements_per_token, 2 * 18 * 1 * 256);
}

TEST(BundledConfigs, DeepSeekV3YarnMatchesPins) {
  const auto m = load("deepseek-v3");
  expect_rotary(m, 64, 64, layout_kind::interleaved);
  const auto t = table_of(m);
  const double one = 1.0;
  const auto want = tf::rope_yarn(10000.0, 64, 40.0, 4096, 32, 1, true, &one, &one);
  expect_table(t.inv_freq, want.inv_freq);
  EXPECT_EQ(t.yarn_low, 10.0);
  EXPECT_EQ(t.yarn_high, 23.0);
  EXPECT_EQ(t.attention_factor, 1.0);
  // MLA latent cache and the softmax-scale note (models.md: 0.1352337788608801).
  EXPECT_EQ(m.kv_elements_per_token, 61 * (512 + 64));
  bool found = false;
  for (const auto& n : m.notes) found = found || n.find("0.1352337788608801") != std::string::npos;
  EXPECT_TRUE(found);
  const double qk = 192.0;
  EXPECT_NEAR(std::pow(qk, -0.5) * std::pow(1 + 0.1 * std::log(40.0), 2), 0.1352337788608801, 1e-16);
}

TEST(BundledConfigs, GptNeoXRotatesAQuarter) {
  const auto m = load("gpt-neox-20b");
  expect_rotary(m, 96, 24, layout_kind::half_split);
  expect_table(table_of(m).inv_freq, tf::rope_default(10000.0, 24));
  EXPECT_EQ(m.rotary.rotary_dim_from, "rotary_pct");
}

TEST(BundledConfigs, GptJIsInterleavedWithRotaryDim64) {
  const auto m = load("gpt-j-6b");
  expect_rotary(m, 256, 64, layout_kind::interleaved);
  expect_table(table_of(m).inv_freq, tf::rope_default(10000.0, 64));
  EXPECT_EQ(m.max_position_embeddings, 2048);
}

TEST(BundledConfigs, FalconWithoutAlibiIsRotary) {
  const auto m = load("falcon-7b");
  expect_rotary(m, 64, 64, layout_kind::half_split);
  expect_table(table_of(m).inv_freq, tf::rope_default(10000.0, 64));
  EXPECT_EQ(m.num_kv_heads, 1);
  EXPECT_EQ(m.max_position_embeddings, 2048);
}

TEST(BundledConfigs, BloomHas112AlibiSlopes) {
  const auto m = load("bloom");
  ASSERT_EQ(m.kind, model::encoding_kind::alibi);
  const auto want = tf::alibi_slopes(112);
  ASSERT_EQ(m.alibi.slopes.size(), 112u);
  expect_table(m.alibi.slopes, want);
  // 112 = 64 + 48: the last head is slope 2^(-8·95/128) of the 128-head rule.
  EXPECT_TRUE(tf::near_rel(m.alibi.slopes[111], std::exp2(-8.0 * 95 / 128), 1e-15));
}

TEST(BundledConfigs, MptHasAlibiWithBiasMax8) {
  const auto m = load("mpt-7b");
  ASSERT_EQ(m.kind, model::encoding_kind::alibi);
  EXPECT_EQ(m.alibi.max_bias, 8.0);
  expect_table(m.alibi.slopes, tf::alibi_slopes(32));
  EXPECT_EQ(m.max_position_embeddings, 2048);
}

TEST(BundledConfigs, T5SmallBuckets) {
  const auto m = load("t5-small");
  ASSERT_EQ(m.kind, model::encoding_kind::t5);
  EXPECT_EQ(m.t5.num_buckets, 32);
  EXPECT_EQ(m.t5.max_distance, 128);
  EXPECT_EQ(m.head_dim, 64);
  EXPECT_EQ(m.num_heads, 8);
}

TEST(BundledConfigs, SyntheticLongRopeChoosesFactorsBySequenceLength) {
  const auto m = load("synthetic-longrope");
  expect_rotary(m, 96, 96, layout_kind::half_split);
  const auto& s = m.rotary.schedule;
  ASSERT_EQ(s.short_factor.size(), 48u);
  const auto long_t = table_of(m, 131072);
  EXPECT_TRUE(long_t.long_factors);
  expect_table(long_t.inv_freq, tf::rope_longrope(10000.0, 96, s.long_factor));
  EXPECT_NEAR(long_t.attention_factor, 1.1902380714238083, 1e-15);
  EXPECT_NEAR(tf::longrope_attention(32.0, 4096), 1.1902380714238083, 1e-15);
  const auto short_t = table_of(m, 4096);  // at the original context: still short factors
  EXPECT_FALSE(short_t.long_factors);
  expect_table(short_t.inv_freq, tf::rope_longrope(10000.0, 96, s.short_factor));
  EXPECT_TRUE(table_of(m, 4097).long_factors);
}

TEST(BundledConfigs, InspectJsonCarriesFullPrecisionTable) {
  const auto m = load("qwen2.5-7b-instruct-yarn");
  const auto t = table_of(m);
  const auto j = model::describe_json(m, &t);
  EXPECT_EQ(j["kind"], "rotary");
  EXPECT_EQ(j["layout"], "half_split");
  EXPECT_EQ(j["frequency_precision"], "float64");
  const auto round_trip = nlohmann::json::parse(j.dump());
  ASSERT_EQ(round_trip["inv_freq"].size(), 64u);
  for (std::size_t i = 0; i < 64; ++i) EXPECT_EQ(round_trip["inv_freq"][i].get<double>(), t.inv_freq[i]);
  EXPECT_EQ(round_trip["attention_factor"].get<double>(), t.attention_factor);
}

}  // namespace
