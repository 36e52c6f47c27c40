#pragma once
// Which matrix instructions the fused attention's products use, chosen at run time.
//
// bf16 storage multiplies bf16 tiles with AVX512-BF16 dot products (VDPBF16PS) where the CPU has
// them, accumulating in float32; everything else, and every CPU without them, keeps the float32
// path (Eigen's GEMM kernel). f16 storage stays on the float32 path: rounding f16 operands to
// bf16 would lose three bits of their significand, and AVX512-FP16 / AMX-FP16 paths are not
// written yet. No AMX path either (docs/performance.md says why). The choice is process-wide: by
// default the fastest path the CPU has, or the one GRAPE_CPU_MATMUL (auto, f32, avx512bf16) or
// set_matmul_path names, so that tests run each path a machine has.
#include "cpu/rotate_qk.hpp"

namespace grape::cpu {

enum class matmul_path { automatic, f32, avx512_bf16 };

/// What this CPU can run (CPUID, and the OS saving the AVX-512 state).
struct matmul_units {
  bool avx512_bf16 = false;
  bool amx_bf16 = false;     // reported, not used: no AMX path yet
  bool avx512_fp16 = false;  // reported, not used: f16 stays on the float32 path
};
matmul_units cpu_matmul_units();

/// The process-wide request: initially GRAPE_CPU_MATMUL's (unset or "auto": automatic; "f32";
/// "avx512bf16"; anything else throws input_error at the first call that asks), then the last
/// set_matmul_path. Safe to call from any thread.
void set_matmul_path(matmul_path p);
matmul_path requested_matmul_path();

/// The path a call with this storage type takes: bf16 storage gets avx512_bf16 when requested
/// or automatic on a CPU that has it, f32 when requested or on a CPU without it; f32 and f16
/// storage always get f32. Throws input_error when avx512_bf16 is requested on a CPU without it.
matmul_path matmul_path_for(dtype storage);

/// "f32" or "avx512bf16".
const char* matmul_path_name(matmul_path p);

}  // namespace grape::cpu
