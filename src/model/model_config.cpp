// config.json → model_description (model_config.hpp). Field spellings follow the Hugging Face
// classes: Llama/Mistral/Qwen/Gemma/Phi-3 (rope_theta, rope_scaling / rope_parameters,
// partial_rotary_factor), GPT-NeoX (rotary_pct, rotary_emb_base), GPT-J (rotary_dim, interleaved),
// DeepSeek-V2/V3 (qk_rope_head_dim, rope_interleave), Falcon (alibi), MPT (attn_config), BLOOM, T5.
#include "model/model_config.hpp"

#include <fmt/format.h>

#include <cmath>
#include <initializer_list>

#include "grape/detail/enum_names.hpp"
#include "grape/detail/error_within.hpp"
#include "grape/detail/read_file.hpp"
#include "grape/math/bias.hpp"
#include "model/json_fields.hpp"

namespace grape::model {

namespace {

constexpr std::int64_t max_heads = 1 << 16;
constexpr std::int64_t max_head_dim = 1 << 16;
constexpr std::int64_t max_hidden = 1 << 26;
constexpr std::int64_t max_positions = std::int64_t{1} << 40;

struct found_int {
  std::string key;
  std::int64_t value = 0;
};

// The first of several spellings present in the config.
std::optional<found_int> first_int(const json_fields& f, const json& j,
                                   std::initializer_list<const char*> keys, std::int64_t lo,
                                   std::int64_t hi) {
  for (const char* k : keys)
    if (auto v = f.integer_in(j, k, lo, hi)) return found_int{k, *v};
  return std::nullopt;
}

bool is_one_of(const std::string& s, std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (s == n) return true;
  return false;
}

void read_sizes(const json_fields& f, const json& j, model_description& m) {
  const auto heads = first_int(f, j, {"num_attention_heads", "n_head", "n_heads", "num_heads"}, 1,
                               max_heads);
  if (!heads) f.fail("num_attention_heads", "missing (also looked for n_head, n_heads, num_heads)");
  m.num_heads = static_cast<int>(heads->value);
  if (const auto layers = first_int(f, j, {"num_hidden_layers", "n_layer", "n_layers", "num_layers"},
                                    1, max_heads))
    m.num_layers = static_cast<int>(layers->value);

  if (const auto hd = first_int(f, j, {"head_dim", "d_kv"}, 1, max_head_dim)) {
    m.head_dim = static_cast<int>(hd->value);
  } else {
    const auto hidden = first_int(f, j, {"hidden_size", "n_embd", "d_model"}, 1, max_hidden);
    if (!hidden) f.fail("hidden_size", "missing (also looked for head_dim, n_embd, d_model)");
    if (hidden->value % heads->value != 0)
      f.fail(hidden->key, fmt::format("{} is not divisible by {} = {}", hidden->value, heads->key,
                                      heads->value));
    if (hidden->value / heads->value > max_head_dim)
      f.fail(hidden->key, fmt::format("gives a head dim of {}, above the supported {}",
                                      hidden->value / heads->value, max_head_dim));
    m.head_dim = static_cast<int>(hidden->value / heads->value);
  }

  // KV heads: GQA, Falcon's multi_query / n_head_kv, MPT's attn_config.kv_n_heads.
  m.num_kv_heads = m.num_heads;
  std::string kv_key = "num_key_value_heads";
  if (auto kv = first_int(f, j, {"num_key_value_heads", "num_kv_heads", "n_head_kv"}, 1, max_heads)) {
    m.num_kv_heads = static_cast<int>(kv->value);
    kv_key = kv->key;
  } else if (f.boolean(j, "multi_query").value_or(false)) {
    m.num_kv_heads = 1;
  } else if (const json* ac = f.object(j, "attn_config")) {
    if (auto kv = f.integer_in(*ac, "kv_n_heads", 1, max_heads, "attn_config")) {
      m.num_kv_heads = static_cast<int>(*kv);
      kv_key = "attn_config.kv_n_heads";
    }
  }
  if (m.num_kv_heads > m.num_heads || m.num_heads % m.num_kv_heads != 0)
    f.fail(kv_key, fmt::format("must divide the number of heads ({}) (got {})", m.num_heads,
                               m.num_kv_heads));

  if (auto mp = first_int(f, j, {"max_position_embeddings", "n_positions", "max_seq_len"}, 1,
                          max_positions))
    m.max_position_embeddings = mp->value;
  else if (is_one_of(m.model_type, {"falcon", "RefinedWeb", "RefinedWebModel"}))
    m.max_position_embeddings = 2048;  // the Falcon class default
}

void read_alibi(const json_fields& f, const json& j, model_description& m) {
  m.kind = encoding_kind::alibi;
  if (const json* ac = f.object(j, "attn_config"))
    if (auto mb = f.number(*ac, "alibi_bias_max", "attn_config")) {
      if (*mb <= 0) f.fail("attn_config.alibi_bias_max", fmt::format("must be > 0 (got {})", *mb));
      m.alibi.max_bias = *mb;
    }
  m.alibi.slopes.resize(m.num_heads);
  for (int h = 0; h < m.num_heads; ++h)
    m.alibi.slopes[h] = math::alibi_slope(h, m.num_heads, m.alibi.max_bias);
}

void read_t5(const json_fields& f, const json& j, model_description& m) {
  m.kind = encoding_kind::t5;
  if (auto nb = f.integer_in(j, "relative_attention_num_buckets", 4, 1 << 16)) {
    if (*nb % 2 != 0) f.fail("relative_attention_num_buckets", fmt::format("must be even (got {})", *nb));
    m.t5.num_buckets = static_cast<int>(*nb);
  }
  if (auto md = f.integer_in(j, "relative_attention_max_distance", 1, 1 << 30)) {
    m.t5.max_distance = static_cast<int>(*md);
  }
  if (m.t5.max_distance <= m.t5.num_buckets / 2)
    f.fail("relative_attention_max_distance",
           fmt::format("must be > relative_attention_num_buckets / 2 = {} (got {})",
                       m.t5.num_buckets / 2, m.t5.max_distance));
  m.t5.is_decoder = f.boolean(j, "is_decoder").value_or(false);
  m.t5.encoder_decoder = f.boolean(j, "is_encoder_decoder").value_or(true);
}

// The dict holding the schedule: rope_parameters (newer) wins over rope_scaling (legacy).
const json* schedule_dict(const json_fields& f, const json& j, std::string& name) {
  if (const json* rp = f.object(j, "rope_parameters")) {
    name = "rope_parameters";
    // Per-layer-type parameters (e.g. {"full_attention": {...}, "sliding_attention": {...}}).
    if (!rp->contains("rope_type") && !rp->contains("type") && rp->contains("full_attention")) {
      name = "rope_parameters.full_attention";
      return f.object(*rp, "full_attention", "rope_parameters");
    }
    return rp;
  }
  if (const json* rs = f.object(j, "rope_scaling")) {
    name = "rope_scaling";
    return rs;
  }
  name.clear();
  return nullptr;
}

void read_rotary(const json_fields& f, const json& j, model_description& m) {
  m.kind = encoding_kind::rotary;
  rotary_model& r = m.rotary;
  rope_schedule& s = r.schedule;
  const json empty = json::object();
  std::string dn;
  const json* dict_ptr = schedule_dict(f, j, dn);
  const json& dict = dict_ptr ? *dict_ptr : empty;
  r.source = dn;
  auto in_dict = [&](std::string_view key) { return json_fields::join(dn, key); };

  // Base.
  if (auto b = f.number(dict, "rope_theta", dn)) {
    s.base = *b;
    if (s.base <= 1.0) f.fail(in_dict("rope_theta"), fmt::format("must be > 1 (got {})", s.base));
  } else if (auto b2 = f.number(j, "rope_theta")) {
    s.base = *b2;
    if (s.base <= 1.0) f.fail("rope_theta", fmt::format("must be > 1 (got {})", s.base));
  } else if (auto b3 = f.number(j, "rotary_emb_base")) {
    s.base = *b3;
    if (s.base <= 1.0) f.fail("rotary_emb_base", fmt::format("must be > 1 (got {})", s.base));
  }

  // Rotated channels.
  r.head_dim = m.head_dim;
  int rot = m.head_dim;
  r.rotary_dim_from = "head_dim";
  bool interleave = is_one_of(m.model_type, {"gptj", "codegen"});
  if (auto q = f.integer_in(j, "qk_rope_head_dim", 1, max_head_dim)) {
    r.head_dim = rot = static_cast<int>(*q);
    r.rotary_dim_from = "qk_rope_head_dim";
    interleave = true;  // DeepSeek's default (rope_interleave = true)
  } else if (auto rd = f.integer_in(j, "rotary_dim", 1, max_head_dim)) {
    rot = static_cast<int>(*rd);
    r.rotary_dim_from = "rotary_dim";
  } else if (auto pct = f.number(j, "rotary_pct")) {
    if (*pct <= 0 || *pct > 1) f.fail("rotary_pct", fmt::format("must be in (0, 1] (got {})", *pct));
    rot = static_cast<int>(m.head_dim * *pct);
    r.rotary_dim_from = "rotary_pct";
  } else {
    std::optional<double> prf = f.number(dict, "partial_rotary_factor", dn);
    r.rotary_dim_from = in_dict("partial_rotary_factor");
    if (!prf) {
      prf = f.number(j, "partial_rotary_factor");
      r.rotary_dim_from = "partial_rotary_factor";
    }
    if (prf) {
      if (*prf <= 0 || *prf > 1)
        f.fail(r.rotary_dim_from, fmt::format("must be in (0, 1] (got {})", *prf));
      rot = static_cast<int>(m.head_dim * *prf);
    } else {
      r.rotary_dim_from = "head_dim";
    }
  }
  if (rot <= 0 || rot % 2 != 0)
    f.fail(r.rotary_dim_from, fmt::format("gives a rotary dim that is not even and positive (got {})", rot));
  if (rot > r.head_dim)
    f.fail(r.rotary_dim_from, fmt::format("rotary dim {} exceeds head dim {}", rot, r.head_dim));
  r.rotary_dim = s.rotary_dim = rot;
  if (auto ri = f.boolean(j, "rope_interleave")) interleave = *ri;
  r.layout = interleave ? layout_kind::interleaved : layout_kind::half_split;

  // Schedule type.
  auto type_name = f.string(dict, "rope_type", dn);
  std::string type_key = in_dict("rope_type");
  if (!type_name) {
    type_name = f.string(dict, "type", dn);
    type_key = in_dict("type");
  }
  if (!type_name) {
    if (dict.contains("factor")) f.fail(in_dict("rope_type"), "missing (the dict has a factor)");
    type_name = "default";
  }
  if (*type_name == "mrope") {
    // Qwen2-VL: sections of planes follow (t, h, w); for text positions t = h = w, so the table is
    // the default one. grape reads 1-D token positions here.
    m.notes.push_back("M-RoPE (mrope_section): text positions (t = h = w) give default RoPE; "
                      "inspect and apply use 1-D token positions");
    type_name = "default";
  }
  const auto type = rope_type_from_string(*type_name);
  if (!type)
    f.fail(type_key, fmt::format("unknown rope type {} (known: default, linear, ntk, dynamic, yarn, "
                                 "llama3, longrope)", json_fields::shown(json(*type_name))));
  s.type = *type;
  s.max_position_embeddings = m.max_position_embeddings;

  // Original context: inside the dict, or at the top level (Phi-3).
  std::string orig_key = in_dict("original_max_position_embeddings");
  auto orig = f.integer_in(dict, "original_max_position_embeddings", 1, max_positions, dn);
  if (!orig) {
    orig = f.integer_in(j, "original_max_position_embeddings", 1, max_positions);
    orig_key = "original_max_position_embeddings";
  }
  const bool uses_orig = s.type == rope_type::yarn || s.type == rope_type::llama3 ||
                         s.type == rope_type::longrope;
  if (uses_orig) {
    if (!orig && s.type == rope_type::yarn) {
      if (m.max_position_embeddings == 0)
        f.fail("max_position_embeddings", "missing (yarn needs it or original_max_position_embeddings)");
      orig = m.max_position_embeddings;
    }
    if (!orig) f.fail(orig_key, fmt::format("missing (required for {})", to_string(s.type)));
    if (m.max_position_embeddings > 0 && *orig > m.max_position_embeddings)
      f.fail(orig_key, fmt::format("must be <= max_position_embeddings ({}) for {} (got {})",
                                   m.max_position_embeddings, to_string(s.type), *orig));
    s.original_max_position_embeddings = *orig;
  }

  // Factor.
  if (auto fa = f.number(dict, "factor", dn)) {
    s.factor = *fa;
  } else if (s.type == rope_type::yarn || s.type == rope_type::longrope) {
    if (m.max_position_embeddings == 0) f.fail(in_dict("factor"), "missing and no max_position_embeddings to derive it");
    s.factor = static_cast<double>(m.max_position_embeddings) /
               static_cast<double>(s.original_max_position_embeddings);
  } else if (s.type != rope_type::default_rope) {
    f.fail(in_dict("factor"), fmt::format("missing (required for {})", to_string(s.type)));
  }
  const bool factor_at_least_one = s.type != rope_type::default_rope && s.type != rope_type::longrope;
  if (factor_at_least_one && s.factor < 1.0)
    f.fail(in_dict("factor"), fmt::format("must be >= 1 for {} (got {})", to_string(s.type), s.factor));
  if (s.type == rope_type::dynamic && m.max_position_embeddings == 0)
    f.fail("max_position_embeddings", "missing (required for dynamic)");

  if (s.type == rope_type::yarn) {
    s.beta_fast = f.number(dict, "beta_fast", dn).value_or(32.0);
    s.beta_slow = f.number(dict, "beta_slow", dn).value_or(1.0);
    s.truncate = f.boolean(dict, "truncate", dn).value_or(true);
    s.mscale = f.number(dict, "mscale", dn);
    s.mscale_all_dim = f.number(dict, "mscale_all_dim", dn);
  }
  if (s.type == rope_type::yarn || s.type == rope_type::longrope)
    s.attention_factor = f.number(dict, "attention_factor", dn);
  if (s.type == rope_type::llama3) {
    const auto lo = f.number(dict, "low_freq_factor", dn);
    const auto hi = f.number(dict, "high_freq_factor", dn);
    if (!lo) f.fail(in_dict("low_freq_factor"), "missing (required for llama3)");
    if (!hi) f.fail(in_dict("high_freq_factor"), "missing (required for llama3)");
    s.low_freq_factor = *lo;
    s.high_freq_factor = *hi;
  }
  if (s.type == rope_type::longrope) {
    auto sf = f.number_list(dict, "short_factor", dn);
    auto lf = f.number_list(dict, "long_factor", dn);
    if (!sf) f.fail(in_dict("short_factor"), "missing (required for longrope)");
    if (!lf) f.fail(in_dict("long_factor"), "missing (required for longrope)");
    s.short_factor = std::move(*sf);
    s.long_factor = std::move(*lf);
  }
  validate(s, fmt::format("{}: {}", f.file(), dn.empty() ? "rope_scaling" : dn));

  if (s.type == rope_type::yarn &&
      s.factor * static_cast<double>(s.original_max_position_embeddings) >
          static_cast<double>(m.max_position_embeddings))
    m.notes.push_back(fmt::format("yarn factor {} x original context {} = {} tokens, beyond "
                                  "max_position_embeddings {} (the KV-cache figure uses the latter)",
                                  s.factor, s.original_max_position_embeddings,
                                  s.factor * static_cast<double>(s.original_max_position_embeddings),
                                  m.max_position_embeddings));
  if (auto sw = f.integer(j, "sliding_window"))
    m.notes.push_back(fmt::format("sliding_window {}: keys farther back than this are masked; "
                                  "positions are still absolute RoPE positions", *sw));
}

void kv_cache(const json_fields& f, const json& j, model_description& m) {
  if (m.num_layers == 0) {
    m.kv_formula = "unknown: the config gives no layer count";
    return;
  }
  if (auto rank = f.integer_in(j, "kv_lora_rank", 1, max_head_dim)) {
    // MLA caches one latent vector plus the shared rope key per token and layer.
    m.kv_elements_per_token = m.num_layers * (*rank + m.rotary.head_dim);
    m.kv_formula = fmt::format("layers {} x (kv_lora_rank {} + qk_rope_head_dim {}) (MLA latent cache)",
                               m.num_layers, *rank, m.rotary.head_dim);
    return;
  }
  int layers = m.num_layers;
  std::string what = "layers";
  if (m.kind == encoding_kind::t5) {
    if (auto dl = f.integer_in(j, "num_decoder_layers", 1, max_heads)) layers = static_cast<int>(*dl);
    what = "decoder layers (self-attention cache)";
  }
  m.kv_elements_per_token = std::int64_t{2} * layers * m.num_kv_heads * m.head_dim;
  m.kv_formula = fmt::format("2 x {} {} x kv_heads {} x head_dim {}", what, layers, m.num_kv_heads,
                             m.head_dim);
}

}  // namespace

model_description parse_model_config(std::string_view text, const std::string& file) {
  const json_fields f{file};
  const json j = f.parse(text);
  model_description m;
  m.file = file;
  m.model_type = f.string(j, "model_type").value_or("");
  read_sizes(f, j, m);

  const json* ac = f.object(j, "attn_config");
  const auto falcon_alibi = f.boolean(j, "alibi");
  if (m.model_type == "bloom") {
    read_alibi(f, j, m);
  } else if (ac && f.boolean(*ac, "alibi", "attn_config").value_or(false)) {
    read_alibi(f, j, m);
  } else if (ac && m.model_type == "mpt") {
    f.fail("attn_config.alibi", "false: this MPT uses learned absolute position embeddings, which "
                                "grape does not model");
  } else if (falcon_alibi.value_or(false)) {
    read_alibi(f, j, m);
  } else if (is_one_of(m.model_type, {"t5", "mt5", "umt5"}) ||
             j.contains("relative_attention_num_buckets")) {
    read_t5(f, j, m);
  } else {
    read_rotary(f, j, m);
  }
  kv_cache(f, j, m);
  if (m.kind == encoding_kind::rotary && m.rotary.schedule.type == rope_type::yarn &&
      m.rotary.schedule.mscale_all_dim) {
    const auto& s = m.rotary.schedule;
    const auto nope = f.integer_in(j, "qk_nope_head_dim", 0, max_head_dim).value_or(0);
    const double qk = static_cast<double>(nope + m.rotary.head_dim);
    const double ms = yarn_get_mscale(s.factor, *s.mscale_all_dim);
    m.notes.push_back(fmt::format("DeepSeek softmax scale: qk_head_dim^-0.5 x mscale^2 = {}^-0.5 x {}^2 "
                                  "= {:.16g} (mscale = get_mscale(factor, mscale_all_dim))",
                                  qk, ms, ms * ms / std::sqrt(qk)));
  }
  return m;
}

model_description load_model_config(const std::string& path) {
  return parse_model_config(grape::detail::read_file(path), path);
}

std::string_view to_string(encoding_kind k) {
  constexpr grape::detail::enum_names<encoding_kind, 3> names{
      {{encoding_kind::rotary, "rotary"}, {encoding_kind::alibi, "alibi"}, {encoding_kind::t5, "t5_relative_bias"}}};
  return grape::detail::name_of(names, k);
}

schedule_table evaluate_schedule(const model_description& desc, std::int64_t seq_len,
                                 frequency_precision precision) {
  try {
    return evaluate(desc.rotary.schedule, seq_len, precision);
  } catch (const input_error& e) {
    if (desc.file.empty()) throw;
    throw within(desc.file, e);
  }
}

evaluated_rotary evaluate_rotary(const model_description& desc, std::optional<std::int64_t> seq_len,
                                 frequency_precision precision) {
  const rope_schedule& s = desc.rotary.schedule;
  const std::int64_t len = seq_len.value_or(desc.max_position_embeddings > 0 ? desc.max_position_embeddings
                                                                             : s.original_max_position_embeddings);
  if (len < 0) throw input_error(fmt::format("seq_len: must be >= 0 (got {})", len));
  evaluated_rotary r;
  r.table = evaluate_schedule(desc, len, precision);
  r.spec = make_rotary_spec(r.table, desc.rotary.head_dim, desc.rotary.rotary_dim, desc.rotary.layout);
  return r;
}

}  // namespace grape::model
