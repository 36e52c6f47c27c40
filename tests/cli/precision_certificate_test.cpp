// grape inspect's precision certificate: rows at the model's context and 2x, 4x it; grape's
// measured errors within the stated bounds; the float32 textbook error computed here from the
// formulas (θ_i = base^(-2i/d), angle float32(m)·float32(θ_i) against m·θ_i in long double).
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <numbers>

#include "../model/formulas.hpp"
#include "cli_util.hpp"

namespace {

using namespace grape::cli_test;

double textbook_error(const std::vector<double>& thetas, std::int64_t position) {
  double worst = 0;
  for (std::int64_t m = position - 15; m <= position; ++m)
    for (double theta : thetas) {
      const float a32 = static_cast<float>(m) * static_cast<float>(theta);
      const long double exact = static_cast<long double>(m) * static_cast<long double>(theta);
      worst = std::max({worst, static_cast<double>(std::abs(std::cos(static_cast<long double>(a32)) - std::cos(exact))),
                        static_cast<double>(std::abs(std::sin(static_cast<long double>(a32)) - std::sin(exact)))});
    }
  return worst;
}

TEST(PrecisionCertificate, Llama2RowsBoundsAndTextbookError) {
  const auto r = run_grape("inspect " + q(config_path("llama-2-7b")) + " --json --trials 1 --precision float64");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto rows = nlohmann::json::parse(r.out).at("precision_certificate");
  ASSERT_EQ(rows.size(), 3u) << rows.dump();
  const std::int64_t want[] = {4096, 8192, 16384};
  for (std::size_t k = 0; k < 3; ++k) {
    const auto& row = rows[k];
    EXPECT_EQ(row.at("position").get<std::int64_t>(), want[k]);
    EXPECT_EQ(row.at("float32").at("bound").get<double>(), 2e-6);
    EXPECT_LE(row.at("float32").at("measured").get<double>(), 2e-6);
    EXPECT_NEAR(row.at("bfloat16").at("bound").get<double>(), 2e-6 + 1.0 / 256, 1e-15);
    EXPECT_LE(row.at("bfloat16").at("measured").get<double>(), row.at("bfloat16").at("bound").get<double>());
    const double textbook = textbook_error(grape::test_formulas::rope_default(10000.0, 128), want[k]);
    EXPECT_NEAR(row.at("textbook_float32").get<double>(), textbook, 1e-3 * textbook) << want[k];
    EXPECT_GT(textbook, 10 * row.at("float32").at("measured").get<double>());
  }
}

TEST(PrecisionCertificate, TextTableAndCappedAtTheKernelsRange) {
  const auto r = run_grape("inspect " + q(config_path("llama-3.1-8b")) + " --trials 1 --precision float64");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("precision certificate"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("        524288       2.0e-06 / "), std::string::npos) << r.out;
  // docs/precision.md quotes this row: the textbook error 2.3e-2 at 524288.
  const auto j = run_grape("inspect " + q(config_path("llama-3.1-8b")) + " --json --trials 1 --precision float64");
  const auto last = nlohmann::json::parse(j.out).at("precision_certificate").at(2);
  const double textbook = textbook_error(grape::test_formulas::rope_llama3(500000.0, 128, 8.0, 1.0, 4.0, 8192), 524288);
  EXPECT_NEAR(last.at("textbook_float32").get<double>(), textbook, 1e-3 * textbook);
  EXPECT_NEAR(textbook, 2.3e-2, 0.05e-2);
  const scratch s;
  write_text(s / "c.json", R"({"hidden_size": 64, "num_attention_heads": 4, "max_position_embeddings": 1073741824})");
  const auto big = run_grape("inspect " + q(s / "c.json") + " --json --trials 1 --precision float64");
  ASSERT_EQ(big.code, 0) << big.err;
  const auto rows = nlohmann::json::parse(big.out).at("precision_certificate");
  ASSERT_EQ(rows.size(), 2u) << rows.dump();  // 2^30, then 2^31 - 1 (4x would pass the range)
  EXPECT_EQ(rows[1].at("position").get<std::int64_t>(), 2147483647);
  const auto alibi = run_grape("inspect " + q(config_path("bloom")) + " --json --trials 1 --precision float64");
  EXPECT_TRUE(nlohmann::json::parse(alibi.out).at("precision_certificate").is_null()) << alibi.out;
}

}  // namespace
