// GRAPE-M's checked plan (grape_m_plan.hpp): the spec's checks, the call's heads and tokens, θ as
// the kernels turn by it, and the parameter-gradient call's arguments; shared by the CPU kernels
// and the CUDA host.
#include "common/grape_m_plan.hpp"

#include <cmath>
#include <numbers>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "grape/detail/error.hpp"
#include "grape/schedule/spec_check.hpp"

namespace grape::kernel {

namespace {

[[noreturn]] void fail(const std::string& what) { throw input_error("grape_m: " + what); }

}  // namespace

grape_m_heads check_grape_m(const grape_m_spec& s, const rotate_qk_args& args) {
  if (s.head_dim <= 0) fail(fmt::format("head_dim must be positive (got {})", s.head_dim));
  if (s.planes <= 0 || 2 * s.planes > s.head_dim)
    fail(fmt::format("planes must be in [1, head_dim / 2 = {}] (got {})", s.head_dim / 2, s.planes));
  if (s.layout != math::layout_kind::half_split && s.layout != math::layout_kind::interleaved)
    fail("layout must be half_split or interleaved");
  if (s.freqs == nullptr) fail("freqs is null");
  if (s.angle_sign != 1 && s.angle_sign != -1) fail(fmt::format("angle_sign must be 1 or -1 (got {})", s.angle_sign));
  if (args.q.heads <= 0 && args.k.heads <= 0) fail("q, k: at least one must have heads");
  const std::int64_t kv = args.k.heads > 0 ? args.k.heads : args.q.heads;
  if (args.q.heads > 0 && args.q.heads % kv != 0)
    fail(fmt::format("q has {} heads, not a multiple of k's {}", args.q.heads, kv));
  const grape_m_heads g{kv, args.q.heads > 0 ? args.q.heads / kv : 0};
  if (s.freq_rows != 1 && s.freq_rows != kv)
    fail(fmt::format("freqs: rows must be 1 or the key heads {} (got {})", kv, s.freq_rows));
  for (std::int64_t i = 0; i < static_cast<std::int64_t>(s.freq_rows) * s.planes; ++i)
    if (!std::isfinite(s.freqs[i]))
      fail(fmt::format("freqs[{}][{}] is not finite", i / s.planes, i % s.planes));
  if (s.phases != nullptr && s.phase_rows != 1 && s.phase_rows != kv)
    fail(fmt::format("phases: rows must be 1 or the key heads {} (got {})", kv, s.phase_rows));
  if (args.cache != nullptr) fail("cache: GRAPE-M computes its angles; pass null");
  if (args.qk_norm != nullptr || args.kv_cache != nullptr)
    fail("qk_norm and kv_cache: not fused into GRAPE-M's rotation; pass null");
  return g;
}

grape_m_plan plan_grape_m(const grape_m_spec& s, const grape_m_heads& g, const rotate_qk_args& args,
                          const device_indices* device) {
  if (s.phases != nullptr && (args.position_ids != nullptr || args.offsets != nullptr))
    fail("positions, offsets: contextual GRAPE-M turns by its phases; pass neither");
  encoding_shape shape;
  shape.owner = "grape_m";
  shape.head_dim = s.head_dim;
  shape.rotary_dim = 2 * s.planes;
  shape.q_layout = shape.k_layout = s.layout;
  grape_m_plan p{make_instance_plan(shape, args, device), g.kv_heads, g.group};
  const std::int64_t tokens = p.owned.plan.total_tokens;
  if (s.phases != nullptr && device == nullptr)
    for (std::int64_t i = 0; i < static_cast<std::int64_t>(s.phase_rows) * tokens; ++i)
      if (!std::isfinite(s.phases[i])) fail(fmt::format("phases[{}][{}] is not finite", i / tokens, i % tokens));
  return p;
}

grape_m_plan plan_grape_m(const grape_m_spec& s, const rotate_qk_args& args, const device_indices* device) {
  return plan_grape_m(s, check_grape_m(s, args), args, device);
}

grape_m_turns turns_of(const grape_m_spec& s) {
  const std::size_t count = static_cast<std::size_t>(s.freq_rows) * s.planes;
  grape_m_turns t{std::vector<math::phase_t>(count), std::vector<double>(count)};
  for (std::size_t i = 0; i < count; ++i) {
    if (!std::isfinite(s.freqs[i])) fail(fmt::format("freqs[{}][{}] is not finite", i / s.planes, i % s.planes));
    t.fractions[i] = math::turn_fraction_of(s.freqs[i]);
    t.turns[i] = s.freqs[i] / (2 * std::numbers::pi);
  }
  return t;
}

std::optional<rotary_spec> grape_m_rotary_spec(const grape_m_spec& s) {
  if (s.phases != nullptr || s.freq_rows != 1) return std::nullopt;
  for (int j = 0; j < s.planes; ++j)
    if (s.freqs[j] < 0) return std::nullopt;
  rotary_spec spec;
  spec.head_dim = s.head_dim;
  spec.rotary_dim = 2 * s.planes;
  spec.layout = s.layout;
  spec.inv_freq.assign(s.freqs, s.freqs + s.planes);
  return spec;
}

namespace {

/// Each side that has heads has its second operand (`q_name`, `k_name`); a phase gradient needs phases.
void check_second_operands(const grape_m_spec& s, const rotate_qk_args& args, const void* q, const char* q_name,
                           const void* k, const char* k_name, const grape_m_grads& out) {
  if (args.q.heads > 0 && q == nullptr) fail(fmt::format("{} is null", q_name));
  if (args.k.heads > 0 && k == nullptr) fail(fmt::format("{} is null", k_name));
  if (s.phases == nullptr && out.phases != nullptr)
    fail("phases: integer positions have no phase gradient; pass null");
}

}  // namespace

rotate_qk_args backward_grads_call_args(const grape_m_spec& s, const rotate_qk_args& backward, const void* rotated_q,
                                        const void* rotated_k, const grape_m_grads& out) {
  check_second_operands(s, backward, rotated_q, "rotated_q", rotated_k, "rotated_k", out);
  return backward;
}

rotate_qk_args grads_call_args(const grape_m_spec& s, const rotate_qk_args& forward, const void* grad_q,
                                       const void* grad_k, const grape_m_grads& out) {
  check_second_operands(s, forward, grad_q, "grad_q", grad_k, "grad_k", out);
  rotate_qk_args args = forward;
  args.q.out = const_cast<void*>(args.q.in);
  args.k.out = const_cast<void*>(args.k.in);
  return args;
}

}  // namespace grape::kernel
