#pragma once
// The GRAPE paper's gated bias from arrays, shared by its tile (bias.cpp) and the fused attention
// (attention.cpp).
#include <optional>

#include "arrays.hpp"
#include "grape/encodings/grape_a_gated.hpp"

namespace grape::python {

/// omega [heads] (ω_h = softplus(ω̃_h)·slope_h), key_gate and query_gate [heads, seq_len] (the
/// softplus outputs; query_gate absent: key-gated), float32, finite; an input_error names a bad one.
gated_linear_bias gated_bias_of(const array& omega, const array& key_gate, const std::optional<array>& query_gate);

}  // namespace grape::python
