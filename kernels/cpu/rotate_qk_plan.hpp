#pragma once
// The CPU's runs of a validated rotate_qk plan (common/rotate_plan.hpp): one instantiation set per
// storage type (rotate_qk_f32.cpp, rotate_qk_f16.cpp, rotate_qk_bf16.cpp).
#include "common/rotate_plan.hpp"
#include "cpu/kernel_vocabulary.hpp"

namespace grape::cpu::detail {

/// make_rotate_plan, then the CPU's choice of streaming stores (args.stores, this CPU's caches).
owned_plan plan_cpu_rotation(const rotary_spec& spec, const rotate_qk_args& args);

/// Runs the plan; one instantiation set per storage type (rotate_qk_f32.cpp, ...).
void run_rotate_f32(const rotate_plan& plan);
void run_rotate_f16(const rotate_plan& plan);
void run_rotate_bf16(const rotate_plan& plan);

}  // namespace grape::cpu::detail
