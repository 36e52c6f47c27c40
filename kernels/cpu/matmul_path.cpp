// The run-time choice of the attention's matrix instructions (cpu/matmul_path.hpp).
#include "cpu/matmul_path.hpp"

#include <atomic>
#include <cstdlib>
#include <string>

#include "grape/detail/error.hpp"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace grape::cpu {

namespace {

/// -1: not read from the environment yet; -2: GRAPE_CPU_MATMUL named no path; else a matmul_path.
std::atomic<int> requested{-1};

int from_environment() {
  const char* e = std::getenv("GRAPE_CPU_MATMUL");
  const std::string v = e ? e : "";
  if (v.empty() || v == "auto") return static_cast<int>(matmul_path::automatic);
  if (v == "f32") return static_cast<int>(matmul_path::f32);
  if (v == "avx512bf16") return static_cast<int>(matmul_path::avx512_bf16);
  return -2;
}

}  // namespace

matmul_units cpu_matmul_units() {
  matmul_units u;
#if defined(__x86_64__)
  __builtin_cpu_init();
  // __builtin_cpu_supports also checks that the OS saves the AVX-512 registers (XGETBV).
  u.avx512_bf16 = __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512bw");
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
    u.amx_bf16 = (d >> 22) & 1u;     // CPUID.(7,0):EDX[22]
    u.avx512_fp16 = (d >> 23) & 1u;  // CPUID.(7,0):EDX[23]
  }
#endif
  return u;
}

void set_matmul_path(matmul_path p) { requested.store(static_cast<int>(p)); }

matmul_path requested_matmul_path() {
  int r = requested.load();
  if (r == -1) {
    int expected = -1;
    requested.compare_exchange_strong(expected, from_environment());
    r = requested.load();
  }
  if (r == -2)
    throw input_error(std::string("GRAPE_CPU_MATMUL must be auto, f32 or avx512bf16 (got \"") +
                      std::getenv("GRAPE_CPU_MATMUL") + "\")");
  return static_cast<matmul_path>(r);
}

matmul_path matmul_path_for(dtype storage) {
  static const bool has_bf16 = cpu_matmul_units().avx512_bf16;
  const matmul_path r = requested_matmul_path();
  if (r == matmul_path::avx512_bf16 && !has_bf16)
    throw input_error("matmul path avx512bf16 requested (GRAPE_CPU_MATMUL or set_matmul_path) but this CPU has no AVX512-BF16");
  if (storage != dtype::bf16 || r == matmul_path::f32) return matmul_path::f32;
  return has_bf16 ? matmul_path::avx512_bf16 : matmul_path::f32;
}

const char* matmul_path_name(matmul_path p) {
  switch (p) {
    case matmul_path::automatic: return "auto";
    case matmul_path::f32: return "f32";
    case matmul_path::avx512_bf16: return "avx512bf16";
  }
  return "?";
}

}  // namespace grape::cpu
