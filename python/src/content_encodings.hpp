#pragma once
// The content-dependent encodings from arrays (gated GRAPE-A's and GRAPE-AP's biases, contextual
// GRAPE-M's rotation), shared by their tiles and rotations (bias.cpp, grape_m.cpp) and the fused
// attention (attention.cpp).
#include <optional>

#include "arrays.hpp"
#include "grape/encodings/grape_a_gated.hpp"
#include "grape/encodings/grape_ap.hpp"
#include "grape/inject/rotate_by_phase.hpp"

namespace grape::python {

/// omega [heads] (ω_h = softplus(ω̃_h)·slope_h), key_gate and query_gate [heads, seq_len] (the
/// softplus outputs; query_gate absent: key-gated), float32, finite; an input_error names a bad one.
gated_linear_bias gated_bias_of(const array& omega, const array& key_gate, const std::optional<array>& query_gate);

/// GRAPE-AP's path-integral bias from projections [heads, seq_len, p_dim] (float32 or float64, finite).
path_integral_bias path_integral_of(const array& projections, double norm_eps);

/// Contextual GRAPE-M's rotation of head_dim channels: freqs θ [planes] or [heads, planes], phases
/// Φ [rows, length] (rows 1 or heads) at token positions 0..length − 1; float32 or float64, finite.
phase_rotation phase_rotation_of(const array& freqs, const array& phases, int head_dim);

}  // namespace grape::python
