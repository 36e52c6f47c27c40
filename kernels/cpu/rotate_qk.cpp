// Public rotate_qk entries: validate, then dispatch on the storage type.
#include "cpu/rotate_qk.hpp"

#include "cpu/rotate_qk_plan.hpp"
#include "grape/detail/error.hpp"

namespace grape::cpu {
namespace {

void run(const detail::rotate_plan& plan, dtype type) {
  switch (type) {
    case dtype::f32: return detail::run_rotate_f32(plan);
    case dtype::f16: return detail::run_rotate_f16(plan);
    case dtype::bf16: return detail::run_rotate_bf16(plan);
  }
}

}  // namespace

void rotate_qk(const rotary_spec& spec, const rotate_qk_args& args) {
  const detail::owned_plan owned = detail::plan_cpu_rotation(spec, args);
  run(owned.plan, args.type);
}

void rotate_qk_backward(const rotary_spec& spec, const rotate_qk_args& args) {
  detail::require_forward_extras_absent(args);
  // R(φ)ᵀ = R(−φ): the same kernel with the sine negated; the factor multiplies both again.
  detail::owned_plan owned = detail::plan_cpu_rotation(spec, args);
  owned.plan.sin_sign = -1.0f;
  run(owned.plan, args.type);
}

void apply_rotary(const grape::rotary_spec& spec, dtype type, const void* in, void* out,
                  std::int64_t tokens, std::int64_t heads, const std::int64_t* positions) {
  if (positions == nullptr) throw input_error("positions is null");
  if (tokens < 0) throw input_error("tokens is negative");
  if (heads < 0) throw input_error("heads is negative");
  if (spec.head_dim <= 0) throw input_error("spec.head_dim must be positive");
  rotate_qk_args args;
  args.type = type;
  args.q.in = in;
  args.q.out = out;
  args.q.heads = heads;
  args.q.head_stride = spec.head_dim;
  std::int64_t row = 0, size = 0;
  if (__builtin_mul_overflow(heads, static_cast<std::int64_t>(spec.head_dim), &row) ||
      __builtin_mul_overflow(row, tokens, &size))
    throw input_error("tokens * heads * head_dim overflows 64 bits");
  args.q.token_stride = row;
  args.q.size = size;
  args.batch = 1;
  args.seq_len = tokens;
  args.position_ids = positions;
  args.position_type = index_type::i64;
  rotate_qk(spec, args);
}

}  // namespace grape::cpu
