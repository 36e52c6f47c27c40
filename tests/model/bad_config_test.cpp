// Each kind of bad config.json gives one grape::input_error line naming the file and the field.
#include <gtest/gtest.h>

#include <string>

#include "grape/detail/error.hpp"
#include "model/model_config.hpp"

namespace {

using grape::model::parse_model_config;

const char* const base_fields =
    R"("model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32, "num_hidden_layers": 2,
       "max_position_embeddings": 4096)";

std::string with(const std::string& extra) {
  return std::string("{") + base_fields + (extra.empty() ? "" : ", " + extra) + "}";
}

// The message of the input_error that parsing `text` throws ("" if none).
std::string error_of(const std::string& text) {
  try {
    (void)parse_model_config(text, "dir/config.json");
  } catch (const grape::input_error& e) {
    return e.what();
  }
  return "";
}

void expect_error(const std::string& text, const std::string& field) {
  const std::string msg = error_of(text);
  ASSERT_FALSE(msg.empty()) << "no error for: " << text;
  EXPECT_EQ(msg.rfind("grape: dir/config.json: ", 0), 0u) << msg;
  EXPECT_NE(msg.find(field), std::string::npos) << "field " << field << " not named in: " << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
}

TEST(BadConfig, ValidBaseParses) { EXPECT_EQ(error_of(with("")), ""); }

TEST(BadConfig, ExactMessageForYarnFactorBelowOne) {
  EXPECT_EQ(error_of(with(R"("rope_scaling": {"type": "yarn", "factor": 0.5})")),
            "grape: dir/config.json: rope_scaling.factor: must be >= 1 for yarn (got 0.5)");
}

TEST(BadConfig, MalformedJson) {
  expect_error("{\"hidden_size\": 4096,", "malformed JSON");
  expect_error("{\"a\": \"line\nbreak\"}", "malformed JSON");
  expect_error("", "malformed JSON");
  expect_error("[1, 2]", "top level");
}

TEST(BadConfig, MissingFields) {
  expect_error(R"({"hidden_size": 4096})", "num_attention_heads");
  expect_error(R"({"num_attention_heads": 32})", "hidden_size");
  expect_error(with(R"("rope_scaling": {"rope_type": "linear"})"), "rope_scaling.factor");
  expect_error(with(R"("rope_scaling": {"rope_type": "llama3", "factor": 8, "high_freq_factor": 4,
                       "original_max_position_embeddings": 1024})"),
               "rope_scaling.low_freq_factor");
  expect_error(with(R"("rope_scaling": {"rope_type": "longrope", "original_max_position_embeddings": 1024,
                       "long_factor": [1]})"),
               "rope_scaling.short_factor");
  expect_error(with(R"("rope_scaling": {"rope_type": "llama3", "factor": 8, "low_freq_factor": 1,
                       "high_freq_factor": 4})"),
               "original_max_position_embeddings");
  expect_error(with(R"("rope_scaling": {"factor": 2.0})"), "rope_scaling.rope_type");
}

TEST(BadConfig, WrongTypes) {
  expect_error(R"({"hidden_size": 4096, "num_attention_heads": "32"})", "num_attention_heads");
  expect_error(R"({"hidden_size": 4096, "num_attention_heads": 32.5})", "num_attention_heads");
  expect_error(with(R"("rope_theta": "10000")"), "rope_theta");
  expect_error(with(R"("rope_scaling": "yarn")"), "rope_scaling");
  expect_error(with(R"("rope_scaling": {"type": 3, "factor": 2})"), "rope_scaling.type");
  expect_error(with(R"("rope_scaling": {"type": "yarn", "factor": 2, "truncate": "yes"})"),
               "rope_scaling.truncate");
  expect_error(with(R"("rope_scaling": {"type": "longrope", "original_max_position_embeddings": 1024,
                       "short_factor": [1, "x"], "long_factor": []})"),
               "rope_scaling.short_factor[1]");
  expect_error(with(R"("rope_interleave": 1)"), "rope_interleave");
}

TEST(BadConfig, UnknownRopeType) {
  expect_error(with(R"("rope_scaling": {"type": "llama4", "factor": 2})"), "rope_scaling.type");
  expect_error(with(R"("rope_parameters": {"rope_type": "nope", "factor": 2})"), "rope_parameters.rope_type");
}

TEST(BadConfig, FactorBelowOneWhereForbidden) {
  for (const char* t : {"linear", "ntk", "dynamic", "yarn"})
    expect_error(with(std::string(R"("rope_scaling": {"type": ")") + t + R"(", "factor": 0.9})"),
                 "rope_scaling.factor");
  expect_error(with(R"("rope_scaling": {"rope_type": "llama3", "factor": 0.5, "low_freq_factor": 1,
                       "high_freq_factor": 4, "original_max_position_embeddings": 1024})"),
               "rope_scaling.factor");
  // yarn without a factor derives max / original: below 1 when original > max.
  expect_error(with(R"("rope_scaling": {"type": "yarn", "original_max_position_embeddings": 8192})"),
               "original_max_position_embeddings");
}

TEST(BadConfig, OriginalContextAboveMaxWhereInvalid) {
  expect_error(with(R"("rope_scaling": {"rope_type": "llama3", "factor": 8, "low_freq_factor": 1,
                       "high_freq_factor": 4, "original_max_position_embeddings": 8192})"),
               "rope_scaling.original_max_position_embeddings");
  expect_error(with(R"("original_max_position_embeddings": 8192, "rope_scaling": {"type": "longrope",
                       "short_factor": [], "long_factor": []})"),
               "original_max_position_embeddings");
}

TEST(BadConfig, OddOrOversizedRotaryDim) {
  expect_error(R"({"model_type": "gptj", "n_embd": 4096, "n_head": 16, "rotary_dim": 63})", "rotary_dim");
  expect_error(R"({"model_type": "gptj", "n_embd": 4096, "n_head": 16, "rotary_dim": 512})", "rotary_dim");
  expect_error(R"({"hidden_size": 1000, "num_attention_heads": 10, "partial_rotary_factor": 0.25})",
               "partial_rotary_factor");
  expect_error(R"({"hidden_size": 1000, "num_attention_heads": 10, "rotary_pct": 1.5})", "rotary_pct");
  expect_error(R"({"hidden_size": 99, "num_attention_heads": 1})", "head_dim");
  expect_error(R"({"hidden_size": 4096, "num_attention_heads": 30})", "hidden_size");
  expect_error(with(R"("qk_rope_head_dim": 33)"), "qk_rope_head_dim");
}

TEST(BadConfig, FactorListOfWrongLength) {
  std::string sf = "[";
  for (int i = 0; i < 63; ++i) sf += std::string(i ? "," : "") + "1.0";
  sf += "]";
  expect_error(with(R"("rope_scaling": {"type": "longrope", "original_max_position_embeddings": 1024,
                       "short_factor": )" + sf + R"(, "long_factor": )" + sf + "}"),
               "rope_scaling.short_factor");
}

TEST(BadConfig, NonFiniteOrHugeNumbers) {
  // JSON has no NaN; overflowing literals and strings are what shows up.
  expect_error(with(R"("rope_scaling": {"type": "linear", "factor": 1e400})"), "malformed JSON");
  expect_error(with(R"("rope_scaling": {"type": "linear", "factor": "Infinity"})"), "rope_scaling.factor");
  expect_error(with(R"("rope_scaling": {"type": "linear", "factor": NaN})"), "malformed JSON");
  expect_error(R"({"hidden_size": 4096, "num_attention_heads": 18446744073709551615})",
               "num_attention_heads");
  expect_error(R"({"hidden_size": 1e300, "num_attention_heads": 32})", "hidden_size");
  expect_error(with(R"("rope_theta": 1)"), "rope_theta");
  expect_error(with(R"("rope_theta": -5)"), "rope_theta");
}

TEST(BadConfig, OtherOutOfRangeValues) {
  expect_error(with(R"("num_key_value_heads": 5)"), "num_key_value_heads");
  expect_error(with(R"("rope_scaling": {"type": "yarn", "factor": 4, "beta_fast": -1})"),
               "rope_scaling.beta_fast");
  expect_error(with(R"("rope_scaling": {"rope_type": "llama3", "factor": 8, "low_freq_factor": 4,
                       "high_freq_factor": 1, "original_max_position_embeddings": 1024})"),
               "rope_scaling.high_freq_factor");
  expect_error(R"({"model_type": "t5", "d_model": 512, "d_kv": 64, "num_heads": 8,
                  "relative_attention_num_buckets": 32, "relative_attention_max_distance": 8})",
               "relative_attention_max_distance");
  expect_error(R"({"model_type": "mpt", "d_model": 4096, "n_heads": 32, "attn_config": {"alibi": false}})",
               "attn_config.alibi");
  expect_error(R"({"model_type": "mpt", "d_model": 4096, "n_heads": 32,
                  "attn_config": {"alibi": true, "alibi_bias_max": 0}})",
               "attn_config.alibi_bias_max");
  expect_error(R"({"hidden_size": 4096, "num_attention_heads": 32,
                  "rope_scaling": {"rope_type": "dynamic", "factor": 2}})",
               "max_position_embeddings");
}

TEST(BadConfig, UnreadableFile) {
  try {
    (void)grape::model::load_model_config("/nonexistent/dir/config.json");
    FAIL() << "no error";
  } catch (const grape::input_error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/dir/config.json"), std::string::npos);
  }
}

TEST(BadConfig, AcceptedSpellings) {
  // rope_parameters with rope_theta inside; legacy "type"; integers written as floats.
  EXPECT_EQ(error_of(R"({"hidden_size": 4096.0, "num_attention_heads": 32,
                        "rope_parameters": {"rope_type": "default", "rope_theta": 500000.0}})"), "");
  const auto m = parse_model_config(R"({"hidden_size": 4096, "num_attention_heads": 32,
                        "rope_parameters": {"rope_type": "default", "rope_theta": 500000.0}})", "c");
  EXPECT_EQ(m.rotary.schedule.base, 500000.0);
  // Falcon's alibi flag, BLOOM by model_type.
  EXPECT_EQ(parse_model_config(R"({"model_type": "falcon", "hidden_size": 4544, "n_head": 71, "alibi": true})", "c").kind,
            grape::model::encoding_kind::alibi);
}

}  // namespace
