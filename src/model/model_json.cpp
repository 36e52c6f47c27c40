// inspect --json (model_json.hpp).
#include "model/model_json.hpp"

#include <numbers>

namespace grape::model {

double wavelength(double inv_freq) { return 2.0 * std::numbers::pi / inv_freq; }

std::optional<std::int64_t> kv_bytes_at_max_context(const model_description& m,
                                                    int kv_bytes_per_element) {
  std::int64_t per_token = 0, total = 0;
  if (m.kv_elements_per_token <= 0 || m.max_position_embeddings <= 0 ||
      __builtin_mul_overflow(m.kv_elements_per_token, std::int64_t{kv_bytes_per_element}, &per_token) ||
      __builtin_mul_overflow(per_token, m.max_position_embeddings, &total))
    return std::nullopt;
  return total;
}

namespace {

nlohmann::json schedule_json(const rope_schedule& s, const schedule_table& t) {
  nlohmann::json j{{"type", to_string(s.type)},
                   {"base", s.base},
                   {"effective_base", t.effective_base},
                   {"factor", s.factor},
                   {"seq_len", t.seq_len},
                   {"scaled", t.scaled}};
  if (s.max_position_embeddings > 0) j["max_position_embeddings"] = s.max_position_embeddings;
  if (s.original_max_position_embeddings > 0)
    j["original_max_position_embeddings"] = s.original_max_position_embeddings;
  switch (s.type) {
    case rope_type::yarn:
      j["beta_fast"] = s.beta_fast;
      j["beta_slow"] = s.beta_slow;
      j["truncate"] = s.truncate;
      j["correction_range"] = {t.yarn_low, t.yarn_high};
      if (s.mscale) j["mscale"] = *s.mscale;
      if (s.mscale_all_dim) j["mscale_all_dim"] = *s.mscale_all_dim;
      break;
    case rope_type::llama3:
      j["low_freq_factor"] = s.low_freq_factor;
      j["high_freq_factor"] = s.high_freq_factor;
      break;
    case rope_type::longrope:
      j["factors_used"] = t.long_factors ? "long_factor" : "short_factor";
      break;
    default:
      break;
  }
  return j;
}

}  // namespace

nlohmann::json describe_json(const model_description& m, const schedule_table* table,
                             int kv_bytes_per_element) {
  nlohmann::json j;
  j["file"] = m.file;
  j["model_type"] = m.model_type;
  j["kind"] = to_string(m.kind);
  j["num_heads"] = m.num_heads;
  j["num_kv_heads"] = m.num_kv_heads;
  j["num_layers"] = m.num_layers;
  j["max_position_embeddings"] =
      m.max_position_embeddings > 0 ? nlohmann::json(m.max_position_embeddings) : nlohmann::json();
  j["notes"] = m.notes;

  nlohmann::json kv{{"dtype", "bf16"},
                    {"bytes_per_element", kv_bytes_per_element},
                    {"formula", m.kv_formula}};
  if (m.kv_elements_per_token > 0) {
    kv["elements_per_token"] = m.kv_elements_per_token;
    kv["bytes_per_token"] = m.kv_elements_per_token * kv_bytes_per_element;
    if (m.max_position_embeddings > 0) kv["max_context"] = m.max_position_embeddings;
    if (const auto at_max = kv_bytes_at_max_context(m, kv_bytes_per_element))
      kv["bytes_at_max_context"] = *at_max;
  }
  j["kv_cache"] = kv;

  if (m.kind == encoding_kind::rotary && table) {
    const auto& r = m.rotary;
    j["layout"] = math::layout_name(r.layout);
    j["head_dim"] = r.head_dim;
    j["attention_head_dim"] = m.head_dim;
    j["rotary_dim"] = r.rotary_dim;
    j["rotary_dim_from"] = r.rotary_dim_from;
    j["schedule_source"] = r.source;
    j["schedule"] = schedule_json(r.schedule, *table);
    j["inv_freq"] = table->inv_freq;
    std::vector<double> wl, interp;
    std::vector<std::string> bands;
    for (std::size_t i = 0; i < table->inv_freq.size(); ++i) {
      wl.push_back(wavelength(table->inv_freq[i]));
      interp.push_back(table->base_inv_freq[i] / table->inv_freq[i]);
      bands.emplace_back(to_string(table->bands[i]));
    }
    j["wavelength_tokens"] = wl;
    j["interpolation"] = interp;
    j["bands"] = bands;
    j["attention_factor"] = table->attention_factor;
    j["attention_factor_applied_to"] = "cos_and_sin";
    j["frequency_precision"] = to_string(table->precision);
    j["alibi_slopes"] = nullptr;
  } else {
    j["layout"] = nullptr;
    j["head_dim"] = m.head_dim;
    j["rotary_dim"] = 0;
    j["inv_freq"] = nlohmann::json::array();
    j["attention_factor"] = nullptr;
    j["frequency_precision"] = "float64";
    j["alibi_slopes"] = m.kind == encoding_kind::alibi ? nlohmann::json(m.alibi.slopes) : nlohmann::json();
    if (m.kind == encoding_kind::alibi) j["alibi_bias_max"] = m.alibi.max_bias;
    if (m.kind == encoding_kind::t5)
      j["t5"] = {{"num_buckets", m.t5.num_buckets},
                 {"max_distance", m.t5.max_distance},
                 {"is_decoder", m.t5.is_decoder},
                 {"encoder_bidirectional", m.t5.encoder_decoder || !m.t5.is_decoder},
                 {"decoder_bidirectional", false}};
  }
  return j;
}

}  // namespace grape::model
