// Random valid configs of every schedule, written as config.json text, read by the parser and
// reported by inspect's JSON: inv_freq and attention_factor must match the independent formulas
// (formulas.hpp) within 1e-12 relative.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <nlohmann/json.hpp>

#include "formulas.hpp"
#include "model/model_config.hpp"
#include "model/model_json.hpp"

namespace {

using nlohmann::json;
namespace tf = grape::test_formulas;

struct common {
  double base;
  int d;             // rotary dim = head dim
  std::int64_t max_pos;
  std::int64_t seq_len;
  bool new_style;    // rope_parameters with rope_theta inside, else rope_scaling + top-level theta
  bool legacy_type;  // "type" instead of "rope_type"
};

common gen_common(std::int64_t min_max_pos = 64) {
  common c;
  c.base = std::pow(10.0, *rc::gen::inRange(20, 71) / 10.0) + *rc::gen::inRange(0, 1000) / 7.0;
  c.d = 2 * *rc::gen::inRange(2, 129);
  c.max_pos = *rc::gen::inRange<std::int64_t>(min_max_pos, 1 << 20);
  c.seq_len = *rc::gen::inRange<std::int64_t>(1, 4 * c.max_pos);
  c.new_style = *rc::gen::arbitrary<bool>();
  c.legacy_type = *rc::gen::arbitrary<bool>();
  return c;
}

double gen_factor() { return 1.0 + *rc::gen::inRange(0, 63000) / 1000.0; }

json config_with(const common& c, const std::string& type, json dict) {
  json j{{"model_type", "llama"},
         {"hidden_size", c.d * 4},
         {"num_attention_heads", 4},
         {"num_hidden_layers", 2},
         {"max_position_embeddings", c.max_pos}};
  dict[c.legacy_type ? "type" : "rope_type"] = type;
  if (c.new_style) {
    dict["rope_theta"] = c.base;
    j["rope_parameters"] = dict;
  } else {
    j["rope_theta"] = c.base;
    j["rope_scaling"] = dict;
  }
  return j;
}

// Parse, evaluate and describe like `grape inspect --json`, then compare.
void check(const json& cfg, std::int64_t seq_len, const std::vector<double>& want, double want_af) {
  const auto m = grape::model::parse_model_config(cfg.dump(), "prop/config.json");
  const auto t = grape::evaluate(m.rotary.schedule, seq_len);
  const json out = json::parse(grape::model::describe_json(m, &t).dump());
  const auto got = out["inv_freq"].get<std::vector<double>>();
  RC_ASSERT(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (!tf::near_rel(got[i], want[i], 1e-12))
      RC_FAIL("plane " + std::to_string(i) + ": " + std::to_string(got[i]) + " vs " + std::to_string(want[i]));
  }
  RC_ASSERT(tf::near_rel(out["attention_factor"].get<double>(), want_af, 1e-12));
  RC_ASSERT(out["frequency_precision"] == "float64");
}

RC_GTEST_PROP(ScheduleProperty, Default, ()) {
  const auto c = gen_common();
  check(config_with(c, "default", json::object()), c.seq_len, tf::rope_default(c.base, c.d), 1.0);
}

RC_GTEST_PROP(ScheduleProperty, Linear, ()) {
  const auto c = gen_common();
  const double f = gen_factor();
  check(config_with(c, "linear", {{"factor", f}}), c.seq_len, tf::rope_linear(c.base, c.d, f), 1.0);
}

RC_GTEST_PROP(ScheduleProperty, NtkFixed, ()) {
  const auto c = gen_common();
  const double f = gen_factor();
  check(config_with(c, "ntk", {{"factor", f}}), c.seq_len, tf::rope_ntk(c.base, c.d, f), 1.0);
}

RC_GTEST_PROP(ScheduleProperty, DynamicNtk, ()) {
  const auto c = gen_common();
  const double f = gen_factor();
  check(config_with(c, "dynamic", {{"factor", f}}), c.seq_len,
        tf::rope_dynamic(c.base, c.d, f, c.max_pos, c.seq_len), 1.0);
}

RC_GTEST_PROP(ScheduleProperty, Yarn, ()) {
  const auto c = gen_common();
  const std::int64_t orig = *rc::gen::inRange<std::int64_t>(16, c.max_pos + 1);
  json dict{{"original_max_position_embeddings", orig}};
  const bool explicit_factor = *rc::gen::arbitrary<bool>();
  const double f = explicit_factor ? gen_factor() : static_cast<double>(c.max_pos) / orig;
  if (explicit_factor) dict["factor"] = f;
  const double beta_fast = *rc::gen::inRange(2, 128) / 2.0;
  const double beta_slow = *rc::gen::inRange(1, 8) / 4.0;
  const bool truncate = *rc::gen::arbitrary<bool>();
  dict["beta_fast"] = beta_fast;
  dict["beta_slow"] = beta_slow;
  dict["truncate"] = truncate;
  double ms = 0, msa = 0, af = 0;
  const int extra = *rc::gen::inRange(0, 3);  // 0: none, 1: mscale pair (DeepSeek), 2: explicit
  if (extra == 1) {
    ms = *rc::gen::inRange(1, 40) / 10.0;
    msa = *rc::gen::inRange(1, 40) / 10.0;
    dict["mscale"] = ms;
    dict["mscale_all_dim"] = msa;
  } else if (extra == 2) {
    af = *rc::gen::inRange(5, 30) / 10.0;
    dict["attention_factor"] = af;
  }
  const auto want = tf::rope_yarn(c.base, c.d, f, orig, beta_fast, beta_slow, truncate,
                                  extra == 1 ? &ms : nullptr, extra == 1 ? &msa : nullptr,
                                  extra == 2 ? &af : nullptr);
  check(config_with(c, "yarn", dict), c.seq_len, want.inv_freq, want.attention_factor);
}

RC_GTEST_PROP(ScheduleProperty, Llama3, ()) {
  const auto c = gen_common();
  const std::int64_t orig = *rc::gen::inRange<std::int64_t>(16, c.max_pos + 1);
  const double f = gen_factor();
  const double lo = *rc::gen::inRange(1, 40) / 10.0;
  const double hi = lo + *rc::gen::inRange(1, 80) / 10.0;
  json dict{{"factor", f}, {"low_freq_factor", lo}, {"high_freq_factor", hi},
            {"original_max_position_embeddings", orig}};
  check(config_with(c, "llama3", dict), c.seq_len, tf::rope_llama3(c.base, c.d, f, lo, hi, orig), 1.0);
}

RC_GTEST_PROP(ScheduleProperty, LongRope, ()) {
  const auto c = gen_common();
  const std::int64_t orig = *rc::gen::inRange<std::int64_t>(16, c.max_pos + 1);
  std::vector<double> sf, lf;
  for (int i = 0; i < c.d / 2; ++i) {
    sf.push_back(1.0 + *rc::gen::inRange(0, 3000) / 1000.0);
    lf.push_back(1.0 + *rc::gen::inRange(0, 64000) / 1000.0);
  }
  auto cfg = config_with(c, *rc::gen::arbitrary<bool>() ? "longrope" : "su",
                         {{"short_factor", sf}, {"long_factor", lf}});
  // Phi-3 keeps original_max_position_embeddings at the top level; others inside the dict.
  if (*rc::gen::arbitrary<bool>()) cfg["original_max_position_embeddings"] = orig;
  else cfg[c.new_style ? "rope_parameters" : "rope_scaling"]["original_max_position_embeddings"] = orig;
  double factor = static_cast<double>(c.max_pos) / orig;
  double af = tf::longrope_attention(factor, orig);
  const int extra = *rc::gen::inRange(0, 3);  // 0: derived, 1: explicit factor, 2: explicit af
  auto& dict = cfg[c.new_style ? "rope_parameters" : "rope_scaling"];
  if (extra == 1) {
    factor = *rc::gen::inRange(1, 640) / 10.0;
    dict["factor"] = factor;
    af = tf::longrope_attention(factor, orig);
  } else if (extra == 2) {
    af = *rc::gen::inRange(5, 30) / 10.0;
    dict["attention_factor"] = af;
  }
  check(cfg, c.seq_len, tf::rope_longrope(c.base, c.d, c.seq_len > orig ? lf : sf), af);
}

}  // namespace
