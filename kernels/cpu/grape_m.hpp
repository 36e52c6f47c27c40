#pragma once
// GRAPE-M's learnable and contextual rotations on Q and K (the GRAPE paper's multiplicative
// encodings as its authors train them): plane j of a head turns by p·θ[r, j], where
//   θ[r, ·]  is the head's frequency row: one row shared by every head, or one row per key head
//            (a query head takes the row of the key head it attends with, so GQA keeps the law);
//   p        is the token's integer position (position ids, offsets or its index, as rotate_qk
//            takes them: "non-contextual" GRAPE-M) or its real phase Φ[r', t] (contextual GRAPE-M:
//            Φ_t = Σ_{τ<t} ω_τ, one row shared or one per key head).
// Scores depend on p_n − p_m only, per head: the relative law in Z for positions, in R for phases.
//
// Addressing, dtypes, positions and errors are rotate_qk's (rotate_qk.hpp): grape::input_error
// names the argument, and nothing is written then. Sign: Hugging Face's (y₀ = x₀cos − x₁sin) by
// default; angle_sign = −1 turns by −angle as the authors' apply_rotary_emb does, so a model trained
// with their code gets the same outputs from the same parameters (docs/grape-paper.md).
//
// Precision. Integer positions: exact phases, m·f mod 2^64 from each row's turn fractions, with
// rotate_qk's sine and cosine (one shared row of θ >= 0 runs rotate_qk itself). Real phases: the
// angle Φ·θ is formed in float64 and reduced to a turn fraction, whose cos/sin are rotate_qk's, so
// the angle error is about |Φθ|·2⁻⁵², not float32's |Φθ|·2⁻²⁴ (docs/precision.md). The gradients
// accumulate in float64: grape_m_param_grads forms y = R(φ)x with cos/sin in float64,
// grape_m_rotate_qk_backward_with_grads reads the float32 y the forward wrote.
#include <cstdint>

#include "common/grape_m_args.hpp"
#include "cpu/kernel_vocabulary.hpp"
#include "cpu/rotate_qk.hpp"
#include "grape/math/rotate.hpp"

namespace grape::cpu {

/// Rotates Q and K (args as for rotate_qk; qk_norm, kv_cache and cache must be null, and with
/// phases so must position_ids and offsets).
void grape_m_rotate_qk(const grape_m_spec& spec, const rotate_qk_args& args);

/// Backward: reads dL/d(out) from `in`, writes dL/d(in) to `out` (rotation by −angle).
void grape_m_rotate_qk_backward(const grape_m_spec& spec, const rotate_qk_args& args);

/// The backward and the parameters' gradients in one pass: reads dL/d(out) from `in`, writes
/// dL/d(in) to `out` (which may be `in`), and gives dL/dθ and dL/dΦ as grape_m_param_grads does,
/// formed from the forward's outputs rotated_q / rotated_k (addressed like `in`) instead of its
/// inputs: one float32 cos/sin table per token and key head serves both (the fused attention's
/// backward, which holds the rotated Q and K).
void grape_m_rotate_qk_backward_with_grads(const grape_m_spec& spec, const rotate_qk_args& backward,
                                           const void* rotated_q, const void* rotated_k, grape_m_grads out);

/// dL/dθ and dL/dΦ (grape_m_grads, common/grape_m_args.hpp) from dL/d(out).
void grape_m_param_grads(const grape_m_spec& spec, const rotate_qk_args& forward, const void* grad_q,
                         const void* grad_k, grape_m_grads out);

}  // namespace grape::cpu
