// grape inspect CONFIG [--seq-len N] [--precision P] [--json]: the encoding a config.json builds,
// in words and per plane, with the KV-cache size and the result of checking its laws.
#include <fmt/format.h>

#include <cmath>
#include <iostream>
#include <optional>

#include "cli/command_registry.hpp"
#include "cli/model_util.hpp"
#include "cli/precision_certificate.hpp"
#include "grape/check/report_json.hpp"
#include "grape/check/rotary.hpp"
#include "grape/math/bias.hpp"
#include "model/model_json.hpp"


namespace grape::cli {

namespace {

struct inspect_options {
  std::string config;
  std::optional<std::int64_t> seq_len;
  std::string precision = "float32_reference";
  bool json = false;
  int trials = 100;
  std::uint64_t seed = 1;
};

std::string bytes_text(std::int64_t b) {
  if (b >= (std::int64_t{1} << 30)) return fmt::format("{} bytes ({:.2f} GiB)", b, b / 1073741824.0);
  if (b >= (1 << 20)) return fmt::format("{} bytes ({:.2f} MiB)", b, b / 1048576.0);
  return fmt::format("{} bytes", b);
}

void print_kv(const model::model_description& m) {
  fmt::print("KV cache ({} assumed, {} bytes per element): {}\n", kv_dtype, kv_bytes_per_element,
             m.kv_formula);
  if (m.kv_elements_per_token == 0) return;
  const std::int64_t per_token = m.kv_elements_per_token * kv_bytes_per_element;
  fmt::print("  {} elements = {} per token", m.kv_elements_per_token, bytes_text(per_token));
  if (const auto at_max = model::kv_bytes_at_max_context(m, kv_bytes_per_element))
    fmt::print("; at max context {}: {}", m.max_position_embeddings, bytes_text(*at_max));
  fmt::print("\n");
}

void print_rotary(const evaluated_model& e) {
  const auto& m = e.desc;
  const auto& r = m.rotary;
  const auto& s = r.schedule;
  const auto& t = e.table;
  fmt::print("encoding: rotary (RoPE), schedule {}{}\n", to_string(s.type),
             r.source.empty() ? "" : fmt::format(" (from {})", r.source));
  fmt::print("dims: head_dim {}, rotary_dim {} (from {}){}\n", r.head_dim, r.rotary_dim,
             r.rotary_dim_from,
             r.rotary_dim < r.head_dim
                 ? fmt::format("; channels {}..{} pass through", r.rotary_dim, r.head_dim - 1)
                 : "");
  if (r.layout == layout_kind::half_split)
    fmt::print("layout: half_split (rotate_half): plane i = channels (i, i + {})\n", r.rotary_dim / 2);
  else
    fmt::print("layout: interleaved: plane i = channels (2i, 2i + 1)\n");
  fmt::print("base {}", s.base);
  if (s.type != rope_type::default_rope) fmt::print(", factor {}", s.factor);
  if (s.original_max_position_embeddings > 0)
    fmt::print(", original context {}", s.original_max_position_embeddings);
  if (m.max_position_embeddings > 0) fmt::print(", max_position_embeddings {}", m.max_position_embeddings);
  fmt::print("\n");
  fmt::print("evaluated at sequence length {} (--seq-len); frequencies: {}\n", t.seq_len,
             t.precision == frequency_precision::float64
                 ? "float64, computed from the formulas"
                 : "float32_reference, transformers' float32 table bit for bit (--precision float64: the formulas)");
  switch (s.type) {
    case rope_type::dynamic:
      if (t.scaled)
        fmt::print("dynamic NTK: sequence length {} > {}, base recomputed to {}\n", t.seq_len,
                   s.max_position_embeddings, t.effective_base);
      else
        fmt::print("dynamic NTK: sequence length {} <= {}, table unchanged (recomputed only beyond)\n",
                   t.seq_len, s.max_position_embeddings);
      break;
    case rope_type::ntk:
      fmt::print("NTK-aware: base changed to {}\n", t.effective_base);
      break;
    case rope_type::yarn:
      fmt::print("yarn: correction range (low, high) = ({}, {}) (beta_fast {}, beta_slow {}, truncate {})\n",
                 t.yarn_low, t.yarn_high, s.beta_fast, s.beta_slow, s.truncate);
      break;
    case rope_type::llama3:
      fmt::print("llama3: wavelengths below {} tokens kept, above {} interpolated by {}, between blended\n",
                 s.original_max_position_embeddings / s.high_freq_factor,
                 s.original_max_position_embeddings / s.low_freq_factor, s.factor);
      break;
    case rope_type::longrope:
      fmt::print("longrope: using {} (sequence length {} {} original context {})\n",
                 t.long_factors ? "long_factor" : "short_factor", t.seq_len,
                 t.long_factors ? ">" : "<=", s.original_max_position_embeddings);
      break;
    default:
      break;
  }
  fmt::print("attention factor {}: multiplies cos and sin of q and k, so logits scale by {}\n",
             t.attention_factor, t.attention_factor * t.attention_factor);
  fmt::print("\n{:>5}  {:>24}  {:>20}  {:>13}  {}\n", "plane", "inv_freq (rad/token)",
             "wavelength (tokens)", "interpolation", "band");
  for (std::size_t i = 0; i < t.inv_freq.size(); ++i)
    fmt::print("{:>5}  {:>24}  {:>20.6f}  {:>13.6g}  {}\n", i, t.inv_freq[i],
               model::wavelength(t.inv_freq[i]), t.base_inv_freq[i] / t.inv_freq[i],
               to_string(t.bands[i]));
  fmt::print("\n");
}

void print_alibi(const model::model_description& m) {
  fmt::print("encoding: ALiBi, bias -slope_h * |i - j| added to the scores (no q/k rotation)\n");
  fmt::print("heads {}, alibi_bias_max {}; slope rule for any head count (power-of-two rule for the "
             "first 2^floor(log2 H) heads, then every other slope of the 2P rule)\n",
             m.num_heads, m.alibi.max_bias);
  fmt::print("{:>5}  {:>22}  {:>10}\n", "head", "slope", "log2");
  for (std::size_t h = 0; h < m.alibi.slopes.size(); ++h)
    fmt::print("{:>5}  {:>22.17g}  {:>10.4f}\n", h, m.alibi.slopes[h], std::log2(m.alibi.slopes[h]));
  fmt::print("\n");
}

void print_t5(const model::model_description& m) {
  fmt::print("encoding: T5 relative position buckets: a learned bias table [{} buckets, {} heads] "
             "indexed by bucket(key - query)\n",
             m.t5.num_buckets, m.num_heads);
  fmt::print("num_buckets {}, max_distance {}; encoder self-attention bidirectional, decoder causal\n",
             m.t5.num_buckets, m.t5.max_distance);
  fmt::print("{:>10}  {:>14}  {:>14}\n", "key-query", "bucket (enc)", "bucket (dec)");
  for (std::int64_t rel : {-1000, -128, -64, -16, -8, -1, 0, 1, 8, 16, 64, 128, 1000})
    fmt::print("{:>10}  {:>14}  {:>14}\n", rel,
               math::t5_bucket(rel, true, m.t5.num_buckets, m.t5.max_distance),
               math::t5_bucket(rel, false, m.t5.num_buckets, m.t5.max_distance));
  fmt::print("\n");
}

void run(const inspect_options& o) {
  const auto e = evaluate_model(o.config, o.seq_len, parse_precision(o.precision));
  const auto& m = e.desc;
  const bool rotary = m.kind == model::encoding_kind::rotary;
  nlohmann::json j = model::describe_json(m, rotary ? &e.table : nullptr, kv_bytes_per_element);
  bool laws_ok = true;
  // Rotary models: the laws the table claims are checked (exit 1 if one fails). ALiBi and T5
  // biases are not a q/k rotation; `grape check` covers them as built-in encodings.
  std::optional<check_report> report;
  if (rotary) {
    check_options co;
    co.trials = o.trials;
    co.seed = o.seed;
    report = check_rotary(e.spec, co);
    laws_ok = report->passed();
    j["laws"] = *report;
  } else {
    j["laws"] = nullptr;
  }
  const std::int64_t context = m.max_position_embeddings > 0 ? m.max_position_embeddings
                                                             : m.rotary.schedule.original_max_position_embeddings;
  const auto certificate = rotary ? precision_certificate(e.spec, context) : std::vector<certificate_row>{};
  j["precision_certificate"] = rotary && !certificate.empty() ? certificate_json(certificate) : nlohmann::json(nullptr);
  if (o.json) {
    std::cout << j.dump(2) << "\n";
  } else {
    fmt::print("{}: model_type {}\n", e.label, m.model_type.empty() ? "(none)" : m.model_type);
    if (rotary) print_rotary(e);
    else if (m.kind == model::encoding_kind::alibi) print_alibi(m);
    else print_t5(m);
    print_kv(m);
    for (const auto& n : m.notes) fmt::print("note: {}\n", n);
    if (report)
      fmt::print("\nclaimed laws:\n{}", report->table());
    else
      fmt::print("\nclaimed laws: not checked here (a score bias, not a rotary table; see grape check)\n");
    if (!certificate.empty()) fmt::print("\n{}", certificate_text(certificate));
  }
  if (!laws_ok) exit_code() = 1;
}

const registrar reg{"inspect", [](CLI::App& app) {
  auto opts = std::make_shared<inspect_options>();
  auto* cmd = app.add_subcommand("inspect", "Explain the position encoding a config.json builds");
  cmd->add_option("config", opts->config, "a Hugging Face style config.json")->required();
  cmd->add_option("--seq-len", opts->seq_len,
                  "current sequence length (dynamic NTK, LongRoPE); default max_position_embeddings");
  cmd->add_option("--precision", opts->precision,
                  "frequency table: float32_reference (default: transformers' float32 values) or float64 (the formulas)")
      ->check(CLI::IsMember({"float64", "float32_reference"}));
  cmd->add_flag("--json", opts->json, "one JSON object instead of text");
  cmd->add_option("--trials", opts->trials, "law checks: trials per law (default 100)")
      ->check(CLI::Range(1, 100000));
  cmd->add_option("--seed", opts->seed, "law checks: random seed (default 1)");
  cmd->callback([opts] { run(*opts); });
}};

}  // namespace

}  // namespace grape::cli
