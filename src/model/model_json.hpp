#pragma once
// The machine-readable form of `grape inspect --json`: one object describing the encoding a
// config builds. Doubles are written with full (round-trip) precision.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>

#include "model/rope_schedule.hpp"
#include "model/model_config.hpp"

namespace grape::model {

/// `table` is the evaluated rotary table (required for rotary models, ignored otherwise).
/// kv_bytes_per_element: the KV-cache dtype size the estimate assumes (bf16: 2).
nlohmann::json describe_json(const model_description& m, const schedule_table* table,
                             int kv_bytes_per_element = 2);

/// KV-cache bytes at max_position_embeddings; nullopt when the config has no maximum or the
/// product does not fit in 64 bits.
std::optional<std::int64_t> kv_bytes_at_max_context(const model_description& m,
                                                    int kv_bytes_per_element);

/// Per-plane wavelength in tokens, 2π/θ.
double wavelength(double inv_freq);

}  // namespace grape::model
